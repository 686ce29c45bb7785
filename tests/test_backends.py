"""Backend selection, and what only the server backends do: PostgreSQL's migrations under an
advisory lock, its outbox shared by many writer processes without double work, HNSW."""

from __future__ import annotations

import itertools
import json
import subprocess
import textwrap
from collections import Counter
from pathlib import Path
from typing import ClassVar

import pytest

from memlane import InvalidInput, SchemaTooNew, SessionManager
from memlane.admin import StoreAdmin
from memlane.engine.storage import open_storage
from memlane.store import open_store, redact, sqlite_path
from memlane.store._pg_migrations import MIGRATIONS as PG_MIGRATION_STEPS
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env

_schemas = itertools.count()

PG_MIGRATIONS = [name for name, _ in PG_MIGRATION_STEPS]


def schema_url(url: str, name: str | None = None, **options: str) -> str:
    query = {"schema": name or f"backends_{next(_schemas)}", **options}
    joiner = "&" if "?" in url else "?"
    return url + joiner + "&".join(f"{key}={value}" for key, value in query.items())


# -- the URL scheme ------------------------------------------------------------------------


def test_sqlite_urls_and_paths(tmp_path: Path) -> None:
    assert sqlite_path("sessions.db") == "sessions.db"
    assert sqlite_path("sqlite:///rel/s.db") == "rel/s.db"
    assert sqlite_path(f"sqlite:///{tmp_path}/s.db") == f"{tmp_path}/s.db"
    assert sqlite_path("postgresql://h/db") is None
    with pytest.raises(InvalidInput, match="names no file"):
        sqlite_path("sqlite://")
    with SessionManager("a", url=f"sqlite:///{tmp_path}/s.db", embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("same file either way")
        assert mgr.db_path == f"{tmp_path}/s.db"
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        assert mgr.get_session(session.id).goal == "same file either way"


def test_bad_urls_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="Unknown store URL"):
        open_store("mysql://me:pw@h/db")
    with pytest.raises(InvalidInput, match="Unknown index"):
        open_storage(tmp_path / "s.db", index="faiss")
    with pytest.raises(InvalidInput, match="names no folder"):
        open_storage(tmp_path / "s.db", index="chroma://")
    with pytest.raises(InvalidInput, match="either db_path or url"):
        SessionManager("a", tmp_path / "s.db", url="sqlite:///x.db")
    assert redact("postgresql://me:secret@h/db") == "postgresql://me:***@h/db"


# -- PostgreSQL ----------------------------------------------------------------------------


@pytest.mark.postgres
def test_postgres_migrations_are_recorded_and_guarded(postgres_url: str) -> None:
    url = schema_url(postgres_url)
    with StoreAdmin(url=url, embedder=HashEmbedder()) as admin:
        assert admin.stats().migrations == PG_MIGRATIONS
        assert "secret" not in repr(admin)
        with admin.store.atomic() as tx:  # type: ignore[attr-defined]
            tx.execute("INSERT INTO migrations (name, applied_us) VALUES ('9999_future', 0)")
    with pytest.raises(SchemaTooNew, match="9999_future"):
        SessionManager("a", url=url, embedder=HashEmbedder())
    with pytest.raises(InvalidInput, match="schema="):
        SessionManager("a", url=schema_url(postgres_url, "Bad-Name"), embedder=HashEmbedder())


OPENER = """
    import sys
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    with SessionManager(sys.argv[2], url=sys.argv[1], embedder=HashEmbedder()) as mgr:
        mgr.record_fact(mgr.start_session("opened at once").id, "hello")
    print("ok")
"""


@pytest.mark.postgres
@pytest.mark.slow
def test_many_processes_open_a_new_store_at_once(postgres_url: str) -> None:
    """Migrations run under an advisory lock: concurrent first opens never collide."""
    url = schema_url(postgres_url)
    children = [
        subprocess.Popen(
            [PYTHON, "-c", textwrap.dedent(OPENER), url, f"agent-{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for n in range(4)
    ]
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert out.strip() == "ok"
    with StoreAdmin(url=url, embedder=HashEmbedder()) as admin:
        stats = admin.stats()
    assert stats.migrations == PG_MIGRATIONS and stats.events == 8


WRITER = """
    import json, sys
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    class Counting(HashEmbedder):
        # same name and vectors as HashEmbedder; remembers every text it embedded
        seen: list = []

        def __call__(self, texts):
            self.seen.extend(texts)
            return super().__call__(texts)

    url, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    embedder = Counting()
    with SessionManager("writer-" + worker, url=url, embedder=embedder, batch_size=32) as mgr:
        session = mgr.start_session(f"writer {worker} goal")
        for i in range(count):
            mgr.record_fact(session.id, f"writer {worker} fact {i}")
    print(json.dumps(embedder.seen))
"""


@pytest.mark.postgres
@pytest.mark.slow
def test_eight_writers_share_the_outbox_without_double_work(postgres_url: str) -> None:
    """8 processes x 500 records, each with its background worker draining the shared outbox
    (FOR UPDATE SKIP LOCKED): every event is stored, every event is embedded, and no event is
    embedded twice (each process lists the texts its embedder saw)."""
    url = schema_url(postgres_url, pool_size="2")
    SessionManager("setup", url=url, embedder=HashEmbedder()).close()
    children = [
        subprocess.Popen(
            [PYTHON, "-c", textwrap.dedent(WRITER), url, str(n), "500"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for n in range(8)
    ]
    embedded: Counter[str] = Counter()
    workers_that_embedded = 0
    warnings = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        warnings += [line for line in err.splitlines() if line.strip()]
        texts = json.loads(out)
        workers_that_embedded += bool(texts)
        embedded.update(texts)

    class Counting(HashEmbedder):
        seen: ClassVar[list[str]] = []

        def __call__(self, texts):  # type: ignore[no-untyped-def]
            self.seen.extend(texts)
            return super().__call__(texts)

    with SessionManager("writer-0", url=url, embedder=Counting()) as mgr:
        mgr.flush()  # whatever the writers left when they closed
        embedded.update(Counting.seen)
        assert mgr.pending_embeddings() == 0
    with StoreAdmin(url=url, embedder=HashEmbedder()) as admin:
        stats = admin.stats()
    assert stats.events_by_agent == {f"writer-{n}": {"fact": 500, "goal": 1} for n in range(8)}
    assert stats.events == 4008 and stats.vectors == 4008
    expected = {f"writer {n} fact {i}" for n in range(8) for i in range(500)}
    expected |= {f"writer {n} goal" for n in range(8)}
    assert set(embedded) == expected  # embeddings complete
    assert max(embedded.values()) == 1, (embedded.most_common(3), warnings[:5])  # no double work
    assert workers_that_embedded >= 2  # the work really was shared


@pytest.mark.postgres
def test_hnsw_plan_still_returns_k_filtered(postgres_url: str) -> None:
    url = schema_url(postgres_url, vector_index="hnsw")
    with SessionManager("a", url=url, embedder=HashEmbedder(), background=False) as mgr:
        assert not mgr.capabilities.exact_vectors
        session = mgr.start_session("hnsw")
        for i in range(300):
            mgr.record_fact(
                session.id, f"note {i} on topic {i % 9}", metadata={"rare": i % 50 == 0}
            )
        hits = mgr.search("note on topic 4", k=6, mode="semantic", where={"rare": True})
        assert len(hits) == 6 and all(hit.event.metadata["rare"] for hit in hits)
        assert len(mgr.search("note on topic 4", k=40, mode="semantic")) == 40


@pytest.mark.chroma
def test_chroma_filters_a_large_where_after_the_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `_IN_LIMIT` admitted events, Chroma is asked for more neighbours and the `where`
    is applied here: still k results, all of them matching."""
    from memlane.index import chroma

    monkeypatch.setattr(chroma, "_IN_LIMIT", 5)
    index = f"chroma:///{tmp_path}/vectors"
    with SessionManager(
        "a", tmp_path / "s.db", index=index, embedder=HashEmbedder(), background=False
    ) as mgr:
        session = mgr.start_session("widgets")
        for i in range(120):
            mgr.record_fact(session.id, f"widget note {i}", metadata={"odd": i % 2 == 1})
        hits = mgr.search("widget note", k=30, mode="semantic", where={"odd": True})
        assert len(hits) == 30 and all(hit.event.metadata["odd"] for hit in hits)
        hits = mgr.search("widget note 7", k=5, mode="semantic", where={"odd": False})
        assert len(hits) == 5 and not any(hit.event.metadata["odd"] for hit in hits)


def _folder_locked(folder: Path) -> bool:
    """Whether some open file holds the embedded Chroma folder's lock (chroma.py's
    _FolderLock): another process's attempt would get StoreBusy."""
    import fcntl

    with open(folder / ".asm-lock", "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


@pytest.mark.chroma
def test_embedded_chroma_lock_is_shared_within_a_process(tmp_path: Path) -> None:
    """Two managers of one process share the folder's lock (the second opens, where another
    process would get StoreBusy); closing one keeps it for the other, which still writes and
    finds its vectors; closing the last releases it. (It asserted nothing before issue 29.)"""
    folder = tmp_path / "vectors"
    index = f"chroma:///{folder}"
    first = SessionManager("a", tmp_path / "s.db", index=index, embedder=HashEmbedder())
    second = SessionManager("b", tmp_path / "s.db", index=index, embedder=HashEmbedder())
    assert _folder_locked(folder)
    second.close()
    assert _folder_locked(folder)  # still held for the first
    fact = first.record_fact(first.start_session("still open").id, "after the other closed")
    first.flush()
    hits = first.search("after the other closed", k=1, mode="semantic")
    assert [hit.event.id for hit in hits] == [fact.id]
    first.close()
    assert not _folder_locked(folder)


@pytest.mark.postgres
def test_cli_on_a_postgres_url(postgres_url: str) -> None:
    from click.testing import CliRunner

    from memlane.cli import cli

    url = schema_url(postgres_url)
    with SessionManager("researcher", url=url, embedder=HashEmbedder()) as mgr:
        mgr.record_fact(mgr.start_session("cli over postgres").id, "pg is reachable")
    runner = CliRunner()
    env = {"MEMLANE_EMBEDDER": "hash"}
    result = runner.invoke(cli, ["--db", url, "sessions", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert [row["goal"] for row in json.loads(result.output)] == ["cli over postgres"]
    result = runner.invoke(cli, ["--db", url, "search", "reachable", "--json"], env=env)
    assert result.exit_code == 0 and "pg is reachable" in result.output
    result = runner.invoke(cli, ["--db", url, "stats", "--json"], env=env)
    assert json.loads(result.output)["events"] == 2


@pytest.mark.chroma
def test_chroma_short_filtered_answer_is_completed_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If Chroma's filtered HNSW returns fewer rows than match, the matching rows are ranked
    exactly (forced here by making every Chroma answer short)."""
    from memlane.index import chroma

    real = chroma.ChromaIndex._query

    def short(collection: object, query: object, where: object, n: int) -> object:
        return real(collection, query, where, n)[:1]  # type: ignore[arg-type]

    monkeypatch.setattr(chroma.ChromaIndex, "_query", staticmethod(short))
    index = f"chroma:///{tmp_path}/vectors"
    with SessionManager(
        "a", tmp_path / "s.db", index=index, embedder=HashEmbedder(), background=False
    ) as mgr:
        session = mgr.start_session("widgets")
        for i in range(40):
            mgr.record(session.id, "decision" if i % 4 == 0 else "fact", f"widget note {i}")
        hits = mgr.search("widget note 8", k=7, mode="semantic", kinds=["decision"])
        assert len(hits) == 7 and {hit.event.kind for hit in hits} == {"decision"}
        assert hits[0].event.content == "widget note 8"
        assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
