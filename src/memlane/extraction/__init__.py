"""Memory that forms itself: facts, preferences, entities and tags drawn from conversations,
off the write path (``SessionManager(extractor=...)``; docs/memory.md)."""

from __future__ import annotations

from .llm import LLMExtractor
from .reports import ExtractionReport, FactOutcome, Forgotten
from .rules import RuleExtractor
from .types import Entity, ExtractedFact, Extraction, ExtractionBatch, Extractor, Turn

__all__ = [
    "Entity",
    "ExtractedFact",
    "Extraction",
    "ExtractionBatch",
    "ExtractionReport",
    "Extractor",
    "FactOutcome",
    "Forgotten",
    "LLMExtractor",
    "RuleExtractor",
    "Turn",
]
