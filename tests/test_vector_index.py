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
    return [seq for seq, _ in hits]


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
    assert only_cacti.needs_log and [seq for seq, _ in narrowed] == [cacti.seq]

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
