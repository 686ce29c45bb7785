"""SessionStore against LangGraph itself: the same operations give the same results as
LangGraph's own InMemoryStore (scores and timestamps aside), LangGraph's store behaviours
ported as cases, and a compiled StateGraph using it from sync and async nodes."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import PermissionDenied, SessionManager
from memlane.events import Hits
from memlane.testing import HashEmbedder

from ..event_loop import LoopReport, watch_loop
from .conftest import framework

framework("langgraph.store.base", "langgraph")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from memlane.integrations.langgraph import SessionStore  # noqa: E402

_runs = itertools.count()


def _store(tmp_path: Path, **options: Any) -> SessionStore:
    db = tmp_path / f"s{next(_runs)}.db"
    manager = SessionManager("agent", db, embedder=HashEmbedder(), background=False)
    return SessionStore(manager, **options)


# -- differential: the same operations on both stores ------------------------------------------

LABELS = st.sampled_from(["a", "b", "c"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)
KEYS = st.sampled_from(["k1", "k2", "k3"])
SCALARS = st.one_of(st.integers(-3, 3), st.sampled_from(["x", "y"]), st.booleans())
VALUES = st.dictionaries(
    st.sampled_from(["n", "s", "t"]),
    st.one_of(SCALARS, st.dictionaries(st.sampled_from(["u"]), SCALARS, max_size=1)),
    max_size=3,
)
FILTERS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["n", "s"]), SCALARS, min_size=1, max_size=1),
    st.builds(lambda v: {"s": {"$ne": v}}, st.sampled_from(["x", "y"])),
    st.builds(lambda v: {"t": {"$eq": v}}, SCALARS),
)
OPS = st.lists(
    st.one_of(
        st.builds(lambda ns, key, value: PutOp(ns, key, value), NAMESPACES, KEYS, VALUES),
        st.builds(lambda ns, key: PutOp(ns, key, None), NAMESPACES, KEYS),  # a delete
        st.builds(lambda ns, key: GetOp(ns, key), NAMESPACES, KEYS),
        st.builds(
            lambda prefix, flt: SearchOp(prefix, flt, limit=100),
            st.lists(LABELS, max_size=2).map(tuple),
            FILTERS,
        ),
        st.builds(
            lambda kind, path, depth: ListNamespacesOp(
                (MatchCondition(kind, path),) if path else None, max_depth=depth
            ),
            st.sampled_from(["prefix", "suffix"]),
            st.lists(st.one_of(LABELS, st.just("*")), max_size=2).map(tuple),
            st.one_of(st.none(), st.integers(1, 2)),
        ),
    ),
    max_size=25,
)


def _comparable(result: Any) -> Any:
    """What must agree: values, keys, namespaces and membership (not order, scores, times)."""
    if result is None:
        return None
    if isinstance(result, list):
        if result and isinstance(result[0], tuple):
            return result
        return sorted(
            (item.namespace, item.key, json.dumps(item.value, sort_keys=True)) for item in result
        )
    return (result.namespace, result.key, result.value)


def _namespaces_with_items(reference: InMemoryStore, op: ListNamespacesOp) -> Any:
    """LangGraph's answer over the namespaces that hold items (its in-memory store also lists
    namespaces emptied by deletes or only read; its PostgreSQL store, like ours, does not)."""
    fresh = InMemoryStore()
    for item in reference.search((), limit=10_000):
        fresh.put(item.namespace, item.key, item.value)
    return fresh.batch([op])[0]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_same_operations_same_results_as_langgraphs_store(tmp_path: Path, ops: list[Any]) -> None:
    ours, reference = _store(tmp_path), InMemoryStore()
    for op in ops:
        expected = (
            _namespaces_with_items(reference, op)
            if isinstance(op, ListNamespacesOp)
            else reference.batch([op])[0]
        )
        assert _comparable(ours.batch([op])[0]) == _comparable(expected), op
    ours.manager.close()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(
        st.tuples(NAMESPACES, KEYS, st.sampled_from(["red fox", "blue whale", "grey owl"])),
        max_size=8,
    ),
    flt=st.one_of(st.none(), st.just({"kind": "animal"})),
)
def test_query_searches_find_the_same_items(
    tmp_path: Path, items: list[tuple[tuple[str, ...], str, str]], flt: Any
) -> None:
    """With a query, both stores rank differently (ours is hybrid) but find the same items
    when the page holds every match — including an item put with index=False."""
    embed = HashEmbedder()
    reference = InMemoryStore(
        index={"dims": embed.dim, "embed": lambda texts: embed(texts).tolist(), "fields": ["text"]}
    )
    ours = _store(tmp_path, index={"fields": ["text"]})
    for store in (ours, reference):
        for namespace, key, text in items:
            store.put(namespace, key, {"text": text, "kind": "animal"})
        store.put(("z",), "hidden", {"text": "red fox", "kind": "animal"}, index=False)
    for prefix in ((), ("a",), ("z",)):
        got = ours.search(prefix, query="red fox", filter=flt, limit=50)
        want = reference.search(prefix, query="red fox", filter=flt, limit=50)
        assert _comparable(got) == _comparable(want)
        assert all(item.score is not None for item in got if item.key != "hidden")
    ours.manager.close()


def test_an_item_the_search_could_not_rank_is_still_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a loaded machine met (an example's second process lost the first one's memory):
    the item waits for its vector, the search's bounded catch-up does not reach it, and its
    words do not match the query. The page must still hold it, as LangGraph's own stores
    list items without a vector after the ranked ones."""
    store = _store(tmp_path, index={"fields": ["text"]})
    store.put(("memories", "u1"), "diet", {"text": "I'm vegetarian and I live in Porto."})
    manager = store.manager
    assert manager.events(None)[0].indexed  # an item to embed, not one put with index=False

    def ranked_before_the_embedding(*args: Any, **kwargs: Any) -> Hits:
        return Hits([], waiting=1)  # what the search gives while the item has no vector

    monkeypatch.setattr(manager, "search", ranked_before_the_embedding)
    found = store.search(("memories", "u1"), query="Suggest a restaurant for tonight.")
    assert [item.value["text"] for item in found] == ["I'm vegetarian and I live in Porto."]
    manager.close()


# -- LangGraph's store behaviours, ported -------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    made = _store(tmp_path)
    yield made
    made.manager.close()


def test_batch_reads_see_the_state_before_its_writes(store: SessionStore) -> None:
    ns = ("test", "batch")
    store.put(ns, "k", {"v": 1})
    results = store.batch(
        [
            GetOp(ns, "k"),
            PutOp(ns, "k", {"v": 2}),
            GetOp(ns, "k"),  # still the old value: puts apply after the batch's reads
            PutOp(ns, "k", {"v": 3}),  # of two puts to one item, the last wins
            SearchOp(ns),
        ]
    )
    assert results[0].value == {"v": 1} and results[2].value == {"v": 1}
    assert [item.value for item in results[4]] == [{"v": 1}]
    assert store.get(ns, "k").value == {"v": 3}


def test_put_is_an_upsert_and_delete_removes(store: SessionStore) -> None:
    ns = ("docs",)
    store.put(ns, "d1", {"title": "first"})
    store.put(ns, "d1", {"title": "second"})
    assert store.get(ns, "d1").value == {"title": "second"}
    assert len(store.search(ns)) == 1
    events = store.manager.events(None, kinds="langgraph:item")
    assert len(events) == 1  # one current value, never two
    store.delete(ns, "d1")
    assert store.get(ns, "d1") is None and store.search(ns) == []
    store.delete(("never", "used"), "x")  # deleting what is not there is fine


def test_search_filters_and_pages(store: SessionStore) -> None:
    for i in range(6):
        store.put(("docs", "u1"), f"d{i}", {"score": i, "status": "active" if i % 2 else "old"})
    found = store.search(("docs",), filter={"score": {"$gte": 2}, "status": "active"})
    assert sorted(item.value["score"] for item in found) == [3, 5]
    pages = [store.search(("docs",), limit=2, offset=o) for o in (0, 2, 4, 6)]
    keys = [item.key for page in pages for item in page]
    assert sorted(keys) == [f"d{i}" for i in range(6)] and pages[3] == []
    assert keys[0] == "d5"  # most recently updated first
    with pytest.raises(ValueError, match="not both numbers"):
        store.search(("docs",), filter={"status": {"$gt": 1}})


def test_list_namespaces_conditions_depth_and_pages(store: SessionStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f", "b", "c")]:
        store.put(ns, "k", {"x": 1})
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("f", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("f", "b", "c"),
    ]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("f", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]


def test_bad_namespaces_ttl_and_embed_are_refused(store: SessionStore, tmp_path: Path) -> None:
    for bad in [(), ("a.b",), ("",), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})
    with pytest.raises(NotImplementedError):
        store.put(("a",), "k", {"v": 1}, ttl=5)
    with pytest.raises(ValueError, match="supports_ttl"):
        store.batch([PutOp(("a",), "k", {"v": 1}, ttl=5.0)])
    with pytest.raises(ValueError, match="embedder"):
        _store(tmp_path, index={"dims": 3, "embed": lambda texts: [[0.0] * 3 for _ in texts]})
    assert store.search(()) == []  # nothing was written


def test_namespaces_in_a_pool_are_read_by_subscribers(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    writer = SessionManager("writer", db, embedder=HashEmbedder(), background=False)
    writer.create_pool("team")
    writer.grant("team", "reader")
    reader = SessionManager("reader", db, embedder=HashEmbedder(), subscribe=["team"])
    outsider = SessionManager("outsider", db, embedder=HashEmbedder())
    SessionStore(writer, shared_pool="team").put(("facts",), "office", {"city": "Lyon"})
    assert SessionStore(reader).get(("facts",), "office").value == {"city": "Lyon"}
    assert SessionStore(outsider).get(("facts",), "office") is None
    SessionStore(reader).delete(("facts",), "office")  # its own namespace session: none
    assert SessionStore(reader).get(("facts",), "office") is not None
    session = writer.get_session("langgraph:facts")
    with pytest.raises(PermissionDenied):
        reader.record_fact(session.id, "not yours")
    for manager in (writer, reader, outsider):
        manager.close()


# -- in a compiled graph ------------------------------------------------------------------------


class State(TypedDict):
    user: str
    answer: str


def test_a_compiled_graph_uses_it_from_sync_and_async_nodes(tmp_path: Path) -> None:
    store = _store(tmp_path)

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        store.put(("memories", state["user"]), "colour", {"text": "likes green"})
        return {}

    async def recall(state: State, *, store: BaseStore) -> dict[str, Any]:
        found = await store.asearch(("memories", state["user"]), query="favourite colour")
        return {"answer": found[0].value["text"] if found else "nothing"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)
    result = asyncio.run(graph.ainvoke({"user": "u1", "answer": ""}))
    assert result["answer"] == "likes green"
    # the memory is an event of the store: a fresh process (manager) finds it
    again = SessionManager("agent", store.manager.db_path, embedder=HashEmbedder())
    assert SessionStore(again).get(("memories", "u1"), "colour").value == {"text": "likes green"}
    sync_graph = StateGraph(State)
    sync_graph.add_node("remember", remember)
    sync_graph.add_edge(START, "remember")
    sync_graph.add_edge("remember", END)
    sync_graph.compile(store=SessionStore(again)).invoke({"user": "u2", "answer": ""})
    assert again.get_session("langgraph:memories.u2").metadata == {
        "langgraph_namespace": ["memories", "u2"]
    }
    again.close()
    store.manager.close()


def test_abatch_keeps_the_event_loop_free(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for i in range(200):
        store.put(("bulk",), f"k{i}", {"text": f"item {i}"})

    async def work() -> None:
        for _ in range(5):
            await store.asearch(("bulk",), query="item 7", limit=5)

    async def run() -> LoopReport:
        return await watch_loop(work)

    asyncio.run(run()).assert_free()
    store.manager.close()


@pytest.mark.postgres
def test_on_postgresql(postgres_url: str) -> None:
    url = postgres_url
    joiner = "&" if "?" in url else "?"
    manager = SessionManager(
        "agent", url=f"{url}{joiner}schema=langgraph_{next(_runs)}", embedder=HashEmbedder()
    )
    ours, reference = SessionStore(manager), InMemoryStore()
    for store in (ours, reference):
        store.put(("a", "b"), "k1", {"n": 1, "s": "x"})
        store.put(("a", "c"), "k2", {"n": 2, "s": "y"})
        store.put(("a", "b"), "k1", {"n": 3, "s": "x"})
        store.delete(("a", "c"), "k2")
    assert _comparable(ours.search(("a",))) == _comparable(reference.search(("a",)))
    assert ours.get(("a", "b"), "k1").value == {"n": 3, "s": "x"}
    assert ours.list_namespaces() == [("a", "b")]
    manager.close()


def test_a_graph_whose_turns_are_recorded_forms_facts(tmp_path: Path) -> None:
    """The store holds items, not turns: extraction never reads items. A graph's turns reach
    it when a node records them with the store's manager (given extractor=), and a later
    run's node reads the fact the stage formed."""
    manager = SessionManager(
        "agent", tmp_path / "x.db", embedder=HashEmbedder(), background=False, extractor="rules"
    )

    class Turn(TypedDict):
        user: str
        said: str
        known: list[str]

    def hear(state: Turn, *, store: BaseStore) -> dict[str, Any]:
        assert isinstance(store, SessionStore)
        chat = store.manager.session_for(f"chat:{state['user']}", "Chat", user_id=state["user"])
        store.manager.add_message(chat.id, "user", state["said"])
        return {"known": [f.text for f in store.manager.facts(state["user"])]}

    builder = StateGraph(Turn)
    builder.add_node("hear", hear)
    builder.add_edge(START, "hear")
    builder.add_edge("hear", END)
    graph = builder.compile(store=SessionStore(manager))
    first = graph.invoke({"user": "u7", "said": "I moved to Porto.", "known": []})
    assert first["known"] == []
    manager.flush()  # runs the extraction stage now (the worker does it within seconds)
    again = graph.invoke({"user": "u7", "said": "Where should I eat?", "known": []})
    assert again["known"] == ["Lives in Porto"]
    manager.close()
