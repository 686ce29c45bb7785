"""Prometheus metrics (metrics.py), read back from the exposition text a scrape would get:
operation latencies, restore sections and budget use, redactions, lock retries, backlog and
size; no label carries an agent, user or session id; nothing registered on import."""

from __future__ import annotations

import sqlite3
import subprocess
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.errors import InvalidInput, SessionNotFound
from memlane.metrics import Metrics

from .conftest import PYTHON, child_env

prometheus = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

Factory = Callable[..., SessionManager]


def _samples(registry: object) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = prometheus.generate_latest(registry).decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def _value(
    samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> float:
    return sum(v for found, v in samples.get(name, []) if labels.items() <= found.items())


def test_operations_restore_and_redactions_are_measured(make_manager: Factory) -> None:
    registry = prometheus.CollectorRegistry()
    metrics = Metrics(registry)
    mgr = make_manager("agent-secret-7", metrics=metrics, redactor="default", background=False)
    session = mgr.start_session("Help ann@example.org", user_id="user-secret-9")
    for i in range(5):
        mgr.add_message(session.id, "user", f"turn {i}: call +44 20 7946 0958")
    mgr.record_many(
        session.id, [{"kind": "fact", "content": "x"}, {"kind": "fact", "content": "y"}]
    )
    mgr.remember("user-secret-9", "Likes tea")
    mgr.ingest(text="# Guide\n\nRotate keys monthly.", name="guide.md")
    mgr.search("turn", k=3)
    context = mgr.restore(session.id, max_tokens=500, query="turn")
    mgr.summarize(session.id)
    with pytest.raises(SessionNotFound):
        mgr.search("x", session_id="nope")
    samples = _samples(registry)
    count = "memlane_operation_seconds_count"
    assert _value(samples, count, operation="record", outcome="ok") == 5
    assert _value(samples, count, operation="record_many") == 1
    for operation in ("remember", "ingest", "restore", "summarize"):
        assert _value(samples, count, operation=operation, outcome="ok") >= 1, operation
    assert _value(samples, count, operation="search", outcome="ok") >= 1
    assert _value(samples, count, operation="search", outcome="error") == 1
    assert _value(samples, count, backend="sqlite") > 0
    sections = {labels["section"] for labels, _ in samples["memlane_restore_section_tokens_count"]}
    assert {"goal", "recent"} <= sections
    assert _value(samples, "memlane_restore_section_tokens_sum", section="goal") > 0
    assert _value(samples, "memlane_restore_budget_used_ratio_count") == 1
    assert _value(samples, "memlane_restore_budget_used_ratio_sum") == pytest.approx(
        context.token_count / 500
    )
    assert _value(samples, "memlane_redactions_total", kind="PHONE") == 5
    assert _value(samples, "memlane_redactions_total", kind="EMAIL") == 1
    assert _value(samples, "memlane_embedding_backlog", backend="sqlite") > 0
    assert _value(samples, "memlane_store_bytes", backend="sqlite") > 0
    labels = {
        value for entries in samples.values() for found, _ in entries for value in found.values()
    }
    for secret in ("agent-secret-7", "user-secret-9", session.id):
        assert secret not in labels  # no label ever carries an id


def test_lock_retries_are_counted(
    make_manager: Factory, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's own busy handler waits first (5 s); the library retries after it gives up
    monkeypatch.setattr("memlane.store.sqlite.BUSY_TIMEOUT_MS", 20)
    registry = prometheus.CollectorRegistry()
    mgr = make_manager("a", metrics=Metrics(registry), background=False)
    session = mgr.start_session("work")
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another connection holds the write lock a moment
    timer = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    timer.start()
    mgr.record_fact(session.id, "waited for the lock")
    timer.join()
    holder.close()
    assert _value(_samples(registry), "memlane_store_lock_retries_total", backend="sqlite") >= 1


def test_nothing_is_registered_on_import_or_without_metrics() -> None:
    code = """
        import prometheus_client
        before = set(prometheus_client.REGISTRY._names_to_collectors)
        import memlane, memlane.metrics
        from memlane import SessionManager
        from memlane.testing import HashEmbedder
        SessionManager("a", ":memory:", embedder=HashEmbedder(), background=False).close()
        assert set(prometheus_client.REGISTRY._names_to_collectors) == before
        print("clean")
    """
    done = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code)], env=child_env(), capture_output=True, text=True
    )
    assert done.stdout.strip() == "clean", done.stderr


def test_metrics_need_a_registry(make_manager: Factory) -> None:
    with pytest.raises(InvalidInput, match="CollectorRegistry"):
        Metrics(object())
    with pytest.raises(InvalidInput, match="metrics must be"):
        make_manager("a", metrics="prometheus")


def test_two_managers_share_one_metrics(make_manager: Factory) -> None:
    registry = prometheus.CollectorRegistry()
    metrics = Metrics(registry)
    first = make_manager("a", metrics=metrics, background=False)
    second = make_manager("b", metrics=metrics, background=False)
    for mgr in (first, second):
        mgr.record_fact(mgr.start_session("work").id, "fact")
    samples = _samples(registry)
    assert _value(samples, "memlane_operation_seconds_count", operation="record") == 2
    # both attached to the same file: it is counted once (two goals, two facts wait)
    assert _value(samples, "memlane_embedding_backlog") == 4
