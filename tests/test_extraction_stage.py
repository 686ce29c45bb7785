"""The extraction stage (issue 33): off the write path, a watermark that survives reopening,
one transaction per batch, faults that leave the log and the facts exactly as they were,
the rule that an extracted fact never overrides a program's, and forget_extracted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memlane import InvalidInput, SessionManager
from memlane.extraction import ExtractedFact, Extraction, ExtractionBatch
from memlane.extraction.stage import MARK

Make = Callable[..., SessionManager]


class Scripted:
    """An extractor that answers what a test scripts, and counts its calls."""

    name = "scripted"
    version = "7"

    def __init__(self, answer: Callable[[ExtractionBatch], Any], window: int = 6) -> None:
        self.answer = answer
        self.window = window
        self.calls: list[ExtractionBatch] = []
        self.threads: list[str] = []

    def __call__(self, batch: ExtractionBatch) -> Any:
        self.calls.append(batch)
        self.threads.append(threading.current_thread().name)
        return self.answer(batch)


def _city(batch: ExtractionBatch) -> Extraction:
    """Every user turn "I live in X" → city X."""
    facts = []
    for turn in batch.turns:
        if turn.role == "user" and turn.content.startswith("I live in "):
            place = turn.content.removeprefix("I live in ").rstrip(".")
            facts.append(ExtractedFact(f"Lives in {place}", "city", sources=(turn.id,)))
    return Extraction(tuple(facts))


def _snapshot(mgr: SessionManager, session_id: str) -> tuple[Any, ...]:
    """What a fault must leave untouched: the session's events, the user's facts."""
    events = [(e.id, e.content, e.metadata, e.status) for e in mgr.events(session_id)]
    facts = [(f.id, f.text, f.status, f.metadata) for f in mgr.fact_history("u1")]
    return tuple(events), tuple(facts)


def test_record_never_calls_the_extractor(make_manager: Make) -> None:
    extractor = Scripted(_city)
    mgr = make_manager(background=False, extractor=extractor)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    mgr.record(session.id, "message", "I live in Lisbon.", metadata={"role": "user"})
    mgr.record_many(session.id, [{"kind": "message", "content": "hi", "role": "user"}])
    assert extractor.calls == []  # nothing on the write path
    mgr.flush()
    assert len(extractor.calls) == 1
    assert extractor.threads == ["memlane-extractor"]  # the stage's own call, off the caller
    assert [f.text for f in mgr.facts("u1")] == ["Lives in Lisbon"]
    history = mgr.fact_history("u1", key="city")
    assert [(f.text, f.status) for f in history] == [
        ("Lives in Porto", "superseded"),
        ("Lives in Lisbon", "current"),
    ]
    porto = history[0]
    assert porto.metadata["extracted_by"] == "scripted"
    assert porto.metadata["extractor_version"] == "7"
    first = mgr.events(session.id, kinds=["message"])[0]
    assert porto.source == first.id and porto.metadata["extracted_from"] == [first.id]
    assert porto.valid_from == first.created_at  # the message's time


def test_the_background_worker_extracts(make_manager: Make) -> None:
    extractor = Scripted(_city, window=2)
    mgr = make_manager(extractor=extractor)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    mgr.add_message(session.id, "assistant", "Noted.")
    deadline = time.monotonic() + 20
    while not mgr.facts("u1") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [f.text for f in mgr.facts("u1")] == ["Lives in Porto"]
    assert extractor.threads and all(name == "memlane-extractor" for name in extractor.threads)


def test_sessions_without_a_user_are_left_alone(make_manager: Make) -> None:
    extractor = Scripted(_city)
    mgr = make_manager(background=False, extractor=extractor)
    session = mgr.start_session(goal="no user")
    mgr.add_message(session.id, "user", "I live in Porto.")
    mgr.flush()
    assert extractor.calls == []
    with pytest.raises(InvalidInput, match="no user_id and did not opt in"):
        mgr.extract(session.id)


def test_a_session_opts_in_or_out(make_manager: Make) -> None:
    """metadata={"memlane_extract": True} has a session without a user read (its entities and
    tags; its facts have no one to hold them), False leaves a user's session alone."""
    mgr = make_manager(background=False, extractor="rules")
    opted = mgr.start_session(goal="support chat", metadata={"memlane_extract": True})
    mgr.add_message(opted.id, "user", "I live in Porto. Write to ann@example.org please.")
    out = mgr.start_session(goal="private", user_id="u1", metadata={"memlane_extract": False})
    mgr.add_message(out.id, "user", "I live in Lisbon. Write to bob@example.org please.")
    assert [f.status for f in mgr.extract(opted.id, dry_run=True).facts] == ["skipped"]
    mgr.flush()
    tagged = mgr.events(opted.id, where={f"{MARK}.tags.email": True})
    assert [e.metadata[MARK]["entities"]["email"] for e in tagged] == [["ann@example.org"]]
    assert mgr.events(out.id, where={MARK: {"$exists": True}}) == []
    assert mgr.facts("u1") == []  # neither session gave a fact
    with pytest.raises(InvalidInput, match="opted out of extraction"):
        mgr.extract(out.id)
    more = mgr.add_message(opted.id, "user", "My name is Ana.")
    report = mgr.extract(opted.id)
    assert [(f.text, f.status) for f in report.facts] == [("Name is Ana", "skipped")]
    assert report.facts[0].note is not None and "no user_id" in report.facts[0].note
    assert mgr.events(opted.id, where={MARK: {"$exists": True}})[-1].id == more.id


def _watermarks(db_path: Path) -> list[str]:
    """The watermark keys in the store's meta table, read as another process would."""
    import sqlite3

    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT key FROM meta WHERE key LIKE 'extraction_seq:%'").fetchall()
    return sorted(key for (key,) in rows)


def test_deleting_a_session_or_erasing_its_user_drops_its_watermark(
    make_manager: Make, db_path: Path
) -> None:
    mgr = make_manager(background=False, extractor="rules")
    kept = mgr.start_session(goal="chat", user_id="u1")
    doomed = mgr.start_session(goal="chat", user_id="u1")
    erased = mgr.start_session(goal="chat", user_id="u2")
    for session in (kept, doomed, erased):
        mgr.add_message(session.id, "user", "I live in Porto.")
    mgr.flush()
    assert _watermarks(db_path) == sorted(
        f"extraction_seq:researcher:{s.id}" for s in (kept, doomed, erased)
    )
    mgr.delete_session(doomed.id)
    mgr.erase_user("u2")
    assert _watermarks(db_path) == [f"extraction_seq:researcher:{kept.id}"]


def test_windows_and_the_watermark_survive_reopening(make_manager: Make, db_path: Path) -> None:
    extractor = Scripted(_city, window=3)
    mgr = make_manager(background=False, extractor=extractor)
    session = mgr.start_session(goal="chat", user_id="u1")
    for n in range(7):
        mgr.add_message(session.id, "user", f"message {n}")
    mgr.flush()
    assert [len(b.turns) for b in extractor.calls] == [3, 3, 1]
    seen = [t.id for b in extractor.calls for t in b.turns]
    assert seen == [e.id for e in mgr.events(session.id, kinds=["message"])]
    mgr.close()
    again = Scripted(_city, window=3)
    reopened = make_manager(background=False, extractor=again)
    reopened.flush()
    assert again.calls == []  # nothing processed twice
    reopened.add_message(session.id, "user", "I live in Oslo.")
    reopened.flush()
    assert [[t.content for t in b.turns] for b in again.calls] == [["I live in Oslo."]]
    assert [f.text for f in reopened.facts("u1")] == ["Lives in Oslo"]


def test_a_window_not_full_waits_for_quiet(make_manager: Make) -> None:
    extractor = Scripted(_city, window=4)
    mgr = make_manager(background=False, extractor=extractor)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    stage = mgr._extraction
    assert stage is not None
    assert stage.run().batches == 0  # one turn of four, the session just spoke
    assert stage.run(flush=True).batches == 1
    eager = Scripted(_city, window=4)
    eager.quiet_seconds = 0  # type: ignore[attr-defined]
    other = make_manager("other", background=False, extractor=eager)
    chat = other.start_session(goal="chat", user_id="u1")
    other.add_message(chat.id, "user", "I live in Oslo.")
    assert other._extraction is not None and other._extraction.run().batches == 1


def test_entities_and_tags_are_metadata_where_can_filter(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor="rules")
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "Write to ann@example.org about the $40 refund.")
    mgr.add_message(session.id, "user", "Nothing here.")
    mgr.flush()
    tagged = mgr.events(session.id, where={f"{MARK}.tags.email": True})
    assert [e.content for e in tagged] == ["Write to ann@example.org about the $40 refund."]
    mark = tagged[0].metadata[MARK]
    assert mark["entities"]["email"] == ["ann@example.org"]
    assert mark["entities"]["money"] == ["$40"]
    assert (mark["by"], mark["version"]) == ("rules", "1")
    assert tagged[0].metadata["role"] == "user"  # the caller's metadata stays
    hits = mgr.search("refund", where={f"{MARK}.tags.money": True})
    assert [h.event.id for h in hits] == [tagged[0].id]


# -- faults: each leaves the log and the facts exactly as before -------------------------------


def _boom(batch: ExtractionBatch) -> Any:
    raise RuntimeError("model exploded")


def _other_user(batch: ExtractionBatch) -> Any:
    return {"facts": [{"text": "Lives in Rome", "key": "city", "user_id": "u2"}]}


def _delete(batch: ExtractionBatch) -> Any:
    return {"facts": [{"text": "x", "action": "delete", "ids": ["all"]}]}


def _not_a_fact(batch: ExtractionBatch) -> Any:
    return {"facts": [{"text": "Lives in Rome", "kind": "summary"}]}


def _half_good(batch: ExtractionBatch) -> Any:  # one good fact, then a broken one: none written
    return {"facts": [{"text": "Lives in Rome", "key": "city"}, {"text": 42}]}


def _nonsense(batch: ExtractionBatch) -> Any:
    return "{not json"


def _unknown_turn(batch: ExtractionBatch) -> Any:
    return {"entities": {"not-a-turn": [{"type": "email", "text": "a@b.co"}]}}


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (_boom, "raised RuntimeError: model exploded"),
        (_other_user, "names user 'u2'"),
        (_delete, "unknown fields ['action', 'ids']"),
        (_not_a_fact, "kind must be one of fact, preference"),
        (_half_good, "a fact's text must be a non-empty string"),
        (_nonsense, "expected an Extraction or a dict"),
        (_unknown_turn, "not in the batch"),
    ],
)
def test_a_bad_extractor_changes_nothing(
    make_manager: Make, answer: Callable[[ExtractionBatch], Any], says: str
) -> None:
    mgr = make_manager(background=False, extractor=Scripted(answer))
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.remember("u1", "Lives in Berlin", key="city")
    mgr.add_message(session.id, "user", "I live in Porto.")
    before = _snapshot(mgr, session.id)
    mgr.flush()
    assert _snapshot(mgr, session.id) == before
    health = mgr.health()
    assert not health.ok and health.extraction_failing == 1
    assert health.extraction_error is not None and says in health.extraction_error
    report = mgr.extract(session.id)  # tried again at once: fails the same, writes nothing
    assert list(report.failed) == [session.id] and says in report.failed[session.id]
    assert _snapshot(mgr, session.id) == before


def test_a_failed_batch_is_retried_later_and_nothing_is_lost(make_manager: Make) -> None:
    answers: list[Callable[[ExtractionBatch], Any]] = [_boom, _city]
    extractor = Scripted(lambda batch: answers.pop(0)(batch))
    mgr = make_manager(background=False, extractor=extractor)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    mgr.flush()
    assert mgr.health().extraction_failing == 1
    mgr.flush()  # backing off: not tried again yet
    assert len(extractor.calls) == 1
    stage = mgr._extraction
    assert stage is not None
    stage._failing[session.id].retry_at = 0.0  # the delay has passed
    mgr.flush()
    assert len(extractor.calls) == 2
    assert [t.content for t in extractor.calls[1].turns] == ["I live in Porto."]  # the same
    assert [f.text for f in mgr.facts("u1")] == ["Lives in Porto"]
    health = mgr.health()
    assert health.extraction_error is None and health.extraction_failing == 0 and health.ok


def test_a_failing_batch_backs_off_is_never_given_up_and_a_restart_retries(
    make_manager: Make,
) -> None:
    """The delays grow to an hour and stay there (tried hourly, never skipped; no hot loop
    meanwhile); they are kept in memory, so a reopened manager tries at once."""
    from memlane.extraction.stage import BACKOFF

    extractor = Scripted(_boom)
    mgr = make_manager(background=False, extractor=extractor)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    stage = mgr._extraction
    assert stage is not None
    delays = []
    for _ in range(len(BACKOFF) + 2):
        started = time.monotonic()
        mgr.flush()
        for _ in range(3):
            mgr.flush()  # waiting: not called again
        failing = stage._failing[session.id]
        delays.append(round(failing.retry_at - started, -1))
        failing.retry_at = 0.0  # the delay has passed
    assert len(extractor.calls) == len(BACKOFF) + 2
    assert delays == [*BACKOFF, BACKOFF[-1], BACKOFF[-1]]
    error = mgr.health().extraction_error
    assert error is not None and f"try {len(BACKOFF) + 2}; again in 3600 s" in error
    mgr.close()
    works = Scripted(_city)
    again = make_manager(background=False, extractor=works)
    again.flush()
    assert len(works.calls) == 1 and [f.text for f in again.facts("u1")] == ["Lives in Porto"]


def test_a_hung_extractor_times_out(make_manager: Make) -> None:
    release = threading.Event()

    def hang(batch: ExtractionBatch) -> Any:
        release.wait(10)
        return _city(batch)

    extractor = Scripted(hang)
    extractor.timeout = 0.3  # type: ignore[attr-defined]
    mgr = make_manager(background=False, extractor=extractor)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    before = _snapshot(mgr, session.id)
    started = time.monotonic()
    mgr.flush()
    assert time.monotonic() - started < 5
    assert _snapshot(mgr, session.id) == before
    error = mgr.health().extraction_error
    assert error is not None and "has not answered" in error
    mgr.flush()  # no second call beside the hung one
    assert len(extractor.calls) == 1
    release.set()
    time.sleep(0.2)
    assert _snapshot(mgr, session.id) == before  # its late answer is thrown away


# -- conflicts ----------------------------------------------------------------------------------


def test_an_extracted_fact_never_overrides_a_programs(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor=Scripted(_city))
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.remember("u1", "Lives in Berlin", key="city", valid_from="2020-01-01")
    mgr.add_message(session.id, "user", "I live in Porto.")  # newer, but another source kind
    mgr.flush()
    assert [f.text for f in mgr.facts("u1")] == ["Lives in Berlin"]
    report = mgr.extract(session.id)
    assert report.batches == 0  # (already done: the watermark moved on)
    mgr.add_message(session.id, "user", "I live in Oslo.")
    outcome = mgr.extract(session.id).facts
    assert [(o.text, o.status) for o in outcome] == [("Lives in Oslo", "skipped")]
    assert outcome[0].note is not None and "a program remembered" in outcome[0].note
    assert mgr.health().extraction_error is None  # held back is no failure


def test_a_program_overrides_an_extracted_fact(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor=Scripted(_city))
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    mgr.flush()
    result = mgr.remember("u1", "Lives in Lisbon", key="city")
    assert result.status == "superseded" and result.superseded[0].text == "Lives in Porto"


def test_forget_extracted_undoes_through_the_normal_path(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor="rules")
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.remember("u1", "Is vegetarian", key="diet", kind="preference")
    mgr.add_message(session.id, "user", "My name is Ana. Mail me at ana@example.org")
    mgr.flush()
    assert {f.text for f in mgr.facts("u1")} == {"Is vegetarian", "Name is Ana"}
    forgotten = mgr.forget_extracted(extractor="rules")
    assert (forgotten.facts, forgotten.messages) == (1, 1)
    assert [f.text for f in mgr.facts("u1")] == ["Is vegetarian"]
    retracted = [f for f in mgr.fact_history("u1") if f.status == "retracted"]
    assert [f.text for f in retracted] == ["Name is Ana"]
    assert retracted[0].retracted_reason is not None
    assert all(MARK not in e.metadata for e in mgr.events(session.id))
    assert mgr.forget_extracted() == type(forgotten)(0, 0)  # nothing left to undo
    mgr.flush()
    assert [f.text for f in mgr.facts("u1")] == ["Is vegetarian"]  # not extracted again


def test_forget_extracted_since_and_by_name(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor=Scripted(_city))
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    mgr.flush()
    assert mgr.forget_extracted(extractor="rules").facts == 0  # another extractor's name
    assert mgr.forget_extracted(since="2999-01-01").facts == 0
    assert mgr.forget_extracted(since="2000-01-01", extractor="scripted").facts == 1


def test_dry_run_writes_nothing(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor="rules")
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I moved to Porto. Call me Ana.")
    before = _snapshot(mgr, session.id)
    report = mgr.extract(session.id, dry_run=True)
    assert [(o.key, o.text, o.status) for o in report.facts] == [
        ("city", "Lives in Porto", "planned"),
        ("name", "Name is Ana", "planned"),
    ]
    assert report.dry_run and _snapshot(mgr, session.id) == before
    assert mgr.extract(session.id).batches == 1  # the watermark had not moved


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("llm", "Unknown extractor 'llm'"),
        (42, "extractor must be callable, got int"),
        (Scripted(_city, window=0), "window must be 1 to 200"),
        (type("Q", (Scripted,), {"quiet_seconds": -1})(_city), "quiet_seconds must be"),
    ],
)
def test_bad_extractor_values(make_manager: Make, value: Any, says: str) -> None:
    with pytest.raises(InvalidInput, match=says) as caught:
        make_manager(extractor=value)
    message = str(caught.value)
    assert '"rules"' in message or "window" in message or "seconds" in message


def test_no_extractor_no_extract(make_manager: Make) -> None:
    mgr = make_manager(background=False)
    with pytest.raises(InvalidInput, match="no extractor"):
        mgr.extract()
    with pytest.raises(InvalidInput, match="no extractor"):
        mgr.forget_extracted()


def test_read_only_refuses_an_extractor(make_manager: Make) -> None:
    make_manager(background=False).close()
    with pytest.raises(InvalidInput, match="read_only"):
        make_manager(read_only=True, extractor="rules")


def test_a_failure_inside_the_transaction_writes_nothing(
    make_manager: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The facts, the annotations and the watermark commit together or not at all (what a
    crash mid-batch leaves: the next process extracts the same window once)."""
    mgr = make_manager(background=False, extractor="rules")
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I moved to Porto. Mail ann@example.org")
    before = _snapshot(mgr, session.id)
    log = mgr._writer.log
    real = log.set_meta

    def broken(tx: Any, key: str, value: str) -> None:
        if key.startswith("extraction_seq:"):
            from memlane import StoreFull

            raise StoreFull("disk full (simulated)")
        real(tx, key, value)

    monkeypatch.setattr(log, "set_meta", broken)
    mgr.flush()
    assert _snapshot(mgr, session.id) == before
    error = mgr.health().extraction_error
    assert error is not None and "disk full" in error
    monkeypatch.setattr(log, "set_meta", real)
    report = mgr.extract(session.id)
    assert [(o.text, o.status) for o in report.facts] == [("Lives in Porto", "added")]
    assert mgr.extract(session.id).batches == 0  # once


def test_restore_shows_extracted_facts(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor="rules")
    session = mgr.start_session(goal="Plan a dinner", user_id="u1")
    mgr.add_message(session.id, "user", "I'm allergic to peanuts. I moved to Porto.")
    mgr.flush()
    text = mgr.restore(session.id, 2000).text
    assert "About the user" in text
    assert "Is allergic to peanuts" in text and "Lives in Porto" in text


def test_restore_shows_a_stated_preference_once(make_manager: Make) -> None:
    """The user's "I prefer window seats" is an instruction and, extracted, a preference: restore
    shows it once, in the user's own words (restore/plan.py says why that section keeps it);
    an extracted fact the instructions do not show, and a program's, stay in About the user."""
    mgr = make_manager(background=False, extractor="rules")
    session = mgr.start_session(goal="Book a flight", user_id="u1")
    mgr.add_message(session.id, "user", "I prefer window seats.")
    mgr.add_message(session.id, "user", "My name is Ana. I love hiking in the hills.")
    for n in range(30):  # the preference is far from the recent turns
        mgr.add_message(session.id, "assistant", f"Looking at flight option number {n} now.")
    mgr.flush()
    assert {f.text for f in mgr.facts("u1")} == {
        "Prefers window seats",
        "Name is Ana",
        "Loves hiking in the hills",
    }
    restored = mgr.restore(session.id, 400)
    text = restored.text
    assert text.count("window seats") == 1, text
    instructions = text.split("## The user's instructions and preferences")[1].split("##")[0]
    assert "I prefer window seats." in instructions
    about = text.split("## About the user")[1].split("##")[0]
    assert "Name is Ana" in about and "Loves hiking in the hills" in about
    fact = next(f for f in mgr.facts("u1") if f.text == "Prefers window seats")
    item = next(i for i in restored.report.items if i.event_id == fact.id)
    assert (item.action, item.reason) == ("dropped", "shown in the user's instructions (said so)")
    mgr.remember("u1", "Prefers window seats", kind="preference")  # a program's own: kept
    assert "- preference" in mgr.restore(session.id, 400).text.split("## About the user")[1]


def test_memlane_extract_command(make_manager: Make, db_path: Path) -> None:
    from click.testing import CliRunner

    from memlane.cli import cli

    mgr = make_manager(background=False)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "My name is Ana. Mail ana@example.org")
    mgr.close()
    runner = CliRunner()
    base = ["--db", str(db_path), "extract", session.id, "--agent", "researcher"]
    dry = runner.invoke(cli, [*base, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "Name is Ana" in dry.output and "would write" in dry.output
    wet = runner.invoke(cli, [*base, "--json"])
    assert wet.exit_code == 0, wet.output
    import json

    report = json.loads(wet.output)
    assert [f["status"] for f in report["facts"]] == ["added"]
    assert report["entities"] and not report["dry_run"]
    again = runner.invoke(cli, [*base, "--json"])
    assert json.loads(again.output)["batches"] == 0
    bad = runner.invoke(cli, [*base, "--model", "m"])
    assert bad.exit_code != 0 and "--llm" in bad.output


def test_a_pass_looks_only_at_what_changed(make_manager: Make) -> None:
    extractor = Scripted(_city, window=1)
    mgr = make_manager(background=False, extractor=extractor)
    stage = mgr._extraction
    assert stage is not None
    sessions = [mgr.start_session(goal=f"chat {n}", user_id=f"u{n}") for n in range(4)]
    for session in sessions:
        mgr.add_message(session.id, "user", "I live in Porto.")
    looked: list[str] = []
    real = stage._session

    def spy(session: Any, report: Any, *, force: bool) -> bool:
        looked.append(session.id)
        return real(session, report, force=force)

    stage._session = spy  # type: ignore[method-assign]
    stage.run()
    assert sorted(looked) == sorted(s.id for s in sessions)  # the first pass: all of them
    from memlane.core.clock import now_us

    looked.clear()
    stage._checked_us = before = now_us()  # (as if the overlap second had passed)
    stage.run()
    assert looked == []  # nothing changed
    mgr.add_message(sessions[2].id, "user", "I live in Oslo.")
    stage._checked_us = before
    stage.run()
    assert looked == [sessions[2].id]
    assert [f.text for f in mgr.facts("u2")] == ["Lives in Oslo"]


def test_short_term_messages_are_never_extracted(make_manager: Make) -> None:
    mgr = make_manager(background=False, extractor="rules")
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "My one-time code is 734 219.", ttl=300)
    mgr.add_message(session.id, "user", "My name is Ana.")
    mgr.flush()
    assert [f.text for f in mgr.facts("u1")] == ["Name is Ana"]


_CHILD = r"""
import sys, time
from pathlib import Path
from memlane import SessionManager
from memlane.longterm.users import UserMemory
from memlane.testing import HashEmbedder

db, marker = sys.argv[1], Path(sys.argv[2])
real = UserMemory.apply

def apply_then_hang(self, tx, plan):
    result = real(self, tx, plan)  # the first fact is written in the open transaction...
    marker.write_text("in the batch")
    time.sleep(60)  # ...and the process is killed here
    return result

UserMemory.apply = apply_then_hang
mgr = SessionManager("researcher", db_path=db, embedder=HashEmbedder(), background=False,
                     extractor="rules")
mgr.flush()
"""


def test_sigkill_mid_batch_neither_loses_nor_duplicates(
    make_manager: Make, db_path: Path, tmp_path: Path
) -> None:
    import os
    import signal
    import subprocess
    import sys

    from .conftest import child_env

    mgr = make_manager(background=False)
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "My name is Ana. I moved to Porto.")
    mgr.flush()
    mgr.close()
    marker = tmp_path / "marker"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(db_path), str(marker)], env=child_env()
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the child never reached the batch's transaction"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    after = make_manager(background=False, extractor="rules")
    assert after.facts("u1") == []  # the killed batch left nothing behind
    after.flush()
    assert sorted(f.text for f in after.fact_history("u1")) == ["Lives in Porto", "Name is Ana"]
    after.flush()
    assert len(after.fact_history("u1")) == 2  # and nothing twice


def test_batches_and_tokens_are_metrics(make_manager: Make) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from memlane.metrics import Metrics

    answers: list[Callable[[ExtractionBatch], Any]] = [_boom, lambda b: {"tokens": 42}]
    extractor = Scripted(lambda batch: answers.pop(0)(batch))
    registry = CollectorRegistry()
    mgr = make_manager(background=False, extractor=extractor, metrics=Metrics(registry))
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "hello")
    mgr.flush()
    mgr.extract(session.id)
    text = generate_latest(registry).decode()
    assert 'memlane_extraction_batches_total{extractor="scripted",outcome="failed"} 1.0' in text
    assert 'memlane_extraction_batches_total{extractor="scripted",outcome="ok"} 1.0' in text
    assert 'memlane_extraction_batch_tokens_sum{extractor="scripted"} 42.0' in text
    assert session.id not in text and "u1" not in text


@pytest.mark.postgres
def _contains_cases(mgr: SessionManager) -> None:
    """``$contains``: entity values (lists) filter by value, typed, arrays only."""
    from memlane import InvalidFilter

    session = mgr.start_session(goal="contains", user_id="u9")
    ann = mgr.add_message(session.id, "user", "Write to ann@example.org about the $40 refund.")
    mgr.add_message(session.id, "user", "Write to bob@example.org instead.")
    listed = mgr.record(session.id, "step", "listed", metadata={"people": ["Ana", 3, True]})
    mgr.record(session.id, "step", "scalar", metadata={"people": "Ana"})
    mgr.record(session.id, "step", "numbers", metadata={"people": [1, "3"]})
    mgr.extract(session.id)
    email = f"{MARK}.entities.email"
    found = mgr.events(session.id, where={email: {"$contains": "ann@example.org"}})
    assert [e.id for e in found] == [ann.id]
    for value in ("Ana", 3, True):
        found = mgr.events(session.id, where={"people": {"$contains": value}})
        assert [e.id for e in found] == [listed.id], value
    assert mgr.events(session.id, where={"people": {"$contains": "Bo"}}) == []
    either = {"$or": [{email: {"$contains": "bob@example.org"}}, {"people": {"$contains": 3}}]}
    assert [e.content for e in mgr.events(session.id, where=either)] == [
        "Write to bob@example.org instead.",
        "listed",
    ]
    for bad in (["Ana"], None, {"a": 1}):
        with pytest.raises(InvalidFilter, match=r"\$contains"):
            mgr.events(session.id, where={"people": {"$contains": bad}})


def test_entity_values_filter_with_contains(make_manager: Make) -> None:
    _contains_cases(make_manager(background=False, extractor="rules"))


def test_the_stage_on_postgresql(postgres_url: str) -> None:
    """The same path on PostgreSQL: a watermark in its meta table, facts and annotations in
    one transaction, forget_extracted; writers to one session are ordered by the session's
    row lock, so seq order is commit order within a session (what the watermark relies on)."""
    from memlane.testing import HashEmbedder

    url = postgres_url + ("&" if "?" in postgres_url else "?") + "schema=extraction_stage"
    options: dict[str, Any] = {"url": url, "embedder": HashEmbedder(), "background": False}
    with SessionManager("researcher", extractor="rules", **options) as mgr:
        session = mgr.start_session(goal="chat", user_id="u1")
        mgr.add_message(session.id, "user", "My name is Ana. Mail ana@example.org")
        mgr.flush()
        assert [f.text for f in mgr.facts("u1")] == ["Name is Ana"]
        tagged = mgr.events(session.id, where={f"{MARK}.tags.email": True})
        assert len(tagged) == 1
    extractor = Scripted(_city)
    with SessionManager("researcher", extractor=extractor, **options) as mgr:
        mgr.flush()
        assert extractor.calls == []  # the watermark survived reopening
        mgr.add_message(session.id, "user", "I live in Oslo.")
        mgr.flush()
        assert [f.text for f in mgr.facts("u1", key="city")] == ["Lives in Oslo"]
        assert mgr.forget_extracted().facts == 2
    with SessionManager("researcher", extractor="rules", **options) as mgr:
        _contains_cases(mgr)  # (the postgres dialect of $contains)


def test_memlane_mcp_takes_extract(db_path: Path) -> None:
    from click.testing import CliRunner

    from memlane.cli import cli

    runner = CliRunner()
    both = runner.invoke(
        cli, ["--db", str(db_path), "mcp", "--agent", "a", "--extract", "rules", "--read-only"]
    )
    assert both.exit_code != 0 and "--read-only" in both.output
    assert "--extract" in runner.invoke(cli, ["mcp", "--help"]).output


def test_a_slow_extractor_never_holds_up_embedding_or_close(make_manager: Make) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow(batch: ExtractionBatch) -> Any:
        started.set()
        release.wait(30)
        return _city(batch)

    extractor = Scripted(slow, window=1)
    mgr = make_manager(extractor=extractor)  # the worker, and the stage's own thread
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "I live in Porto.")
    assert started.wait(20), "the stage never called the extractor"
    mgr.add_message(session.id, "user", "Something to embed while the extractor thinks.")
    deadline = time.monotonic() + 20
    while mgr.health().backlog and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mgr.health().backlog == 0  # the embedding worker went on meanwhile
    began = time.monotonic()
    mgr.close()  # abandons the call in progress: nothing of that batch is written
    assert time.monotonic() - began < 5
    release.set()


def test_a_message_deleted_meanwhile_is_skipped(make_manager: Make) -> None:
    def delete_first(batch: ExtractionBatch) -> Any:
        mgr.delete_event(batch.turns[0].id)  # gone before the stage writes
        return {"entities": {batch.turns[0].id: [{"type": "email", "text": "a@b.co"}]}}

    mgr = make_manager(background=False, extractor=Scripted(delete_first))
    session = mgr.start_session(goal="chat", user_id="u1")
    mgr.add_message(session.id, "user", "write to a@b.co")
    mgr.flush()
    assert mgr.health().extraction_error is None
    assert mgr.events(session.id, kinds=["message"]) == []
