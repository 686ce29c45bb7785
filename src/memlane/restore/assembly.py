"""Assembling the packed blocks into ``restore()``'s text and chat view, and counting them
exactly: the last step of :func:`memlane.restore.plan.pack`.

The sections are joined by blank lines in :data:`SECTIONS` order; the text and its chat view
(the system message: every section but the Recent turns, which become chat messages) are
counted with the declared tokenizer, and while either is over budget the blocks claimed last
are dropped (BPE counts of pieces do not add up exactly, so the packer's running total can
be a token or two off). Where the encoding's counts do add up, each section is counted once
(:class:`JoinedCount`).
"""

from __future__ import annotations

from ..errors import BudgetTooSmall
from ..text.tokens import Tokenizer
from .chat import chat_turns, message_tokens
from .packer import UNDATED, Block, Packer
from .result import RestoreCandidates, RestoredContext, RestoreReport
from .text import TITLES, day_stamps, stamp

__all__ = ["SECTIONS", "SECTIONS_ADD_UP", "JoinedCount", "assemble"]

#: The text's sections, in the order they appear.
SECTIONS: tuple[str, ...] = tuple(TITLES)


def assemble(
    p: Packer, candidates: RestoreCandidates, tokenizer: Tokenizer, max_tokens: int
) -> RestoredContext:
    """Assemble, count exactly, and trim the blocks claimed last until both views fit."""
    counted = JoinedCount(p.tok)
    while True:
        turns, turn_ids = chat_turns(p.by_section.get("recent", []))
        parts = _parts(p, frozenset())
        text = _JOIN.join(part for _, part in parts)
        exact, part_tokens = counted(parts)
        if turn_ids:
            system_parts = _parts(p, turn_ids)
            system = _JOIN.join(part for _, part in system_parts)
            system_tokens, _ = counted(system_parts)
        else:
            system, system_tokens = text, exact
        chat_tokens = message_tokens(p.tok, system, turns, system_tokens)
        if exact <= p.budget and chat_tokens <= p.budget:
            break
        excess = max(exact, chat_tokens) - p.budget
        droppable = sorted((b for b in p.blocks if b.rank > 0), key=lambda b: b.rank)
        if not droppable and p.notes:  # a note's count beside the goal was a piece's count
            p.notes.clear()
            continue
        if not droppable:  # the goal alone was counted exactly and fits; cannot happen
            raise BudgetTooSmall(f"max_tokens={p.budget} cannot hold the session goal.")
        freed = 0
        while droppable and freed < excess:
            block = droppable.pop()
            freed += block.tokens
            if block.section == "about":
                p.blocks.remove(block)
                p.by_section.pop("about", None)
                continue
            p.unclaim(
                block,
                f"trimmed: the whole counted {max(exact, chat_tokens):,} tokens > {p.budget:,}",
            )
    if part_tokens is not None:  # (what each section takes of the count just made)
        sections = {
            name: tokens
            for (name, _), tokens in zip(parts, part_tokens, strict=True)
            if name != "about" and p.by_section.get(name)
        }
    else:
        sections = {
            name: tokenizer.count(_section_text(p, name, blocks, frozenset()))
            for name, blocks in p.by_section.items()
            if blocks and name != "about"
        }
    report = RestoreReport(
        budget=max_tokens,
        model=tokenizer.model,
        encoding=tokenizer.encoding_name,
        estimate=tokenizer.estimate,
        note=tokenizer.note,
        token_count=exact,
        total_events=candidates.total_events,
        sections=sections,
        items=list(p.items.values()),
        shares=p.shares,
        message_tokens=chat_tokens if text else 0,
    )
    messages = [{"role": "system", "content": system}, *turns] if text else []
    return RestoredContext(
        text=text,
        messages=messages,
        token_count=exact,
        report=report,
        system=system,
        turns=turns,
    )


_JOIN = "\n\n"  # between sections
#: Encodings whose pre-tokenizer always starts a piece at a section's "## " title after the
#: blank line before it, so that BPE never merges across: the count of sections joined by
#: blank lines is then the sum of each one's count with its blank line (checked on random
#: texts by tests/test_restore_counts.py). Not so for GPT-2's r50k/p50k, whose "\n\n" at a
#: text's end is one piece and before "##" two.
SECTIONS_ADD_UP = frozenset({"cl100k_base", "o200k_base"})


class JoinedCount:
    """Exact counts of texts made of sections joined by blank lines. Where the encoding lets
    them add up, each section is counted once, with its blank line, however many times
    the text and its chat view (the same sections but Recent) are assembled: counting the
    text, the system message and each section again was ~9 ms of a 4,000-token restore."""

    def __init__(self, tok: Tokenizer) -> None:
        self._tok = tok
        self._adds_up = (
            not tok.custom and tok.margin == 1.0 and tok.encoding_name in SECTIONS_ADD_UP
        )
        self._counts: dict[tuple[str, bool], int] = {}

    def __call__(self, parts: list[tuple[str, str]]) -> tuple[int, list[int] | None]:
        """The count of ``parts`` joined, and each part's share of it (None: the encoding
        does not add up, and the text was counted whole)."""
        if not self._adds_up or not all(text.startswith("## ") for _, text in parts[1:]):
            return self._tok.count(_JOIN.join(text for _, text in parts)), None
        shares = []
        for i, (_, text) in enumerate(parts):
            key = (text, i < len(parts) - 1)  # (all but the last end with the blank line)
            found = self._counts.get(key)
            if found is None:
                found = self._counts[key] = self._tok.count(text + _JOIN if key[1] else text)
            shares.append(found)
        return sum(shares), shares


def _parts(p: Packer, leave_out: frozenset[str]) -> list[tuple[str, str]]:
    """The text's sections in order, as ``(name, text)``: joined by blank lines, the text."""
    parts = []
    for name in SECTIONS:
        blocks = p.by_section.get(name)
        if not blocks:
            if name in p.notes:  # e.g. pending steps none of which fit: say how many
                parts.append((name, f"{TITLES[name]}\n{p.notes[name]}"))
            continue
        if name == "about":
            parts.append((name, blocks[0].text))
            continue
        section = _section_text(p, name, blocks, leave_out)
        if section:
            parts.append((name, section))
    return parts


def _section_text(p: Packer, name: str, blocks: list[Block], leave_out: frozenset[str]) -> str:
    lines = [TITLES[name]]
    shown = [b for b in blocks if b.event.id not in leave_out]
    if not shown:
        return ""
    if name == "user":  # in the order they were chosen in: keyed facts first
        shown.sort(key=lambda block: block.rank)
    # The goal is dated by the opening line, a summary by its own text; Recent says minutes
    # as they change; history sections are dated by day (minutes only where they differ).
    if name in UNDATED:
        marks = [("", "")] * len(shown)
    elif name == "recent":
        marks = [
            stamp(shown[i - 1].event if i else None, block.event) for i, block in enumerate(shown)
        ]
    else:
        marks = day_stamps([block.event for block in shown])
    for block, (head, prefix) in zip(shown, marks, strict=True):
        text = block.text
        if prefix and block.action != "passages":  # (a passages header says the time)
            text = f"- {prefix}{text[2:]}"
        lines.append(head + text if head else text)
    note = p.notes.get(name)
    if note:
        lines.append(note)
    return "\n".join(lines)
