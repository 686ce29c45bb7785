"""Property (issue 29): restore shows each event once. When the summary stands in for earlier
events, the events it covers are not shown again beside it (an open pending step, pinned, is
the one exception: a to-do is always listed); when they all fit, the summary is left out."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import SessionManager
from memlane.restore.summaries import covers
from memlane.testing import HashEmbedder

WORDS = ["release", "tests", "ship", "friday", "build", "green", "tag", "rollback", "docs"]
action = st.sampled_from(
    ["step", "decision", "tool_output", "message", "fact", "error", "pending", "complete"]
)
sentence = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.lists(st.tuples(action, sentence), min_size=1, max_size=25),
    after=st.lists(st.tuples(action, sentence), max_size=10),
    budget=st.integers(120, 4_000),
    query=st.none() | sentence,
)
def test_each_event_appears_once(
    tmp_path_factory: object,
    before: list[tuple[str, str]],
    after: list[tuple[str, str]],
    budget: int,
    query: str | None,
) -> None:
    db = Path(tmp_path_factory.mktemp("once")) / "s.db"  # type: ignore[attr-defined]
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("ship the release")
        mgr.record_step(session.id, "started")  # something to summarise, whatever follows
        todo: list[str] = []

        def play(actions: list[tuple[str, str]]) -> None:
            for kind, words in actions:
                if kind == "complete":
                    if todo:
                        mgr.complete_pending(todo.pop(0), result={"done": words})
                elif kind == "pending":
                    todo.append(mgr.add_pending(session.id, words).id)
                elif kind == "message":
                    mgr.add_message(session.id, "user", words)
                elif kind == "tool_output":
                    mgr.record_tool_output(session.id, {"out": words}, tool="ci")
                else:
                    mgr.record(session.id, kind, words)

        play(before)
        summary = mgr.summarize(session.id)
        play(after)
        report = mgr.restore(session.id, budget, query=query).report
        shown = [item for item in report.items if item.action != "dropped"]
        counts = Counter(item.event_id for item in shown)
        assert all(n == 1 for n in counts.values()), counts.most_common(3)
        if summary.id in counts:
            record = covers(summary)
            assert record is not None
            covered = {
                e.id
                for e in mgr.events(session.id)
                if e.kind not in ("goal", "summary")
                and e.created_at <= summary.created_at
                and e.id <= record["to"]
            }
            beside = [
                item
                for item in shown
                if item.event_id in covered and item.section not in ("goal", "pending")
            ]
            assert not beside, [(i.kind, i.section) for i in beside]
