"""Property: for any sequence of program writes and extracted facts of one key, the current
value is what a reference model of the rule gives (docs/memory.md, "Memory that forms
itself"): a program's value always wins; an extracted value supersedes the key's current
value only when every value the key has had came from extraction and it is newer; an older
extracted value is kept as history. The second test holds the real stage to the same model:
messages answered by a scripted extractor (some failing their first call), program writes
between them, the stage run at chosen points."""

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


# -- the same rule, through the extraction stage ------------------------------------------------

# a step: a program writes (key, value), true from a past day or from now; a user message
# whose batch the scripted extractor answers with facts (failing its first call or not); or
# a flush (the stage runs; a failed batch is then tried again with extract(), as its retry)
KEYS = st.sampled_from(["city", "diet"])
VALUES = st.sampled_from("ABC")
program = st.tuples(st.just("program"), KEYS, VALUES, st.one_of(st.none(), st.integers(0, 9)))
message = st.tuples(
    st.just("message"), st.booleans(), st.lists(st.tuples(KEYS, VALUES), max_size=2)
)
flush = st.tuples(st.just("flush"))
stage_steps = st.lists(st.one_of(program, message, flush), min_size=1, max_size=10)


class _Scripted:
    """Answers each one-turn batch with the facts its message was given; fails a message's
    first call when told to."""

    name = "scripted"
    version = "1"
    window = 1

    def __init__(self) -> None:
        self.answers: dict[str, tuple[bool, list[tuple[str, str]]]] = {}
        self.failed: set[str] = set()

    def __call__(self, batch: Any) -> Any:
        (turn,) = batch.turns
        fails, facts = self.answers[turn.content]
        if fails and turn.content not in self.failed:
            self.failed.add(turn.content)
            raise RuntimeError("the model is down")
        return {
            "facts": [
                {"text": f"{key} {value}", "key": key, "sources": [turn.id]} for key, value in facts
            ]
        }


def _current(values: list[tuple[str, str, datetime]]) -> str | None:
    if not values:
        return None
    return values[max(range(len(values)), key=lambda i: (values[i][2], i))][1]


def _apply(values: list[tuple[str, str, datetime]], who: str, text: str, at: datetime) -> None:
    """One write under the documented rule (the reference model)."""
    if _current(values) == text:
        return  # identical to the current value: unchanged
    if who == "extracted" and any(w == "program" for w, _, _ in values):
        return  # never overrides a key a program wrote
    values.append((who, text, at))


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sequence=stage_steps)
def test_current_facts_through_the_stage_follow_the_rule(
    tmp_path_factory: Any, sequence: list[tuple[Any, ...]]
) -> None:
    folder: Path = tmp_path_factory.mktemp("stage")
    extractor = _Scripted()
    model: dict[str, list[tuple[str, str, datetime]]] = {"city": [], "diet": []}
    unread: list[tuple[datetime, list[tuple[str, str]]]] = []  # messages the stage has not read

    def extracted() -> None:
        for at, facts in unread:
            for key, value in facts:
                _apply(model[key], "extracted", f"{key} {value}", at)
        unread.clear()

    with SessionManager(
        "a", db_path=folder / "m.db", embedder=HashEmbedder(), background=False, extractor=extractor
    ) as mgr:
        session = mgr.start_session(goal="chat", user_id="u1")

        def drain() -> None:
            mgr.flush()
            for _ in range(len(sequence)):  # each message fails at most once
                if not mgr.health().extraction_failing:
                    break
                mgr.extract(session.id)  # the retry, now (its delay is another test's)
            assert not mgr.health().extraction_failing
            extracted()

        for number, step in enumerate(sequence):
            if step[0] == "program":
                _, key, value, day = step
                at = datetime.now(timezone.utc) if day is None else T0 + timedelta(days=day)
                mgr.remember("u1", f"{key} {value}", key=key, valid_from=at)
                _apply(model[key], "program", f"{key} {value}", at)
            elif step[0] == "message":
                _, fails, facts = step
                extractor.answers[f"message {number}"] = (fails, facts)
                said = mgr.add_message(session.id, "user", f"message {number}")
                unread.append((said.created_at, facts))
            else:
                drain()
        drain()
        current = {f.key: f.text for f in mgr.facts("u1")}
    expected = {key: _current(values) for key, values in model.items() if values}
    assert current == expected, sequence
