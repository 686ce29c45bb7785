"""Canonical JSON: the C-speed fast path of _json.dumps agrees with the Python walk on every
value — the same text for valid ones, an error naming the path for the rest."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memlane import InvalidInput
from memlane.core.canonical_json import _walk, dumps

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.sampled_from(["\ud800", "ok\udfffok"])  # lone surrogates
)
keys = st.text(max_size=8) | st.integers(-3, 3) | st.none()
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=20,
)


def reference(value: Any) -> str:
    """What dumps did before its fast path: walk, then encode."""
    _walk(value, "payload")
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=400, deadline=None)
@given(values)
def test_fast_path_agrees_with_the_walk(value: Any) -> None:
    try:
        expected: str | BaseException = reference(value)
    except InvalidInput as exc:
        expected = exc
    except TypeError as exc:  # mixed key types the encoder cannot sort: refused either way
        expected = exc
    try:
        got: str | BaseException = dumps(value)
    except (InvalidInput, TypeError) as exc:
        got = exc
    if isinstance(expected, str):
        # The same JSON value, keys sorted; floats may be spelt otherwise (orjson writes
        # 6.103515625e-05 as 0.00006103515625).
        assert isinstance(got, str) and json.loads(got) == json.loads(expected)

        def sorted_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            assert [key for key, _ in pairs] == sorted(key for key, _ in pairs)
            return dict(pairs)

        json.loads(got, object_pairs_hook=sorted_keys)
    else:
        assert type(got) is type(expected) and str(got) == str(expected)


def test_a_megabyte_of_json_round_trips() -> None:
    rows = [{"id": i, "ok": i % 7 != 0, "x": i / 3, "s": "é" * 5} for i in range(20_000)]
    text = dumps({"rows": rows})
    assert json.loads(text)["rows"][3]["x"] == rows[3]["x"]
    assert not math.isnan(json.loads(text)["rows"][9]["x"])
