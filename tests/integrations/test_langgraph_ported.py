"""LangGraph's own store tests (libs/checkpoint/tests/test_store.py), ported: each case runs on
SessionStore and, as a check that the port is faithful, on LangGraph's InMemoryStore.

Not ported: the AsyncBatchedBaseStore cases (they test LangGraph's batching wrapper, not a
store) and the concurrent put/delete/put race (its final state depends on the order a store
applies concurrent writes in; SessionStore applies each call as it comes)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.testing import HashEmbedder

from .conftest import framework

framework("langgraph.store.base", "langgraph")

from langgraph.store.base import BaseStore, InvalidNamespaceError, PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memlane.integrations.langgraph import SessionStore  # noqa: E402

_dbs = itertools.count()
_EMBED = HashEmbedder()


@pytest.fixture(params=["SessionStore", "InMemoryStore"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], BaseStore]]:
    """A factory of empty stores of one kind, searchable over the value's ``text``."""
    managers: list[SessionManager] = []

    def made() -> BaseStore:
        if request.param == "InMemoryStore":
            return InMemoryStore(
                index={
                    "dims": _EMBED.dim,
                    "embed": lambda texts: _EMBED(texts).tolist(),
                    "fields": ["text"],
                }
            )
        db = tmp_path / f"s{next(_dbs)}.db"
        managers.append(SessionManager("agent", db, embedder=HashEmbedder(), background=False))
        return SessionStore(managers[-1], index={"fields": ["text"]})

    yield made
    for manager in managers:
        manager.close()


def _fill(store: BaseStore, namespaces: list[tuple[str, ...]]) -> None:
    for i, ns in enumerate(namespaces):
        store.put(namespace=ns, key=f"id_{i}", value={"data": f"value_{i:02d}"})


def test_list_namespaces_basic(make: Callable[[], BaseStore]) -> None:
    store = make()
    _fill(
        store,
        [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
            ("users", "123"),
            ("users", "456", "settings"),
            ("admin", "users", "789"),
        ],
    )
    assert sorted(store.list_namespaces(prefix=("a", "b"))) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert sorted(store.list_namespaces(suffix=("f",))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert sorted(store.list_namespaces(prefix=("a",), suffix=("f",))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert sorted(store.list_namespaces(prefix=("a", "b"), max_depth=3)) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert sorted(store.list_namespaces(prefix=("a", "*", "f"))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert sorted(store.list_namespaces(suffix=("*", "f"))) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def test_list_namespaces_with_wildcards(make: Callable[[], BaseStore]) -> None:
    store = make()
    _fill(
        store,
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ],
    )
    assert sorted(store.list_namespaces(prefix=("users", "*"))) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    store.put(("admin", "users", "settings", "789"), "foo", {"data": "some_val"})
    assert store.list_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


def test_list_namespaces_pagination_depth_and_empty(make: Callable[[], BaseStore]) -> None:
    assert make().list_namespaces() == []
    store = make()
    for i in range(20):
        store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": f"value_{i:02d}"})
    for offset in (0, 5, 15):
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)
        ]
    deep = make()
    _fill(
        deep,
        [
            ("a", "b", "c", "d"),
            ("a", "b", "c", "e"),
            ("a", "b", "f"),
            ("a", "g"),
            ("h", "i", "j", "k"),
        ],
    )
    assert sorted(deep.list_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"), ("h", "i")]
    flat = make()
    _fill(flat, [("a", "b"), ("c", "d"), ("e", "f", "g")])
    assert sorted(flat.list_namespaces()) == [("a", "b"), ("c", "d"), ("e", "f", "g")]


def test_cannot_put_empty_namespace(make: Callable[[], BaseStore]) -> None:
    async def scenario(store: BaseStore) -> None:
        doc = {"foo": "bar"}
        for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(bad, "foo", doc)
            with pytest.raises(InvalidNamespaceError):
                await store.aput(bad, "foo", doc)
        inner = ("foo", "langgraph", "foo")
        await store.aput(inner, "bar", doc)
        assert (await store.aget(inner, "bar")).value == doc  # type: ignore[union-attr]
        assert (await store.asearch(inner))[0].value == doc
        await store.adelete(inner, "bar")
        assert await store.aget(inner, "bar") is None
        # past the public put API, a "langgraph" root is accepted (only labels are checked)
        await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
        assert (await store.aget(("langgraph", "foo"), "bar")).value == doc  # type: ignore[union-attr]
        store.delete(("langgraph", "foo"), "bar")
        assert store.get(("langgraph", "foo"), "bar") is None

    asyncio.run(scenario(make()))


def test_vector_update_with_embedding(make: Callable[[], BaseStore]) -> None:
    store = make()
    store.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    store.put(("test",), "doc2", {"text": "something about dogs"})
    store.put(("test",), "doc3", {"text": "text about birds"})
    first = store.search(("test",), query="zany zebra Xerxes")
    assert first[0].key == "doc1"
    store.put(("test",), "doc1", {"text": "new text about dogs"})
    after = store.search(("test",), query="zany zebra Xerxes")
    score_after = next((r.score for r in after if r.key == "doc1"), 0.0) or 0.0
    assert score_after < (first[0].score or 0.0)
    store.put(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    ranked = store.search(("test",), query="new text about dogs", limit=3)
    assert not any(r.key == "doc4" for r in ranked)


def test_vector_search_with_filters(make: Callable[[], BaseStore]) -> None:
    store = make()
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        store.put(("test",), key, value)
    red_apple = store.search(("test",), query="red apple", filter={"color": "red"})
    assert len(red_apple) == 2 and red_apple[0].key == "doc1"
    red_car = store.search(("test",), query="red car", filter={"color": "red"})
    assert len(red_car) == 2 and red_car[0].key == "doc2"
    # the ranking of a query that means nothing is the store's own: membership only
    assert {
        r.key for r in store.search(("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}})
    } == {
        "doc1",
        "doc3",
        "doc4",
    }
    both = store.search(("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in both] == ["doc3"]


def test_vector_search_pagination_and_edge_cases(make: Callable[[], BaseStore]) -> None:
    store = make()
    for i in range(5):
        store.put(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = store.search(("test",), query="test", limit=2)
    page2 = store.search(("test",), query="test", limit=2, offset=2)
    assert len(page1) == len(page2) == 2 and {r.key for r in page1}.isdisjoint(r.key for r in page2)
    assert len(store.search(("test",), query="test", limit=10)) == 5
    one = make()
    one.put(("test",), "doc1", {"text": "test document"})
    for query in ("", None, "test " * 100, "test!@#$%^&*()"):
        assert len(one.search(("test",), query=query)) == 1, query


def test_concurrent_async_writes_and_searches(make: Callable[[], BaseStore]) -> None:
    """The spirit of LangGraph's concurrent case without its race: 50 concurrent aputs of
    distinct keys, then concurrent filtered searches, each result honouring its filter."""
    store = make()
    colors, items = ["red", "blue", "green", "yellow", "purple"], ["apple", "car", "house"]

    async def scenario() -> list[list[Any]]:
        await asyncio.gather(
            *[
                store.aput(
                    ("test",),
                    f"doc{i}",
                    {"text": f"{colors[i % 5]} {items[i % 3]}", "color": colors[i % 5], "index": i},
                )
                for i in range(50)
            ]
        )
        return await asyncio.gather(
            store.asearch(("test",), query="apple", filter={"color": "red"}, limit=50),
            store.asearch(("test",), query="house", filter={"index": {"$gt": 25}}, limit=50),
        )

    reds, late = asyncio.run(scenario())
    assert reds and all(r.value["color"] == "red" for r in reds) and len(reds) == 10
    assert late and all(r.value["index"] > 25 for r in late) and len(late) == 24
