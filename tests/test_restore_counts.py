"""Restore counts its text exactly, a section at a time where the encoding lets counts add
up (restore/assembly.py ``JoinedCount``): the sum must be the whole text's count."""

from __future__ import annotations

import random

import pytest

from memlane import SessionManager
from memlane.restore.assembly import SECTIONS_ADD_UP as _SECTIONS_ADD_UP
from memlane.text.tokens import Tokenizer, tokenizer_for

# what a section's end and a title's line may hold: punctuation that takes newlines into
# its piece, contractions, spaces and newlines of every kind, letters of other scripts
_PIECES = [*"ab Z9.,;:!?'\"-_()[]{}#*`\n\t\r", "é", "中", "😀", "'s", "'ll", "  ", "\n\n", "\u00a0"]


@pytest.mark.parametrize("encoding", sorted(_SECTIONS_ADD_UP))
def test_sections_joined_by_blank_lines_count_as_the_sum_of_their_counts(encoding: str) -> None:
    tok = Tokenizer(encoding, encoding)
    rng = random.Random(encoding)
    for _ in range(3_000):
        head = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 24)))
        tail = "## " + "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 24)))
        assert tok.count(f"{head}\n\n{tail}") == tok.count(f"{head}\n\n") + tok.count(tail), (
            head,
            tail,
        )


def _busy_session(mgr: SessionManager) -> str:
    session = mgr.start_session("Ship the v2 release: migrate the billing tables first.")
    for i in range(40):
        mgr.add_message(session.id, "user", f"Please check item {i}; always use UTC times.")
        mgr.add_message(session.id, "assistant", f"Checked item {i}: {'ok. ' * (i % 7)}")
        if i % 5 == 0:
            mgr.record_decision(session.id, f"Decision {i}: keep the old schema until v2.1.")
            mgr.record_step(session.id, f"step {i}", result={"rows": i, "note": "x" * i})
    mgr.add_pending(session.id, "Write the migration notes")
    return session.id


def _words(text: str) -> int:
    return len(text.split())


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4", "claude-3-5-sonnet", _words])
@pytest.mark.parametrize("budget", [300, 1_200, 5_000])
def test_a_restores_counts_are_its_texts(make_manager: object, model: str, budget: int) -> None:
    mgr = make_manager(background=False)  # type: ignore[operator]
    context = mgr.restore(_busy_session(mgr), max_tokens=budget, model=model)
    tok = tokenizer_for(model)
    assert context.token_count == tok.count(context.text) <= budget
    assert context.report.message_tokens <= budget
    report = context.report
    if tok.encoding_name in _SECTIONS_ADD_UP and not tok.estimate:
        about = "" if context.text.startswith("## ") else context.text.split("\n\n## ")[0]
        opening = tok.count(about + "\n\n") if about else 0
        assert opening + sum(report.sections.values()) == context.token_count
    else:  # (an estimate, a counter of one's own) each section's own text, counted alone
        sections = ["## " + part for part in ("\n\n" + context.text).split("\n\n## ")[1:]]
        assert sorted(report.sections.values()) == sorted(
            tok.count(text) for text in sections if not text.startswith("## Pending steps\n(+")
        )


def test_short_pieces_are_counted_once_across_restores_but_a_callers_counter_every_time(
    make_manager: object,
) -> None:
    """Time marks and headers recur in every restore of a session: their counts are kept
    (by encoding, under the text's hash) — the same text, none of them counted again; a
    counter of the caller's own is asked each time (it may not count the same twice)."""
    from memlane.restore import packer

    mgr = make_manager(background=False)  # type: ignore[operator]
    session_id = _busy_session(mgr)
    packer._SHORT_COUNTS.clear()
    first = mgr.restore(session_id, max_tokens=1_500, model="gpt-4o")
    kept = len(packer._SHORT_COUNTS)
    assert kept > 5
    again = mgr.restore(session_id, max_tokens=1_500, model="gpt-4o")
    assert again.text == first.text and again.report.sections == first.report.sections
    assert len(packer._SHORT_COUNTS) == kept  # (every short piece found)
    mgr.restore(session_id, max_tokens=1_500, model="gpt-4")
    assert len(packer._SHORT_COUNTS) > kept  # (another encoding: counted anew)

    calls: list[str] = []

    def own(text: str) -> int:
        calls.append(text)
        return len(text.split())

    before = len(packer._SHORT_COUNTS)
    mgr.restore(session_id, max_tokens=1_500, model=own)
    first_calls = len(calls)
    calls.clear()
    mgr.restore(session_id, max_tokens=1_500, model=own)
    assert len(calls) == first_calls and len(packer._SHORT_COUNTS) == before
