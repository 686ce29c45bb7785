"""Property: for any sequence of program writes and extracted facts of one key, the current
value is what a reference model of the rule gives (docs/memory.md, "Memory that forms
itself"): a program's value always wins; an extracted value supersedes the key's current
value only when every value the key has had came from extraction and it is newer; an older
extracted value is kept as history."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import SessionManager
from memlane.memory import EXTRACTED_BY
from memlane.testing import HashEmbedder

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

# a step: (who, value, day): who writes value as the key's value, true from that day
steps = st.lists(
    st.tuples(
        st.sampled_from(["program", "extracted"]), st.sampled_from("ABCDE"), st.integers(0, 9)
    ),
    min_size=1,
    max_size=8,
)


def _reference(sequence: list[tuple[str, str, int]]) -> str | None:
    """The current value under the documented rule."""
    values: list[tuple[str, str, int]] = []  # (who, value, day) of every value kept

    def current() -> tuple[str, str, int] | None:
        # the latest valid_from; of equal ones, the one written last
        if not values:
            return None
        return values[max(range(len(values)), key=lambda i: (values[i][2], i))]

    for who, value, day in sequence:
        now = current()
        if now is not None and now[1] == value:
            continue  # identical to the current value: unchanged (seen once more)
        if who == "extracted" and any(w == "program" for w, _, _ in values):
            continue  # never overrides a program's value
        values.append((who, value, day))
    now = current()
    return None if now is None else now[1]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sequence=steps)
def test_current_value_follows_the_rule(
    tmp_path_factory: Any, sequence: list[tuple[str, str, int]]
) -> None:
    folder: Path = tmp_path_factory.mktemp("prop")
    with SessionManager(
        "a", db_path=folder / "m.db", embedder=HashEmbedder(), background=False
    ) as mgr:
        for who, value, day in sequence:
            meta = {EXTRACTED_BY: "scripted"} if who == "extracted" else None
            mgr.remember(
                "u1", f"Value {value}", key="k", valid_from=T0 + timedelta(days=day), metadata=meta
            )
        current = [f.text for f in mgr.facts("u1", key="k")]
    expected = _reference(sequence)
    assert current == ([] if expected is None else [f"Value {expected}"]), sequence
