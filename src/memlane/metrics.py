"""Prometheus metrics, opt in: ``SessionManager(..., metrics=Metrics(registry))`` (the
``[prometheus]`` extra). Nothing is registered on import, nor anywhere but the registry you
pass; several managers may share one :class:`Metrics`.

- ``memlane_operation_seconds`` (histogram): ``operation`` (record, record_many, search, restore,
  remember, summarize, ingest, erase_user), ``backend``, ``outcome`` (ok / error);
- ``memlane_restore_section_tokens`` (histogram): ``section`` (goal, pending, user, reference,
  recent, relevant, ...);
- ``memlane_restore_budget_used_ratio`` (histogram): tokens restored ÷ ``max_tokens``;
- ``memlane_redactions_total`` (counter): ``kind`` (EMAIL, CARD, ...);
- ``memlane_store_lock_retries_total`` (counter): ``backend`` (SQLite's busy retries);
- ``memlane_extraction_batches_total`` (counter): ``extractor`` (its name: "rules", "llm",
  ...), ``outcome`` (ok / failed); ``memlane_extraction_batch_tokens`` (histogram):
  ``extractor``, the tokens an extractor reported per batch (``SessionManager(extractor=)``);
- ``memlane_embedding_backlog``, ``memlane_store_bytes`` (gauges): ``backend``, read from the stores
  when Prometheus scrapes.

No label ever carries an agent id, a user id, a session id or text: labels are operation
names, backend names, section names, redaction kinds and extractor names, a small fixed set.
The gauges sum the distinct stores of the managers attached (several managers on one store
count it once).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import InvalidInput

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip
_TOKEN_BUCKETS = (0, 50, 100, 250, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000)
_RATIO_BUCKETS = (0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0)


class Metrics:
    """The library's metrics in ``registry`` (a ``prometheus_client.CollectorRegistry``)."""

    def __init__(self, registry: Any, *, namespace: str = "memlane") -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError:
            raise InvalidInput(
                "Metrics need their extra (prometheus_client is missing): pip install "
                "'memlane[prometheus]'."
            ) from None
        if not isinstance(registry, CollectorRegistry):
            raise InvalidInput(
                "Metrics take the prometheus_client CollectorRegistry to register in, got "
                f"{type(registry).__name__}; nothing is registered globally."
            )
        self.registry = registry
        self.operation_seconds = Histogram(
            f"{namespace}_operation_seconds",
            "Latency of the library's operations.",
            ["operation", "backend", "outcome"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.restore_section_tokens = Histogram(
            f"{namespace}_restore_section_tokens",
            "Tokens each restore section used.",
            ["section"],
            buckets=_TOKEN_BUCKETS,
            registry=registry,
        )
        self.restore_budget_used = Histogram(
            f"{namespace}_restore_budget_used_ratio",
            "Tokens restored as a share of max_tokens.",
            buckets=_RATIO_BUCKETS,
            registry=registry,
        )
        self.redactions = Counter(
            f"{namespace}_redactions_total",
            "Distinct values the redactor replaced, by kind.",
            ["kind"],
            registry=registry,
        )
        self.lock_retries = Counter(
            f"{namespace}_store_lock_retries_total",
            "Retries of a store operation that found the database locked.",
            ["backend"],
            registry=registry,
        )
        self.extraction_batches = Counter(
            f"{namespace}_extraction_batches",
            "Batches of messages the extraction stage ran, by extractor and outcome.",
            ["extractor", "outcome"],
            registry=registry,
        )
        self.extraction_tokens = Histogram(
            f"{namespace}_extraction_batch_tokens",
            "Tokens an extractor reported per batch (an LLM's usage; 0 for the rules).",
            ["extractor"],
            buckets=_TOKEN_BUCKETS,
            registry=registry,
        )
        #: the attached stores: their backend and what tells one store from another
        self._stores: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        registry.register(_StoreGauges(self, namespace))

    def attach(self, store: Any, backend: str, identity: str) -> None:
        """Count ``store``'s lock retries and read its gauges at scrape time; ``identity``
        names the store (managers on one store count it once)."""
        with self._lock:
            self._stores[store] = (backend, identity)
        hooks = getattr(store, "on_busy", None)
        count = self.lock_retries.labels(backend).inc
        if hooks is not None and count not in hooks:  # (managers sharing one store's engine)
            hooks.append(count)

    def observe(self, operation: str, backend: str, seconds: float, ok: bool) -> None:
        self.operation_seconds.labels(operation, backend, "ok" if ok else "error").observe(seconds)

    def restored(self, sections: Mapping[str, int], used: int, budget: int) -> None:
        for section, tokens in sections.items():
            self.restore_section_tokens.labels(section).observe(tokens)
        if budget > 0:
            self.restore_budget_used.observe(min(1.0, used / budget))

    def redacted(self, counts: Mapping[str, int]) -> None:
        for kind, count in counts.items():
            self.redactions.labels(kind).inc(count)

    def extracted(self, extractor: str, ok: bool, tokens: int) -> None:
        """One batch of the extraction stage: its outcome and the tokens it cost."""
        self.extraction_batches.labels(extractor, "ok" if ok else "failed").inc()
        self.extraction_tokens.labels(extractor).observe(tokens)

    def stores(self) -> list[tuple[Any, str]]:
        """One open store per identity, with its backend."""
        with self._lock:
            attached = list(self._stores.items())
        distinct: dict[str, tuple[Any, str]] = {}
        for store, (backend, identity) in attached:
            distinct.setdefault(identity, (store, backend))
        return list(distinct.values())


class _StoreGauges:
    """The backlog and size gauges, read from the attached stores when Prometheus scrapes."""

    def __init__(self, metrics: Metrics, namespace: str) -> None:
        self._metrics = weakref.ref(metrics)
        self._namespace = namespace

    def describe(self) -> list[Any]:
        return []  # (no samples at registration: the stores are read at scrape time)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        backlog = GaugeMetricFamily(
            f"{self._namespace}_embedding_backlog",
            "Events waiting for their embedding.",
            labels=["backend"],
        )
        size = GaugeMetricFamily(
            f"{self._namespace}_store_bytes", "Bytes the store holds.", labels=["backend"]
        )
        metrics = self._metrics()
        totals: dict[str, list[int]] = {}
        for store, backend in [] if metrics is None else metrics.stores():
            try:
                pending, stored = store.pending_count(), store.footprint()[0]
            except Exception:  # a closed or unreachable store: no sample, not a failed scrape
                continue
            total = totals.setdefault(backend, [0, 0])
            total[0] += pending
            total[1] += stored
        for backend, (pending, stored) in sorted(totals.items()):
            backlog.add_metric([backend], pending)
            size.add_metric([backend], stored)
        yield backlog
        yield size
