"""Compile ``where`` metadata filters into parameterised SQL.

The filter language is a small, Chroma-like subset::

    {"source": "arxiv"}                          equality
    {"year": {"$gte": 2024, "$lt": 2027}}        ranges ($gt, $gte, $lt, $lte)
    {"tool": {"$in": ["search", "fetch"]}}       membership ($in, $nin)
    {"reviewed": {"$ne": True}}                  inequality
    {"url": {"$exists": True}}                   presence
    {"people": {"$contains": "Ana"}}             a list that holds the value
    {"$or": [{"a": 1}, {"b": 2}]}                boolean combinations ($and, $or)

Keys address the event's ``metadata`` JSON; dots reach into nested objects ("http.status").
Values and key paths always travel as SQL parameters; only fixed operator text is ever
written into the statement, so no filter can inject SQL.

Two dialects share the parser: ``sqlite`` (``json_extract`` over the JSON text) and
``postgres`` (``#>`` over a ``jsonb`` column, values compared as ``jsonb``). They agree on
every filter between values of one JSON type; across types (``{"n": {"$gt": "5"}}`` on a
number) PostgreSQL matches nothing, while SQLite orders numbers before text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.canonical_json import check_text
from ..core.clock import now_us
from ..core.seams import EventFilter, SessionFilter
from ..errors import InvalidFilter, InvalidInput, shown
from ..events import IMPORTANT_FROM

__all__ = ["DIALECTS", "LIVE", "compile_where", "event_where", "marks", "session_where"]


LIVE = "(e.expires_us IS NULL OR e.expires_us > ?)"


def marks(values: Sequence[Any]) -> str:
    """``?, ?, ?``: one placeholder per value."""
    return ", ".join("?" for _ in values)


DIALECTS = ("sqlite", "postgres")

_KEY = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
_COMPARISONS = {"$eq": "=", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_OPERATORS = (*_COMPARISONS, "$in", "$nin", "$contains", "$exists")
_Scalar = str | int | float | bool | None


def _json_path(key: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise InvalidFilter(
            f"Filter key {shown(key)} is not a metadata key. Use letters, digits, '_' or '-', "
            "with dots to reach nested keys (e.g. 'http.status')."
        )
    return "$" + "".join(f'."{part}"' for part in key.split("."))


#: integers a filter compares with: what both stores' JSON numbers hold exactly
_INT64 = range(-(2**63), 2**63)
#: how deep $and / $or may nest (SQLite refuses expressions past 1,000 levels)
_MAX_NESTING = 32


def _scalar(value: Any, key: str, op: str) -> _Scalar:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and value not in _INT64:
        raise InvalidFilter(
            f"Filter {shown(key)} {op} compares with {shown(value)}, outside the 64-bit "
            "integers metadata values can be compared as."
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidFilter(f"Filter {shown(key)} {op} cannot compare with {value!r}.")
    if isinstance(value, str):
        try:
            check_text(value, f"Filter {shown(key)} {op}")
        except InvalidInput as exc:
            raise InvalidFilter(str(exc)) from None
    if isinstance(value, str | int | float):
        return value
    raise InvalidFilter(
        f"Filter {shown(key)} {op} expects a string, number, bool or None, got "
        f"{type(value).__name__} {shown(value)}."
    )


def _condition(column: str, key: str, op: str, value: Any, params: list[Any], dialect: str) -> str:
    if dialect == "postgres":
        return _pg_condition(column, key, op, value, params)
    path = _json_path(key)
    if op in _COMPARISONS:
        value = _scalar(value, key, op)
        if value is None:
            if op not in ("$eq", "$ne"):
                raise InvalidFilter(f"Filter {shown(key)} {op} cannot compare with None.")
            params.append(path)
            return f"json_extract({column}, ?) IS {'NOT ' if op == '$ne' else ''}NULL"
        matches = _sqlite_typed(column, path, _COMPARISONS["$eq" if op == "$ne" else op], value)
        params.extend(matches[1])
        if op == "$ne":  # a missing key, or a value of another type, is "not equal" too
            return f"NOT coalesce({matches[0]}, 0)"
        return matches[0]
    if op in ("$in", "$nin"):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
            raise InvalidFilter(
                f"Filter {shown(key)} {op} expects a non-empty list, got {shown(value)}."
            )
        items = [_scalar(item, key, op) for item in value]
        # None in a list matches nothing, as in SQL (and the postgres dialect)
        parts = [_sqlite_typed(column, path, "=", item) for item in items if item is not None]
        if not parts:
            return "0" if op == "$in" else "1"
        for _, part_params in parts:
            params.extend(part_params)
        either = "coalesce((" + " OR ".join(sql for sql, _ in parts) + "), 0)"
        return either if op == "$in" else f"NOT {either}"
    if op == "$contains":
        wanted = _element(value, key)
        types = _SQLITE_TYPES.get(type(wanted), ("text",))
        params.extend((path, path, int(wanted) if isinstance(wanted, bool) else wanted))
        # (json_each over a scalar yields the scalar itself: an array only, as in postgres)
        return (
            f"(json_type({column}, ?) = 'array' AND EXISTS (SELECT 1 FROM json_each({column}, ?)"
            f" AS j WHERE j.type IN ({', '.join(repr(t) for t in types)}) AND j.value = ?))"
        )
    if op == "$exists":
        if not isinstance(value, bool):
            raise InvalidFilter(
                f"Filter {shown(key)} $exists expects true or false, got {shown(value)}."
            )
        params.append(path)
        return f"json_type({column}, ?) IS {'NOT ' if value else ''}NULL"
    raise InvalidFilter(
        f"Unsupported filter operator {shown(op)} on key {shown(key)}. "
        f"Use one of {', '.join(_OPERATORS)}, or $and / $or to combine filters."
    )


#: SQLite's json_type names for each Python scalar type: a comparison only matches values of
#: the same JSON type, as in PostgreSQL (SQLite alone would order any text above any number,
#: and take true for 1).
_SQLITE_TYPES = {bool: ("true", "false"), int: ("integer", "real"), float: ("integer", "real")}


def _sqlite_typed(column: str, path: str, sql_op: str, value: _Scalar) -> tuple[str, list[Any]]:
    """``value sql_op`` on the JSON value at ``path``, true only for a value of its type."""
    types = _SQLITE_TYPES.get(type(value), ("text",))
    marks = ", ".join(f"'{name}'" for name in types)
    sql = f"(json_type({column}, ?) IN ({marks}) AND json_extract({column}, ?) {sql_op} ?)"
    return sql, [path, path, int(value) if isinstance(value, bool) else value]


def _pg_condition(column: str, key: str, op: str, value: Any, params: list[Any]) -> str:
    """The same condition over a ``jsonb`` column: path as ``text[]``, values as ``jsonb``."""
    _json_path(key)  # the same key rules
    path = key.split(".")
    item = f"({column} #> ?::text[])"
    if op in _COMPARISONS:
        value = _scalar(value, key, op)
        if value is None:
            if op not in ("$eq", "$ne"):
                raise InvalidFilter(f"Filter {shown(key)} {op} cannot compare with None.")
            params.append(path)  # a missing key and a JSON null are both "None"
            return f"coalesce({item}, 'null'::jsonb) {'<>' if op == '$ne' else '='} 'null'::jsonb"
        if op == "$ne":  # a missing key is "not equal" too
            params.extend((path, _jsonb(value)))
            return f"({item} IS DISTINCT FROM ?::jsonb)"
        if op == "$eq":
            params.extend((path, _jsonb(value)))
            return f"{item} = ?::jsonb"
        # ranges compare values of the same JSON type only (jsonb orders types otherwise)
        params.extend((path, _jsonb(value), path, _jsonb(value)))
        return (
            f"({item} {_COMPARISONS[op]} ?::jsonb "
            f"AND jsonb_typeof({item}) = jsonb_typeof(?::jsonb))"
        )
    if op in ("$in", "$nin"):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not value:
            raise InvalidFilter(
                f"Filter {shown(key)} {op} expects a non-empty list, got {shown(value)}."
            )
        items = [_scalar(entry, key, op) for entry in value]
        params.append(path)
        # None in a list matches nothing, as in SQL (and the sqlite dialect)
        params.extend(None if entry is None else _jsonb(entry) for entry in items)
        marks = ", ".join("?::jsonb" for _ in items)
        if op == "$nin":
            return f"coalesce({item} NOT IN ({marks}), TRUE)"
        return f"coalesce({item} IN ({marks}), FALSE)"
    if op == "$contains":
        params.extend((path, path, json.dumps([_element(value, key)], ensure_ascii=False)))
        return f"coalesce(jsonb_typeof({item}) = 'array' AND {item} @> ?::jsonb, FALSE)"
    if op == "$exists":
        if not isinstance(value, bool):
            raise InvalidFilter(
                f"Filter {shown(key)} $exists expects true or false, got {shown(value)}."
            )
        params.append(path)
        return f"{item} IS {'NOT ' if value else ''}NULL"
    raise InvalidFilter(
        f"Unsupported filter operator {shown(op)} on key {shown(key)}. "
        f"Use one of {', '.join(_OPERATORS)}, or $and / $or to combine filters."
    )


def _element(value: Any, key: str) -> _Scalar:
    """What ``$contains`` looks for: one string, number or bool."""
    element = _scalar(value, key, "$contains")
    if element is None:
        raise InvalidFilter(f"Filter {shown(key)} $contains expects a string, number or bool.")
    return element


def _jsonb(value: _Scalar) -> str:
    return json.dumps(value, ensure_ascii=False)


def _compile(
    where: Mapping[str, Any], column: str, params: list[Any], dialect: str, depth: int = 0
) -> str:
    if depth > _MAX_NESTING:
        raise InvalidFilter(
            f"The filter nests $and / $or more than {_MAX_NESTING} levels deep; flatten it."
        )
    if not isinstance(where, Mapping) or not where:
        raise InvalidFilter(f"A filter must be a non-empty dict, got {shown(where)}.")
    parts: list[str] = []
    for key, spec in where.items():
        if not isinstance(key, str):
            raise InvalidFilter(
                f"Filter key {shown(key)} is a {type(key).__name__}; metadata keys are strings "
                "(e.g. {'year': 2023} or {'http.status': {'$gte': 500}})."
            )
        if key in ("$and", "$or"):
            if isinstance(spec, str | bytes) or not isinstance(spec, Sequence) or not spec:
                raise InvalidFilter(
                    f"{key} expects a non-empty list of filters, got {shown(spec)}."
                )
            joiner = " AND " if key == "$and" else " OR "
            parts.append(
                "("
                + joiner.join(_compile(sub, column, params, dialect, depth + 1) for sub in spec)
                + ")"
            )
        elif key.startswith("$"):
            raise InvalidFilter(
                f"Unsupported filter operator {shown(key)} at the top level; use $and or $or."
            )
        elif isinstance(spec, Mapping):
            if not spec:
                raise InvalidFilter(f"Filter for {shown(key)} is an empty dict; give an operator.")
            parts.extend(
                _condition(column, key, op, value, params, dialect) for op, value in spec.items()
            )
        else:
            parts.append(_condition(column, key, "$eq", spec, params, dialect))
    return "(" + " AND ".join(parts) + ")"


def compile_where(
    where: Mapping[str, Any], column: str = "e.metadata", dialect: str = "sqlite"
) -> tuple[str, list[Any]]:
    """Return ``(sql, params)`` for a metadata filter (``?`` placeholders in both dialects).

    >>> sql, params = compile_where({"year": {"$gt": 2000}})
    >>> sql
    "((json_type(e.metadata, ?) IN ('integer', 'real') AND json_extract(e.metadata, ?) > ?))"
    >>> params
    ['$."year"', '$."year"', 2000]
    """
    params: list[Any] = []
    return _compile(where, column, params, dialect), params


def event_where(
    flt: EventFilter,
    *,
    live: bool,
    dialect: str,
    metadata: str,
    confined: Callable[[str], tuple[str, list[Any]]],
) -> tuple[str, list[Any]]:
    """The ``WHERE`` of a filtered event read (aliases ``e`` and ``s``): never an expired
    event, unless the filter asks for exactly those (the sweep), or ``live=False`` (a
    ranking whose caller leaves the expired out itself: ``Searcher``). ``metadata`` is the
    column ``where`` reads, ``confined`` a backend's clause for the rows its role may change."""
    parts: list[str] = []
    params: list[Any] = []
    if flt.scope is not None:
        clause, params = flt.scope.sql("s", include_shared=flt.include_shared)
        parts.append(clause)
    if flt.expired_by_us is not None:  # (the sweep: only what this role may delete)
        mine, mine_params = confined("e")
        parts.append("e.expires_us <= ?" + mine)
        params.extend([flt.expired_by_us, *mine_params])
    elif live:
        parts.append(LIVE)
        params.append(now_us())
    if flt.lasting:
        parts.append("e.expires_us IS NULL")
    if flt.after_seq is not None:
        parts.append("e.seq > ?")
        params.append(flt.after_seq)
    if flt.session_id is not None:
        parts.append("e.session_id = ?")
        params.append(flt.session_id)
    if flt.event_id is not None:
        parts.append("e.id = ?")
        params.append(flt.event_id)
    if flt.kinds:
        parts.append(f"e.kind IN ({marks(flt.kinds)})")
        params.extend(flt.kinds)
    if flt.exclude_kinds:
        parts.append(f"e.kind NOT IN ({marks(flt.exclude_kinds)})")
        params.extend(flt.exclude_kinds)
    if flt.status is not None:
        parts.append("e.status = ?")
        params.append(flt.status)
    if flt.exclude_statuses:
        parts.append(f"(e.status IS NULL OR e.status NOT IN ({marks(flt.exclude_statuses)}))")
        params.extend(flt.exclude_statuses)
    if flt.min_importance == IMPORTANT_FROM:
        # written out, as the partial index events_important's condition is: a planner
        # matches an index's condition by its text (PostgreSQL's generic plans, SQLite's
        # rule), and restore's read of a session's important events walks that index (200
        # of a 10k-event session: 6.2 → 0.6 ms) instead of every newer event
        parts.append(f"e.importance >= {IMPORTANT_FROM!r}")
    elif flt.min_importance is not None:
        parts.append("e.importance >= ?")
        params.append(flt.min_importance)
    if flt.since_us is not None:
        parts.append("e.created_us >= ?")
        params.append(flt.since_us)
    if flt.until_us is not None:
        parts.append("e.created_us < ?")
        params.append(flt.until_us)
    if flt.where:
        sql, where_params = compile_where(flt.where, metadata, dialect)
        parts.append(sql)
        params.extend(where_params)
    if flt.session_status is not None:
        parts.append("s.status = ?")
        params.append(flt.session_status)
    if flt.session_before_us is not None:
        parts.append("s.updated_us < ?")
        params.append(flt.session_before_us)
    return " AND ".join(parts) or "TRUE", params


def session_text(text: str, dialect: str) -> tuple[str, list[Any]]:
    """The condition "goal, id or key contains ``text``, ignoring case" (alias ``s``).
    SQLite's LIKE ignores the case of ASCII letters by itself (as its lower() folds ASCII
    letters only, other scripts match as written either way); calling lower() on three
    columns of every row made a scan of 100k sessions ~2.4x as slow (CPU ~170 -> ~71 ms a
    page). PostgreSQL's LIKE is case-sensitive: lower() on both sides."""
    needle = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    fold = "lower({})" if dialect == "postgres" else "{}"
    columns = ("s.goal", "s.id", "coalesce(s.key, '')")
    sql = " OR ".join(f"{fold.format(column)} LIKE ? ESCAPE '\\'" for column in columns)
    return f"({sql})", [f"%{needle}%"] * 3


def session_where(flt: SessionFilter, *, dialect: str, metadata: str) -> tuple[str, list[Any]]:
    """The ``WHERE`` of a filtered session read (alias ``s``)."""
    parts: list[str] = []
    params: list[Any] = []
    if flt.scope is not None:
        clause, params = flt.scope.sql("s", include_shared=flt.include_shared)
        parts.append(clause)
    for column, value in (
        ("s.id = ?", flt.session_id),
        ("s.agent_id = ?", flt.agent_id),
        ("s.status = ?", flt.status),
        ("s.user_id = ?", flt.user_id),
        ("s.key = ?", flt.key),
        ("s.updated_us >= ?", flt.since_us),
        ("s.updated_us < ?", flt.before_us),
    ):
        if value is not None:
            parts.append(column)
            params.append(value)
    if flt.id_prefix is not None:
        escaped = flt.id_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        parts.append("s.id LIKE ? ESCAPE '\\'")
        params.append(escaped + "%")
    if flt.text:
        sql, text_params = session_text(flt.text, dialect)
        parts.append(sql)
        params.extend(text_params)
    if flt.marked is not None:
        sql, marked = compile_where({"asm": flt.marked}, metadata, dialect)
        parts.append(sql)
        params.extend(marked)
    if flt.unmarked:
        sql, marked = compile_where({"asm": {"$exists": False}}, metadata, dialect)
        parts.append(sql)
        params.extend(marked)
    return " AND ".join(parts) or "TRUE", params
