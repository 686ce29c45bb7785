"""What an extraction pass reports (``SessionManager.extract``) and what undoing it did
(``forget_extracted``), and the gathering of a pass's report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..longterm.users import FactPlan
from ..memory import RememberResult
from .types import Extraction, ExtractionBatch

__all__ = ["ExtractionReport", "FactOutcome", "Forgotten", "ReportBuilder"]


@dataclass(frozen=True)
class FactOutcome:
    """One extracted fact and what became of it: ``status`` is :class:`~memlane.
    RememberResult`'s (``added``, ``superseded``, ``unchanged``, ``skipped``: held back, as
    ``note`` says) or ``"planned"`` in a dry run."""

    text: str
    key: str | None
    kind: str
    sources: tuple[str, ...]
    status: str
    note: str | None = None
    fact_id: str | None = None


@dataclass(frozen=True)
class ExtractionReport:
    """What one extraction pass did (or, ``dry_run``, would do): the batches written, the
    messages they covered, each fact's outcome, the messages given entities or tags, the
    batches that failed (why, by session) and the tokens the extractor reported."""

    batches: int = 0
    messages: int = 0
    facts: tuple[FactOutcome, ...] = ()
    annotated: int = 0
    entities: Mapping[str, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    failed: Mapping[str, str] = field(default_factory=dict)
    tokens: int = 0
    dry_run: bool = False


@dataclass(frozen=True)
class Forgotten:
    """What :meth:`~memlane.SessionManager.forget_extracted` undid: facts retracted (kept
    for audit, with the reason) and messages whose extracted metadata was removed."""

    facts: int
    messages: int


_NO_USER = "the session has no user_id to hold facts (it opted in for entities and tags)"


class ReportBuilder:
    """An :class:`ExtractionReport` being gathered."""

    def __init__(self, *, dry_run: bool) -> None:
        self.dry_run = dry_run
        self.batches = 0
        self.messages = 0
        self.facts: list[FactOutcome] = []
        self.annotated = 0
        self.entities: dict[str, tuple[dict[str, Any], ...]] = {}
        self.failed: dict[str, str] = {}
        self.tokens = 0

    def planned(self, batch: ExtractionBatch, extraction: Extraction) -> None:
        self._count(batch, extraction)
        if batch.user_id is None:
            self._userless(extraction)
            return
        self.facts += [
            FactOutcome(f.text, f.key, f.kind, f.sources, "planned") for f in extraction.facts
        ]

    def written(
        self,
        batch: ExtractionBatch,
        done: list[tuple[Any, FactPlan, RememberResult]],
        annotated: int,
        extraction: Extraction,
    ) -> None:
        self.batches += 1
        self.messages += len(batch.turns)
        self.annotated += annotated
        self.tokens += extraction.tokens
        self._entities(extraction)
        for fact, _, result in done:
            self.facts.append(
                FactOutcome(
                    fact.text,
                    fact.key,
                    fact.kind,
                    fact.sources,
                    result.status,
                    result.note,
                    None if result.fact is None else result.fact.id,
                )
            )
        if batch.user_id is None:
            self._userless(extraction)

    def _userless(self, extraction: Extraction) -> None:
        self.facts += [
            FactOutcome(f.text, f.key, f.kind, f.sources, "skipped", _NO_USER)
            for f in extraction.facts
        ]

    def _count(self, batch: ExtractionBatch, extraction: Extraction) -> None:
        self.batches += 1
        self.messages += len(batch.turns)
        self.tokens += extraction.tokens
        self._entities(extraction)
        self.annotated += len(set(extraction.entities) | set(extraction.tags))

    def _entities(self, extraction: Extraction) -> None:
        for turn_id, found in extraction.entities.items():
            self.entities[turn_id] = tuple(
                {"type": e.type, "text": e.text, "value": e.value} for e in found
            )

    def done(self) -> ExtractionReport:
        return ExtractionReport(
            self.batches,
            self.messages,
            tuple(self.facts),
            self.annotated,
            dict(self.entities),
            dict(self.failed),
            self.tokens,
            self.dry_run,
        )
