"""Canonical JSON for payloads and metadata, with errors that name the offending path.

Canonical means: sorted keys, no insignificant whitespace, UTF-8 (no ASCII escaping), and
no NaN or Infinity (which are not JSON and break other readers of the log).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import InvalidInput, InvalidPayload, shown

__all__ = ["MAX_DEPTH", "Serialized", "check_text", "dumps", "loads", "serialize"]

#: The deepest nesting of arrays and objects a payload or metadata value may have: orjson's
#: own limit (its encoder refuses deeper values). Deeper JSON is almost certainly a bug (a
#: runaway recursion), and every reader of the log would have to recurse as deep.
MAX_DEPTH = 254


def check_text(value: str, what: str) -> None:
    """Reject strings a store cannot keep: lone surrogates (e.g. from bad decoding), which
    UTF-8 refuses, and NUL characters, which PostgreSQL's text and jsonb refuse (refused on
    every backend, so that a SQLite store can always be migrated).

    >>> check_text("a" + chr(0) + "b", "content")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    memlane.errors.InvalidInput: content holds a NUL character (U+0000) at character 1; ...
    """
    nul = value.find("\x00")
    if nul >= 0:
        raise InvalidInput(
            f"{what} holds a NUL character (U+0000) at character {nul}; no store keeps it in "
            "text. Remove it, or encode binary data (base64) first."
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{what} holds a lone surrogate {value[exc.start]!r} at character {exc.start}; "
            "it is not valid Unicode. Decode the source with errors='replace' or fix the text."
        ) from None


def _walk(value: Any, what: str) -> None:
    """Check ``value`` for what canonical JSON cannot hold; raise naming the path. Walked
    with a stack of its own, not recursion: a value nested beyond :data:`MAX_DEPTH` (or
    100,000 deep) is refused, never a ``RecursionError``."""
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    while stack:
        value, path, depth = stack.pop()
        if value is None or isinstance(value, bool | int):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidPayload(
                    f"{what} holds {value!r} at {path}; JSON has no NaN or Infinity. "
                    "Replace it with null or a string."
                )
            continue
        if isinstance(value, str):
            check_text(value, f"{what} at {path}")
            continue
        container = isinstance(value, Mapping) or (
            isinstance(value, Sequence) and not isinstance(value, bytes | bytearray)
        )
        if container and depth >= MAX_DEPTH:
            raise InvalidPayload(
                f"{what} is nested more than {MAX_DEPTH} levels deep (at {path[:80]}...); "
                "flatten it, or store the deep part as a JSON string."
            )
        if isinstance(value, Mapping):
            items = []
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidPayload(
                        f"{what} has a non-string key {shown(key)} at {path}; JSON object keys "
                        "are strings. Convert the key with str()."
                    )
                check_text(key, f"{what} key at {path}")
                items.append((item, f"{path}.{key}", depth + 1))
            stack.extend(reversed(items))  # (the first bad value is the one named)
            continue
        if container:
            stack.extend(
                reversed([(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)])
            )
            continue
        raise InvalidPayload(
            f"{what} holds a {type(value).__name__} at {path}, which is not JSON-serialisable. "
            "Convert it to a dict, list, str, number, bool or None first."
        )


def _plain(value: Any) -> Any:
    """What the standard library's encoder cannot write itself, after :func:`_walk` let it
    through: a mapping or sequence of another type, written as an object or array."""
    if isinstance(value, Mapping):
        return dict(value)
    return list(value)


@dataclass(frozen=True, slots=True)
class Serialized:
    """A value already validated by :func:`serialize`: its canonical JSON ``text`` and
    ``value``, a fresh copy decoded from that text (what a reader of the log gets back).

    ``record()`` takes one as its payload, so a caller that had to serialise a payload
    anyway (``record_tool_output``) does not pay for it twice; the returned event's payload
    is ``value``, not another decoding of megabytes.
    """

    text: str
    value: Any


def serialize(value: Any, what: str = "payload") -> Serialized:
    """Validate ``value`` and return its canonical JSON text with a decoded copy.

    The common case is checked at C speed by orjson (a 1 MB payload: ~4 ms, against ~21 ms
    with the standard library): the encoder refuses what is not JSON and lone surrogates,
    and decoding the text back must give ``value`` again — which fails for NaN and Infinity
    (orjson writes them as null), for tuples and for integers past 64 bits (which orjson
    refuses). Only then is the value walked in Python, for an error that names the path, or
    to accept tuples and big integers through the standard library's encoder.

    >>> serialize({"b": 1, "a": [1.5, "x"]}).text
    '{"a":[1.5,"x"],"b":1}'
    """
    if isinstance(value, Serialized):
        return value
    try:
        data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        # "\u0000" is how the encoder writes a NUL: the walk says where it is
        if b"\\u0000" not in data:
            decoded = orjson.loads(data)
            if decoded == value:
                return Serialized(data.decode("utf-8"), decoded)
    except (TypeError, ValueError, RecursionError):
        pass  # orjson.JSONEncodeError is a TypeError: the walk below names the bad value
    _walk(value, what)
    text = json.dumps(
        value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_plain
    )
    return Serialized(text, json.loads(text))


def dumps(value: Any, what: str = "payload") -> str:
    """Validate ``value`` and return its canonical JSON text (:func:`serialize`): sorted
    keys, no insignificant whitespace, UTF-8.

    >>> dumps({"b": 1, "a": [1.5, "x"]})
    '{"a":[1.5,"x"],"b":1}'
    """
    return serialize(value, what).text


def loads(text: str | None) -> Any:
    """Decode JSON stored by :func:`dumps` (None stays None).

    The empty list and object (most events' tags and metadata) skip the decoder.
    """
    if text is None:
        return None
    if text == "[]":
        return []
    if text == "{}":
        return {}
    try:
        return orjson.loads(text)  # ~2.5x the standard library's speed on megabytes
    except orjson.JSONDecodeError:  # an integer past 64 bits, which orjson refuses
        return json.loads(text)
