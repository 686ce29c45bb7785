"""The vector-index seam: every implementation of ``_seams.VectorIndex`` honours one contract.

SQLite's own (BLOBs + numpy), PostgreSQL's own (pgvector, exact and HNSW) and Chroma
(embedded) are driven through the same six operations, on stores filled by the real write
path (record, then the indexer's flush)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memlane import SessionManager
from memlane.core.scope import Scope, partition_of
from memlane.core.seams import EventFilter, VectorIndex
from memlane.testing import HashEmbedder

_schemas = itertools.count()

FACTS = [
    "orchids need indirect light",
    "cacti need little water",
    "ferns like humid air",
    "basil wants full sun",
    "mint spreads through runners",
]


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("chroma", marks=pytest.mark.chroma),
        pytest.param("pgvector", marks=pytest.mark.postgres),
        pytest.param("pgvector-hnsw", marks=pytest.mark.postgres),
    ]
)
def manager(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionManager]:
    options: dict[str, object] = {"db_path": tmp_path / "s.db"}
    if request.param == "chroma":
        options["index"] = f"chroma:///{tmp_path}/chroma"
    elif request.param.startswith("pgvector"):
        url = request.getfixturevalue("postgres_url")
        joiner = "&" if "?" in url else "?"
        schema = f"vectors_{next(_schemas)}"
        hnsw = "&vector_index=hnsw" if request.param.endswith("hnsw") else ""
        options = {"url": f"{url}{joiner}schema={schema}{hnsw}"}
    with SessionManager("a", embedder=HashEmbedder(), background=False, **options) as mgr:  # type: ignore[arg-type]
        yield mgr


def _search(index: VectorIndex, text: str, flt: EventFilter, partition: str) -> list[int]:
    query = np.asarray(HashEmbedder()([text])[0], dtype=np.float32)
    hits = index.search(query, flt, [(partition, False)], 3, list)
    return [hit.seq for hit in hits]


def test_every_vector_index_keeps_the_contract(manager: SessionManager) -> None:
    session = manager.start_session("a garden's needs")
    facts = [
        manager.record_fact(session.id, text, metadata={"plant": text.split()[0]}) for text in FACTS
    ]
    manager.flush()
    storage = manager._writer.storage
    index = storage.vectors
    partition = partition_of("a", None)
    scope = Scope("a")
    every = EventFilter(scope=scope)
    expected = {event.seq for event in manager.events(session.id)}
    assert index.count() == index.count(partition) == len(FACTS) + 1  # the goal too
    assert index.seqs(partition) == expected and len(expected) == len(FACTS) + 1
    assert index.count("no-such-partition") == 0 and index.seqs("no-such-partition") == set()

    # search: the event whose own vector is asked for comes first, filters hold
    cacti = facts[1]
    assert _search(index, FACTS[1], every, partition)[0] == cacti.seq
    goals = EventFilter(scope=scope, kinds=("goal",))
    assert set(_search(index, FACTS[1], goals, partition)) <= expected - {e.seq for e in facts}
    only_cacti = EventFilter(scope=scope, where={"plant": "cacti"})
    query = np.asarray(HashEmbedder()([FACTS[0]])[0], dtype=np.float32)
    narrowed = index.search(
        query, only_cacti, [(partition, False)], 3, lambda: storage.log.select_seqs(only_cacti)
    )
    assert only_cacti.needs_log and [hit.seq for hit in narrowed] == [cacti.seq]

    # delete: the vector goes, the others stay
    with storage.log.atomic() as tx:
        index.delete(tx if index.transactional else None, [cacti.seq])
    assert index.count(partition) == len(FACTS)
    assert cacti.seq not in index.seqs(partition)
    assert cacti.seq not in _search(index, FACTS[1], every, partition)

    # clear: nothing left to find; the audit against the log queues every event again
    index.clear(None)
    assert index.count() == 0 and _search(index, FACTS[0], every, partition) == []
    assert storage.audit() == len(FACTS) + 1
    manager.flush()  # upserts through the indexer again
    assert index.count(partition) == len(FACTS) + 1
    assert _search(index, FACTS[3], every, partition)[0] == facts[3].seq


def _essay(topic: str, planted: str) -> str:
    """A long message (~40 paragraphs about ``topic``) with ``planted`` in its 25th."""
    paragraphs = [
        f"Note {i} on {topic}: more detail about {topic} and its history." for i in range(40)
    ]
    paragraphs[24] = planted
    return "\n\n".join(paragraphs)


PLANTED = "The rollback password for the payments cluster is zebra-fountain-42."


def test_a_long_event_is_indexed_and_found_by_its_passages(manager: SessionManager) -> None:
    """A long event has one vector per passage; a search returns it once, scored by its best
    passage, and says which; deleting or clearing it removes every passage."""
    session = manager.start_session("passages")
    long = manager.add_message(session.id, "assistant", _essay("gardens", PLANTED))
    others = [manager.add_message(session.id, "user", _essay(t, f"{t} fact.")) for t in FACTS]
    manager.flush()
    storage = manager._writer.storage
    index = storage.vectors
    partition = partition_of("a", None)
    every = EventFilter(scope=Scope("a"))
    seqs = {long.seq, *(e.seq for e in others), manager.events(session.id)[0].seq}
    assert index.seqs(partition) == seqs
    assert index.count(partition) > 2 * len(seqs)  # (passages: several vectors per event)

    query = np.asarray(HashEmbedder()([PLANTED])[0], dtype=np.float32)
    matches = index.search(query, every, [(partition, False)], len(seqs), list)
    assert [m.seq for m in matches].count(long.seq) == 1  # each event once
    assert len({m.seq for m in matches}) == len(matches) == len(seqs)
    best = matches[0]
    assert best.seq == long.seq and best.stop > 0
    assert PLANTED in long.content[best.start : best.stop]
    assert [m.score for m in matches] == sorted((m.score for m in matches), reverse=True)

    # the public search says where: Hit.passage is the passage that matched
    hit = manager.search(PLANTED, k=3, mode="semantic", session_id=session.id)[0]
    assert hit.event.id == long.id and hit.passage is not None
    assert PLANTED in hit.passage.text
    assert hit.passage.text == long.content[hit.passage.start : hit.passage.stop]
    short = manager.add_message(session.id, "user", "thanks")
    hits = manager.search("thanks", k=10, mode="semantic", session_id=session.id)
    assert next(h for h in hits if h.event.id == short.id).passage is None

    # delete: every passage of the event goes, the others stay
    before = index.count(partition)
    with storage.log.atomic() as tx:
        index.delete(tx if index.transactional else None, [long.seq])
    assert long.seq not in index.seqs(partition)
    assert index.count(partition) < before - 2  # (the essay had 4 passages)
    assert long.seq not in [
        m.seq for m in index.search(query, every, [(partition, False)], 20, list)
    ]


def test_the_seams_keep_their_sides_apart() -> None:
    """store/ and index/ meet only in engine/storage.py: neither imports the other (the layer
    contract in pyproject.toml checks the same on every `make lint`)."""
    import ast

    root = Path(__file__).resolve().parents[1] / "src" / "memlane"
    for package, other in (("store", "index"), ("index", "store")):
        for module in (root / package).glob("*.py"):
            tree = ast.parse(module.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module:
                    name = "." * node.level + node.module
                    assert not name.lstrip(".").startswith(other), (module.name, name)


def test_a_search_reads_the_spans_of_passages_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache knows which rows are a long event's passages: a search whose hits are all
    short events reads no span from the store (60 rows by vid were ~2 ms of a hybrid search),
    one that finds a long event reads its passage's, and a partition read back from its
    snapshot file knows them too."""
    with SessionManager(
        "a", embedder=HashEmbedder(), background=False, db_path=tmp_path / "s.db"
    ) as mgr:
        session = mgr.start_session("spans")
        long = mgr.add_message(session.id, "assistant", _essay("gardens", PLANTED))
        for fact in FACTS:
            mgr.add_message(session.id, "user", fact)
        mgr.flush()
        vectors = mgr._writer.storage.vectors
        store = vectors._store  # type: ignore[attr-defined]
        asked: list[object] = []
        read = store.read

        def counted(sql: str, params: object = ()) -> object:
            if "part, start, stop FROM vectors WHERE vid" in sql:
                asked.append(params)
            return read(sql, params)

        monkeypatch.setattr(store, "read", counted)
        hits = mgr.search(FACTS[1], k=1, mode="semantic", session_id=session.id)
        assert hits[0].event.content == FACTS[1] and hits[0].passage is None
        assert asked == []
        hit = mgr.search(PLANTED, k=1, mode="semantic", session_id=session.id)[0]
        assert hit.event.id == long.id and hit.passage is not None and PLANTED in hit.passage.text
        assert len(asked) == 1
        # the flag survives a snapshot: the partition saved, dropped and read back
        cache = vectors._cache  # type: ignore[attr-defined]
        name = partition_of("a", None)
        cache._keep_on_disk(name, cache._partitions.pop(name))
        loaded: list[object] = []
        from_snapshot = cache._from_snapshot

        def spied(partition: str) -> object:
            loaded.append(from_snapshot(partition))
            return loaded[-1]

        monkeypatch.setattr(cache, "_from_snapshot", spied)
        again = mgr.search(PLANTED, k=1, mode="semantic", session_id=session.id)[0]
        assert len(loaded) == 1 and loaded[0] is not None  # (from the file, not the log)
        assert again.passage == hit.passage and len(asked) == 2
        assert cache._partitions[name].passages.any()
        assert mgr.search(FACTS[1], k=1, mode="semantic", session_id=session.id)[0].passage is None
        assert len(asked) == 2
