"""Compile ``where`` metadata filters into parameterised SQL.

The filter language is a small, Chroma-like subset::

    {"source": "arxiv"}                          equality
    {"year": {"$gte": 2024, "$lt": 2027}}        ranges ($gt, $gte, $lt, $lte)
    {"tool": {"$in": ["search", "fetch"]}}       membership ($in, $nin)
    {"reviewed": {"$ne": True}}                  inequality
    {"url": {"$exists": True}}                   presence
    {"$or": [{"a": 1}, {"b": 2}]}                boolean combinations ($and, $or)

Keys address the event's ``metadata`` JSON; dots reach into nested objects ("http.status").
Values and key paths always travel as SQL parameters; only fixed operator text is ever
written into the statement, so no filter can inject SQL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InvalidFilter

__all__ = ["compile_where"]

_KEY = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
_COMPARISONS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_OPERATORS = (*_COMPARISONS, "$in", "$nin", "$exists")
_Scalar = str | int | float | bool | None


def _json_path(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise InvalidFilter(
            f"Filter key {key!r} is not a metadata key. Use letters, digits, '_' or '-', "
            "with dots to reach nested keys (e.g. 'http.status')."
        )
    return "$" + "".join(f'."{part}"' for part in key.split("."))


def _scalar(value: Any, key: str, op: str) -> _Scalar:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise InvalidFilter(
        f"Filter {key!r} {op} expects a string, number, bool or None, got "
        f"{type(value).__name__} {value!r}."
    )


def _condition(column: str, key: str, op: str, value: Any, params: list[Any]) -> str:
    path = _json_path(key)
    if op in _COMPARISONS:
        value = _scalar(value, key, op)
        if value is None:
            if op not in ("$eq", "$ne"):
                raise InvalidFilter(f"Filter {key!r} {op} cannot compare with None.")
            params.append(path)
            return f"json_extract({column}, ?) IS {'NOT ' if op == '$ne' else ''}NULL"
        params.extend((path, value))
        if op == "$ne":  # a missing key is "not equal" too
            return f"(json_extract({column}, ?) IS NOT ?)"
        return f"json_extract({column}, ?) {_COMPARISONS[op]} ?"
    if op in ("$in", "$nin"):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
            raise InvalidFilter(f"Filter {key!r} {op} expects a non-empty list, got {value!r}.")
        items = [_scalar(item, key, op) for item in value]
        params.append(path)
        params.extend(items)
        marks = ", ".join("?" for _ in items)
        negate = "NOT " if op == "$nin" else ""
        return f"coalesce(json_extract({column}, ?) {negate}IN ({marks}), {int(bool(negate))})"
    if op == "$exists":
        if not isinstance(value, bool):
            raise InvalidFilter(f"Filter {key!r} $exists expects true or false, got {value!r}.")
        params.append(path)
        return f"json_type({column}, ?) IS {'NOT ' if value else ''}NULL"
    raise InvalidFilter(
        f"Unsupported filter operator {op!r} on key {key!r}. "
        f"Use one of {', '.join(_OPERATORS)}, or $and / $or to combine filters."
    )


def _compile(where: Mapping[str, Any], column: str, params: list[Any]) -> str:
    if not isinstance(where, Mapping) or not where:
        raise InvalidFilter(f"A filter must be a non-empty dict, got {where!r}.")
    parts: list[str] = []
    for key, spec in where.items():
        if key in ("$and", "$or"):
            if isinstance(spec, str | bytes) or not isinstance(spec, Sequence) or not spec:
                raise InvalidFilter(f"{key} expects a non-empty list of filters, got {spec!r}.")
            joiner = " AND " if key == "$and" else " OR "
            parts.append("(" + joiner.join(_compile(sub, column, params) for sub in spec) + ")")
        elif key.startswith("$"):
            raise InvalidFilter(
                f"Unsupported filter operator {key!r} at the top level; use $and or $or."
            )
        elif isinstance(spec, Mapping):
            if not spec:
                raise InvalidFilter(f"Filter for {key!r} is an empty dict; give an operator.")
            parts.extend(_condition(column, key, op, value, params) for op, value in spec.items())
        else:
            parts.append(_condition(column, key, "$eq", spec, params))
    return "(" + " AND ".join(parts) + ")"


def compile_where(where: Mapping[str, Any], column: str = "e.metadata") -> tuple[str, list[Any]]:
    """Return ``(sql, params)`` for a metadata filter.

    >>> compile_where({"tool": {"$in": ["search", "fetch"]}})
    ('(coalesce(json_extract(e.metadata, ?) IN (?, ?), 0))', ['$."tool"', 'search', 'fetch'])
    """
    params: list[Any] = []
    return _compile(where, column, params), params
