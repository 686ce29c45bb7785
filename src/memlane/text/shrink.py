"""Shrinking text and JSON to a token budget without an LLM.

Both summarisers are pure and bounded: they look only at a slice of their input that is
proportional to the budget, so a megabyte-sized tool output costs about as much as a
small one, and they call ``count`` a bounded number of times (a binary search over a
short schedule of settings). Every result is verified with ``count`` before it is returned.

* :func:`summarize_json` keeps the JSON valid and its shape recognisable: keys are kept as
  long as possible, long strings keep head and tail around ``…[1,234 chars omitted]…``,
  long arrays keep their unusual items (values that differ from the common case) and then
  their first ones, and end with ``"…[480 more items; most have status: passed]"``, deep
  nesting collapses to ``"{…12 keys}"`` / ``"[…7 items]"``.
* :func:`summarize_text` keeps head and tail around ``…[3,456 chars omitted]…``, cutting at
  whitespace where it can and never between a character and its combining marks.
* :func:`user_summary` runs a user-supplied :class:`~memlane.protocols.Summarizer`
  (e.g. an LLM call) and accepts its output only when it fits (and, for JSON, parses).
"""

from __future__ import annotations

import itertools
import json
import unicodedata
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PREVIEW_THRESHOLD",
    "bounded_text",
    "dumps",
    "json_preview",
    "json_size_hint",
    "payload_digest",
    "summarize_json",
    "summarize_text",
    "user_summary",
]

Count = Callable[[str], int]

# A token rarely spans more than 16 characters outside long runs of spaces or dashes, so
# text longer than 16 chars per budgeted token is treated as too big without counting it.
# A wrong guess only makes a summary shorter than it had to be, never over budget.
_CHARS_PER_TOKEN_CEILING = 16
_MAX_TEXT_PROBES = 14


def dumps(value: Any) -> str:
    """Compact one-line JSON, as rendered by restore().

    U+2028/U+2029/U+0085 are escaped because ``str.splitlines()`` treats them as line
    breaks; the result is therefore a single line for any reader.

    >>> dumps({"a": [1, 2], "b": "é"})
    '{"a":[1,2],"b":"é"}'
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if "\u2028" in text or "\u2029" in text or "\x85" in text:
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        text = text.replace("\x85", "\\u0085")
    return text


# ---------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Limits:
    max_str: int  # characters kept per string (head + tail)
    max_items: int  # array items kept
    max_keys: int  # object keys kept; higher than max_items so keys survive longest
    max_depth: int  # containers deeper than this collapse to a marker


# Gentlest first. Keys outlive items and depth goes last, so the shape stays visible.
_ANCHORS = [
    (4000, 200, 400, 32),
    (2000, 100, 200, 24),
    (1000, 50, 128, 16),
    (500, 25, 96, 12),
    (240, 12, 64, 8),
    (120, 8, 48, 6),
    (64, 5, 32, 5),
    (40, 3, 24, 4),
    (24, 2, 16, 3),
    (16, 1, 12, 2),
    (10, 1, 8, 1),
    (6, 0, 4, 1),
    (0, 0, 0, 0),  # harshest: the whole value becomes one marker
]


def _schedule() -> tuple[_Limits, ...]:
    # A geometric midpoint between neighbouring anchors halves the step from one setting
    # to the next (a budget is used better) for one more count() call in the search.
    levels: list[_Limits] = []
    for a, b in itertools.pairwise(_ANCHORS):
        levels.append(_Limits(*a))
        mid = [round((x * y) ** 0.5) if y else x // 2 for x, y in zip(a, b, strict=True)]
        levels.append(_Limits(*mid))
    levels.append(_Limits(*_ANCHORS[-1]))
    return tuple(dict.fromkeys(levels))  # drop duplicates, keep order


_SCHEDULE = _schedule()


def summarize_json(value: Any, max_tokens: int, count: Count) -> str | None:
    """Compact JSON for ``value`` that parses and counts at most ``max_tokens``, or None.

    The value is pruned *before* it is serialised (only what a setting keeps is visited),
    and the gentlest setting of a fixed schedule that fits is found by binary search, so a
    5 MB payload costs a few milliseconds; the search estimates token counts from the first
    exact one, and only the result (and the harshest setting) is counted exactly.

    >>> from memlane.text.tokens import tokenizer_for
    >>> count = tokenizer_for("gpt-4o").count
    >>> big = {"query": "sparse attention", "results": [{"title": "x" * 500}] * 300}
    >>> out = summarize_json(big, 60, count)
    >>> json.loads(out)["query"], count(out) <= 60
    ('sparse attention', True)
    """
    if max_tokens <= 0:
        return None
    node_cap = 2 * max_tokens + 16  # every kept JSON value costs about a token or more
    char_cap = max_tokens * _CHARS_PER_TOKEN_CEILING + 64

    memo: dict[int, tuple[list[int], str]] = {}  # each list scanned once for all levels
    texts: dict[int, str] = {}
    ratio: list[float] = []  # characters per token, measured on the first counted text

    def text_at(level: int) -> str:
        if level not in texts:
            texts[level] = dumps(_prune(value, _SCHEDULE[level], node_cap, memo))
        return texts[level]

    def fits(level: int, *, exact: bool) -> bool:
        text = text_at(level)
        if len(text) > char_cap:
            return False
        if not exact and len(text) <= max_tokens // 2:
            # a shortcut for the search only: a character can be several tokens (combining
            # marks, CJK, emoji; and estimates add a margin), so the result is always counted
            return True
        if exact or not ratio:
            n = count(text)
            if not ratio and n:
                ratio.append(len(text) / n)
            return n <= max_tokens
        return len(text) / ratio[0] <= max_tokens * 0.95  # an estimate, checked below

    # Binary search for the gentlest fitting level; more pruning never makes the text
    # longer (cuts are only made when they shorten), so "fits" is monotone in the level.
    # Counting is the expensive part: the search estimates from the ratio of the first
    # count, and the level it lands on is counted exactly (stepping harsher if needed).
    lo, hi = 0, len(_SCHEDULE) - 1
    if not fits(hi, exact=True):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid, exact=False):
            hi = mid
        else:
            lo = mid + 1
    while not fits(lo, exact=True):
        lo += 1
    return text_at(lo)


#: Payloads longer than this (JSON characters) get a stored preview (see payload_digest).
PREVIEW_THRESHOLD = 32_768
_PREVIEW_TOKENS = 2_000  # the preview's size, in ~4-character units: at most ~8 KB


def payload_digest(payload_json: str | None) -> tuple[int | None, str | None]:
    """``(characters, preview or None)`` of a stored payload: what restore reads of it.

    A payload over :data:`PREVIEW_THRESHOLD` characters gets a preview: valid JSON of at
    most ~8 KB that keeps its keys, its unusual items and the heads and tails of long
    strings (:func:`summarize_json`), so restore() summarises it without parsing megabytes.

    >>> payload_digest('{"a":1}')
    (7, None)
    >>> rows = [{"n": i, "ok": i != 700, "log": "x" * 100} for i in range(1000)]
    >>> chars, preview = payload_digest(dumps({"rows": rows}))
    >>> chars, len(preview) < 10_000, {"n": 700, "ok": False} in [
    ...     {k: r[k] for k in ("n", "ok")} for r in json.loads(preview)["rows"][:-1]]
    (128901, True, True)
    """
    if payload_json is None:
        return None, None
    chars = len(payload_json)
    if chars <= PREVIEW_THRESHOLD:
        return chars, None
    preview = summarize_json(json.loads(payload_json), _PREVIEW_TOKENS, _quarter)
    return chars, preview


def _quarter(text: str) -> int:
    return len(text) // 4 + 1


def json_preview(value: Any, max_nodes: int) -> str:
    """The gentlest summary of ``value`` (at most ``max_nodes`` values), without counting.

    Used to hand a bounded version of a huge payload to a user summariser.

    >>> json_preview({"ids": list(range(1000))}, 11)
    '{"ids":[0,1,2,3,4,5,6,7,8,9,"…[990 more items]"]}'
    """
    return dumps(_prune(value, _SCHEDULE[0], max_nodes))


def _prune(
    value: Any,
    lim: _Limits,
    node_cap: int,
    memo: dict[int, tuple[list[int], str]] | None = None,
) -> Any:
    """A reduced copy of ``value``, built breadth first so upper levels survive longest."""
    holder: list[Any] = [None]
    budget = node_cap
    queue: deque[tuple[Any, Any, Any, int]] = deque([(value, holder, 0, 0)])
    while queue:
        src, parent, slot, depth = queue.popleft()
        if isinstance(src, (dict, list, tuple)) and not src:
            parent[slot] = {} if isinstance(src, dict) else []
        elif isinstance(src, dict):
            if depth >= lim.max_depth or budget <= 0 or lim.max_keys == 0:
                parent[slot] = (
                    {"…": f"{len(src)} keys omitted"} if depth == 0 else f"{{…{len(src)} keys}}"
                )
                continue
            keep = min(len(src), lim.max_keys, budget)
            budget -= keep
            obj: dict[str, Any] = {}
            parent[slot] = obj
            for i, (key, item) in enumerate(src.items()):
                if i >= keep:
                    break
                name = _cut_key(str(key), lim.max_str, obj)
                obj[name] = None  # placeholder keeps insertion order
                queue.append((item, obj, name, depth + 1))
            if len(src) > keep:
                obj["…" if "…" not in obj else "…more"] = f"{len(src) - keep} more keys"
        elif isinstance(src, (list, tuple)):
            if depth >= lim.max_depth or budget <= 0:
                parent[slot] = (
                    [f"…[{len(src)} items omitted]"] if depth == 0 else f"[…{len(src)} items]"
                )
                continue
            keep = min(len(src), lim.max_items, budget)
            budget -= keep
            picked, common = _pick_items(src, keep, memo)
            arr: list[Any] = [None] * keep
            parent[slot] = arr
            for i, index in enumerate(picked):
                queue.append((src[index], arr, i, depth + 1))
            if len(src) > keep:
                arr.append(f"…[{len(src) - keep} more items{common}]")
        elif isinstance(src, str):
            parent[slot] = _cut_string(src, lim.max_str)
        elif src is None or isinstance(src, (bool, int, float)):
            parent[slot] = src
        else:  # not JSON (never from the log); keep it readable and bounded
            parent[slot] = _cut_string(str(src)[: 2 * lim.max_str + 64], lim.max_str)
    return holder[0]


_RARITY_SCAN = 5_000  # items looked at to find the unusual ones (beyond: the head only)


def _pick_items(
    items: Any, keep: int, memo: dict[int, tuple[list[int], str]] | None = None
) -> tuple[list[int], str]:
    """Which ``keep`` items of a list to show, in order, and what most omitted ones share.

    Keeping the head of 1,500 test results shows 8 that passed and hides the 16 that
    failed. Items whose values differ from the common case are kept first: for each key
    (or for the items themselves, if scalars) whose values are categorical (few distinct
    ones), a value held by fewer than half of the items is unusual. The first item is
    always kept as an example of the common case; the rest of ``keep`` is the head.
    ``memo`` (keyed by the list's id, for one pruning of one value) saves the scan when
    several settings are tried.

    >>> rows = [{"id": i, "status": "passed"} for i in range(100)]
    >>> rows[70]["status"] = "failed"
    >>> _pick_items(rows, 3)
    ([0, 1, 70], '; most have status: passed')
    """
    n = len(items)
    if keep >= n:
        return list(range(n)), ""
    if keep <= 0:
        return [], ""
    found = memo.get(id(items)) if memo is not None else None
    if found is None:
        found = _unusual(items)
        if memo is not None:
            memo[id(items)] = found
    unusual, common = found
    chosen = {0, *unusual[: keep - 1]}
    head = (i for i in range(n) if i not in chosen)
    while len(chosen) < keep:
        chosen.add(next(head))
    return sorted(chosen), common


def _unusual(items: Any) -> tuple[list[int], str]:
    """Indices of unusual items, most unusual first, and the common values (see above)."""
    sample = items[: min(len(items), _RARITY_SCAN)]
    cells = [_cells(item) for item in sample]
    columns: dict[Any, dict[Any, int]] = {}
    for pairs in cells:
        for key, value in pairs:
            counts = columns.setdefault(key, {})
            counts[value] = counts.get(value, 0) + 1
    limit = max(2, int(len(sample) ** 0.5))
    categorical = {
        key: counts
        for key, counts in columns.items()
        if len(counts) <= limit and sum(counts.values()) >= len(sample) // 2
    }
    if not categorical:
        return [], ""
    half = len(sample) / 2
    rarity = [
        sum(
            1
            for key, value in _cells(item)
            if key in categorical and categorical[key][value] < half
        )
        for item in sample
    ]
    unusual = sorted((i for i in range(1, len(sample)) if rarity[i]), key=lambda i: -rarity[i])
    named = (
        f"{key}: {value}" if key is not None else str(value)
        for key, counts in categorical.items()
        for value, times in counts.items()
        if times >= half
    )
    common = [text for text in named if len(text) <= 40][:2]  # only what reads at a glance
    return unusual, ("; most have " + ", ".join(common)) if common else ""


_SCALARS = (str, int, float, bool, type(None))


def _cells(item: Any) -> list[tuple[Any, Any]]:
    """``(key, value)`` pairs of an item's scalar values (key None for a scalar item)."""
    # Long strings are never category labels, and hashing them costs: left out.
    if type(item) is dict:
        return [
            (key, value)
            for key, value in item.items()
            if type(value) in _SCALARS and (type(value) is not str or len(value) <= 64)
        ]
    if type(item) in _SCALARS and (type(item) is not str or len(item) <= 64):
        return [(None, item)]
    return []


def _cut_string(text: str, max_chars: int) -> str:
    """Head and tail of ``text`` around a marker, if that is actually shorter."""
    if len(text) <= max_chars:
        return text
    head_len = _safe_cut(text, (max_chars + 1) // 2)
    tail_start = _safe_cut(text, len(text) - max_chars // 2)
    omitted = tail_start - head_len
    marker = f"…[{omitted:,} chars omitted]…"
    if len(marker) >= omitted:  # cutting would not save anything
        return text
    return text[:head_len] + marker + text[tail_start:]


def _cut_key(key: str, max_chars: int, taken: dict[str, Any]) -> str:
    # Keys are what tell a reader the shape, so they get a generous floor of 48 chars.
    name = _cut_string(key, max(max_chars, 48))
    n = 2
    while name in taken:  # two long keys may share head and tail
        name = f"{name}#{n}"
        n += 1
    return name


def _safe_cut(text: str, index: int) -> int:
    """Move a cut point left so it does not separate a character from what joins it.

    Python strings index code points, so surrogate pairs are never split; combining marks,
    variation selectors and zero-width joiners would still be orphaned by a naive cut.
    """
    index = max(0, min(index, len(text)))
    for _ in range(8):  # bounded: a pathological run of marks is cut anyway
        if index <= 0 or index >= len(text) or not _joins_previous(text[index]):
            break
        index -= 1
    return index


def _joins_previous(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or code in (0x200C, 0x200D)
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin-tone modifiers
        or 0xDC00 <= code <= 0xDFFF  # lone low surrogate (surrogateescape input)
        or unicodedata.category(char) in ("Mn", "Me", "Mc")
    )


# ---------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------


def summarize_text(text: str, max_tokens: int, count: Count) -> str | None:
    """Head and tail of ``text`` around ``…[N chars omitted]…``, counting <= ``max_tokens``.

    Returns ``text`` itself when it already fits, and None when not even the bare marker
    fits. Only ``16 * max_tokens`` characters from each end are ever looked at.

    >>> from memlane.text.tokens import tokenizer_for
    >>> count = tokenizer_for("gpt-4o").count
    >>> out = summarize_text("word " * 10_000 + "THE END", 20, count)
    >>> out.startswith("word word"), out.endswith("THE END"), count(out) <= 20
    (True, True, True)
    """
    if max_tokens <= 0:
        return None
    window = max_tokens * _CHARS_PER_TOKEN_CEILING + 64
    if len(text) <= window and count(text) <= max_tokens:
        return text
    # Half from each end, never overlapping.
    half_max = min(len(text) // 2, window // 2)

    def build(k: int) -> str:
        head_end = _soft_cut(text, k, backwards=True)
        tail_start = _soft_cut(text, len(text) - k, backwards=False)
        if tail_start <= head_end:  # only when k is near len/2: nothing sensible to cut
            head_end = tail_start = _safe_cut(text, len(text) // 2)
        omitted = tail_start - head_end
        return f"{text[:head_end]}…[{omitted:,} chars omitted]…{text[tail_start:]}"

    if count(build(0)) > max_tokens:
        return None
    # Largest k that fits, by a bounded binary search seeded with a ratio guess.
    sample = text[:2048] + text[-2048:]
    chars_per_token = max(1.0, len(sample) / max(1, count(sample)))
    lo, hi = 0, half_max
    guess = min(hi, int(max_tokens * chars_per_token / 2 * 0.9))
    best = build(0)
    probes = 0
    while lo < hi and probes < _MAX_TEXT_PROBES:
        mid = guess if probes == 0 and guess > lo else (lo + hi + 1) // 2
        candidate = build(mid)
        probes += 1
        if count(candidate) <= max_tokens:
            best, lo = candidate, mid
        else:
            hi = mid - 1
        if hi - lo <= max(2, lo // 64):  # within ~1.5%: more probes buy nothing visible
            break
    return best


def _soft_cut(text: str, index: int, *, backwards: bool) -> int:
    """Prefer a cut at whitespace within a few characters of ``index``."""
    index = max(0, min(index, len(text)))
    if 0 < index < len(text):
        if backwards:
            space = text.rfind(" ", max(0, index - 24), index)
            nl = text.rfind("\n", max(0, index - 24), index)
            pos = max(space, nl)
            if pos > 0:
                return pos
        else:
            candidates = [
                p
                for p in (text.find(" ", index, index + 24), text.find("\n", index, index + 24))
                if p != -1
            ]
            if candidates:
                return min(candidates) + 1
    return _safe_cut(text, index)


# ---------------------------------------------------------------------------------------
# User summarisers
# ---------------------------------------------------------------------------------------


def user_summary(
    summarizer: Callable[[str, int], str],
    text: str,
    max_tokens: int,
    count: Count,
    *,
    as_json: bool = False,
) -> tuple[str | None, str]:
    """Run a user summariser and check its answer: ``(result or None, reason)``.

    The result is accepted only if it is a string that counts <= ``max_tokens`` and, when
    ``as_json``, parses as JSON (it is then re-serialised compactly on one line). An
    exception from the summariser is reported in the reason instead of failing the restore,
    so a timed-out LLM call degrades to the built-in summary.

    >>> count = len
    >>> user_summary(lambda text, n: text[:n], "abcdefgh", 4, count)
    ('abcd', 'summarised by user summariser')
    >>> user_summary(lambda text, n: text, "abcdefgh", 4, count)[0] is None
    True
    """
    try:
        out = summarizer(text, max_tokens)
    except Exception as exc:  # the built-in fallback is always available
        return None, f"user summariser failed ({type(exc).__name__}); built-in summary used"
    if not isinstance(out, str):
        return None, "user summariser returned no string; built-in summary used"
    if as_json:
        try:
            out = dumps(json.loads(out))
        except ValueError:
            return None, "user summary was not valid JSON; built-in summary used"
    if len(out) > max_tokens * _CHARS_PER_TOKEN_CEILING * 8 or count(out) > max_tokens:
        return None, "user summary was over budget; built-in summary used"
    return out, "summarised by user summariser"


# ---------------------------------------------------------------------------------------
# Cheap size bounds
# ---------------------------------------------------------------------------------------


def json_size_hint(value: Any, cap: int, max_nodes: int) -> int:
    """Approximate serialised size of ``value`` in chars; more than ``cap`` if too big.

    Stops as soon as the size passes ``cap`` or more than ``max_nodes`` values are seen
    (each JSON value costs about a token), so a huge payload is never walked in full.

    >>> json_size_hint({"a": "xyz"}, 100, 10) <= 100
    True
    >>> json_size_hint(list(range(10**6)), 100, 50) > 100
    True
    """
    if value is None:
        return 0
    size, nodes, stack = 0, 1, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item) + 3
        elif isinstance(item, (dict, list, tuple)):
            nodes += len(item)
            if nodes > max_nodes:
                return cap + 1 + size
            if isinstance(item, dict):
                size += sum(len(str(key)) + 4 for key in item)
                stack.extend(item.values())
            else:
                stack.extend(item)
            size += 2
        else:
            size += 6
        if size > cap:
            return size
    return size


def bounded_text(text: str, limit: int) -> str:
    """``text``, or its head and tail around a marker if it is longer than ``limit`` chars.

    >>> bounded_text("abcdefghij", 4)
    'ab…[6 chars omitted]…ij'
    """
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}…[{len(text) - 2 * half:,} chars omitted]…{text[-half:]}"
