"""memlane: durable local memory for long-running LLM agents.

>>> from memlane import SessionManager
>>> mgr = SessionManager(agent_id="researcher", db_path="./sessions.db")  # doctest: +SKIP
>>> session = mgr.start_session(goal="Survey 2026 sparse attention methods")  # doctest: +SKIP
>>> mgr.record_decision(session.id, text="prioritise papers with code releases")  # doctest: +SKIP
>>> context = mgr.restore(session.id, max_tokens=4000)  # doctest: +SKIP
"""

from __future__ import annotations

from .aio import AsyncSessionManager
from .core import moved
from .embed import HashEmbedder, MiniLMEmbedder, SentenceTransformerEmbedder
from .errors import (
    BudgetTooSmall,
    DocumentNotFound,
    EmbedderMismatch,
    EventNotFound,
    ExtractionFailed,
    FactNotFound,
    InvalidFilter,
    InvalidInput,
    InvalidPayload,
    ModelNotAvailable,
    PermissionDenied,
    PoolAccessDenied,
    RedactionFailed,
    SchemaTooNew,
    SessionClosed,
    SessionKeyTaken,
    SessionManagerError,
    SessionNotFound,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreMisconfigured,
    StoreReadOnly,
    StoreUnavailable,
)
from .events import Event, Hit, Hits, Passage, PoolGrant, Session
from .longterm.knowledge import DocumentInfo, IngestResult
from .manager import SessionManager
from .memory import Fact, RememberResult, Resolution
from .privacy.erasure import ErasureReceipt
from .protocols import Embedder, Summarizer, TokenCounter
from .ranking.budget import CacheUsage, cache_usage, set_cache_limit
from .redaction import PiiRedactor, Redaction, Redactor, Span
from .restore import BudgetShares, ReportItem, RestoredContext, RestoreReport, SectionShare
from .retention import RetentionPolicy
from .search.recency import Recency

__version__ = "0.1.0"

moved.install()

__all__ = [
    "AsyncSessionManager",
    "BudgetShares",
    "BudgetTooSmall",
    "CacheUsage",
    "DocumentInfo",
    "DocumentNotFound",
    "Embedder",
    "EmbedderMismatch",
    "ErasureReceipt",
    "Event",
    "EventNotFound",
    "ExtractionFailed",
    "Fact",
    "FactNotFound",
    "HashEmbedder",
    "Hit",
    "Hits",
    "IngestResult",
    "InvalidFilter",
    "InvalidInput",
    "InvalidPayload",
    "MiniLMEmbedder",
    "ModelNotAvailable",
    "Passage",
    "PermissionDenied",
    "PiiRedactor",
    "PoolAccessDenied",
    "PoolGrant",
    "Recency",
    "Redaction",
    "RedactionFailed",
    "Redactor",
    "RememberResult",
    "ReportItem",
    "Resolution",
    "RestoreReport",
    "RestoredContext",
    "RetentionPolicy",
    "SchemaTooNew",
    "SectionShare",
    "SentenceTransformerEmbedder",
    "Session",
    "SessionClosed",
    "SessionKeyTaken",
    "SessionManager",
    "SessionManagerError",
    "SessionNotFound",
    "Span",
    "StoreBusy",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreMisconfigured",
    "StoreReadOnly",
    "StoreUnavailable",
    "Summarizer",
    "TokenCounter",
    "__version__",
    "cache_usage",
    "set_cache_limit",
]
