"""The export format as YAML: one YAML document per record, the same records as JSON Lines.

``memlane export --format yaml`` writes them; ``memlane import`` reads either (a YAML stream starts
with ``---``). Lossless through an import: strings that YAML would read as something else
(``yes``, ``2024-01-01``, ``0x10``, ``~``) are quoted by the dumper, control characters are
escaped, and the same database always gives the same bytes (keys in record order, no line
folding). PyYAML's C implementation is used when it is there (~10x faster).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import IO, Any

import yaml

from ..errors import InvalidInput

__all__ = ["yaml_document", "yaml_records"]

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def yaml_document(record: Mapping[str, Any]) -> str:
    """One export record as a YAML document (starting with ``---``, ending with a newline).

    >>> print(yaml_document({"type": "header", "version": 1, "note": "yes"}), end="")
    ---
    type: header
    version: 1
    note: 'yes'
    """
    text: str = yaml.dump(
        dict(record),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        explicit_start=True,
        width=2**31 - 1,  # no folded lines: a long string stays one scalar line
    )
    return text


def yaml_records(stream: IO[bytes] | IO[str]) -> Iterator[Any]:
    """The records of a YAML export, one per document, read as they come.

    A stream that is not valid YAML raises :class:`~memlane.errors.InvalidInput`
    naming the line; what was read before it has been yielded already."""
    try:
        yield from yaml.load_all(stream, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InvalidInput(
            f"The YAML export is not valid YAML{where}: {problem}. Records before it were "
            "read; fix the file (or export it again) and import it again."
        ) from None
