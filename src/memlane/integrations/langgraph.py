"""LangGraph's long-term memory store, kept in a session store: ``SessionStore(BaseStore)``.

Install the extra: ``pip install 'memlane[langgraph]'``. Then::

    from langgraph.graph import StateGraph
    from memlane import SessionManager
    from memlane.integrations.langgraph import SessionStore

    store = SessionStore(SessionManager(agent_id="assistant", db_path="memory.db"))
    graph = builder.compile(store=store)        # nodes get it as `store`

How LangGraph's model maps onto ours (docs/integrations/langgraph.md says more):

* **Items are events.** ``put(namespace, key, value)`` records one event of kind
  ``langgraph:item`` whose payload is ``value``, verbatim, and whose metadata holds the key and
  the namespace; a second ``put`` of the key replaces it in one transaction (``record(...,
  replace=...)``), so there is never more than one current value. ``delete`` deletes it from
  the log and every index.
* **Namespaces are sessions.** Each namespace's items live in one session of the manager's
  agent (session key ``langgraph:<namespace>``), so restore, export, the CLI and isolation all
  see them. ``SessionStore(..., shared_pool="team")`` puts those sessions in a pool that
  other agents read (never write) by subscribing to it: namespaces are agents' and pools'.
* **Search** narrows by namespace prefix inside the store (every prefix of an item's
  namespace is in its metadata), then applies LangGraph's filter operators (``$eq``,
  ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, nested equality) with LangGraph's own
  semantics. With a query it ranks by this library's hybrid search (semantic + keyword) over
  the text of the fields ``IndexConfig["fields"]`` (or ``put(..., index=[...])``) names;
  items with nothing to index (``index=False``) follow the ranked ones, as in LangGraph.
  Embedding is the manager's embedder: ``IndexConfig["embed"]`` and ``"dims"`` are not used.
* **Order** without a query: most recently updated first, as LangGraph's PostgreSQL store.
* **TTL** is not supported yet (``supports_ttl = False``; LangGraph refuses a ``ttl``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidInput, SessionNotFound
from ..events import Event
from ..manager import SessionManager
from . import require

require("langgraph.store.base", "langgraph")

from langgraph.store.base import (  # noqa: E402  (after the check that names the extra)
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base import validate_op_namespace as _validate_namespace  # noqa: E402
from langgraph.store.base.embed import get_text_at_path, tokenize_path  # noqa: E402

__all__ = ["ITEM_KIND", "SessionStore"]

#: the kind of the events that hold LangGraph items
ITEM_KIND = "langgraph:item"
_KEY = "lg_key"  # metadata: the item's key
_NAMESPACE = "lg_ns"  # metadata: the item's namespace, labels joined by "." (never in a label)
_PREFIX = "lg_p{}"  # metadata: the namespace's first n labels, for prefix searches
# a query search asks our search for this many candidates per wanted result, before filters
_OVERFETCH = 4


class SessionStore(BaseStore):
    """A LangGraph ``BaseStore`` over a :class:`~memlane.SessionManager`.

    ``index``: LangGraph's ``IndexConfig``; only ``fields`` is used (default ``["$"]``: the
    whole value is searchable). ``shared_pool``: the pool the namespaces' sessions go in.
    """

    supports_ttl = False

    def __init__(
        self,
        manager: SessionManager,
        *,
        index: IndexConfig | None = None,
        shared_pool: str | None = None,
    ) -> None:
        if index is not None and index.get("embed") is not None:
            raise InvalidInput(
                "SessionStore embeds with its SessionManager's embedder; leave 'embed' (and "
                "'dims') out of index=, and pass embedder= to SessionManager to choose one."
            )
        self.manager = manager
        self.shared_pool = shared_pool
        fields = (index or {}).get("fields") or ["$"]
        self._fields = [(path, tokenize_path(path)) for path in fields]

    # -- the two abstract methods ------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; as in LangGraph's own stores, reads see the state before
        this batch's writes, and of several puts to one item the last wins."""
        ops = list(ops)
        for op in ops:
            _validate_namespace(op)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            elif isinstance(op, PutOp):
                if op.ttl is not None:
                    raise InvalidInput(
                        "SessionStore does not expire items yet (supports_ttl is False); "
                        "put them without ttl."
                    )
                puts[(op.namespace, op.key)] = op
                results.append(None)
            else:
                raise InvalidInput(f"Unknown LangGraph store operation {type(op).__name__}.")
        for op in puts.values():
            self._put(op)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on a worker thread: the event loop never waits on the store."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- reads -------------------------------------------------------------------------------

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        where = {_NAMESPACE: _joined(namespace), _KEY: key}
        found = self.manager.events(None, kinds=ITEM_KIND, where=where, newest_first=True, limit=1)
        return _item(found[0]) if found else None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidInput(f"limit and offset must be 0 or more, got {op.limit}, {op.offset}.")
        where = _prefix_where(op.namespace_prefix)
        if op.query:
            return self._ranked(op, where)
        listed = self.manager.events(None, kinds=ITEM_KIND, where=where, newest_first=True)
        kept = [event for event in listed if _matches(event.payload, op.filter)]
        return [_search_item(event) for event in kept[op.offset : op.offset + op.limit]]

    def _ranked(self, op: SearchOp, where: Mapping[str, Any] | None) -> list[SearchItem]:
        """Query search: our hybrid ranking, LangGraph's filter on each candidate, the page;
        then, as LangGraph does, unranked (unindexed) matches fill a short page."""
        wanted = op.offset + op.limit
        depth = max(wanted * _OVERFETCH, 10)
        while True:
            hits = self.manager.search(
                op.query or "", k=depth, kinds=ITEM_KIND, where=where, include_shared=True
            )
            kept = [hit for hit in hits if _matches(hit.event.payload, op.filter)]
            if len(kept) >= wanted or len(hits) < depth:
                break
            depth *= 4  # filters rejected too many candidates: look deeper
        page = [_search_item(hit.event, hit.score) for hit in kept[op.offset : wanted]]
        if len(page) < op.limit:
            # A short page means the search ranked every item it could: the others were put
            # with index=False or still wait for their vector (a loaded machine's worker, the
            # search's catch-up being bounded). Both are listed after the ranked ones.
            ranked = {hit.event.id for hit in hits}
            listed = self.manager.events(None, kinds=ITEM_KIND, where=where, newest_first=True)
            unranked = [e for e in listed if e.id not in ranked and _matches(e.payload, op.filter)]
            page += [_search_item(event) for event in unranked[: op.limit - len(page)]]
        return page

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """Namespaces that hold items (LangGraph's PostgreSQL store's rule), sorted."""
        found = set()
        for session in self.manager.list_sessions(limit=None):
            namespace = session.metadata.get("langgraph_namespace")
            if not isinstance(namespace, list) or not self.manager.events(
                session.id, kinds=ITEM_KIND, limit=1
            ):
                continue
            found.add(tuple(str(label) for label in namespace))
        namespaces = [
            ns for ns in found if all(_matches_condition(c, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # -- writes ------------------------------------------------------------------------------

    def _put(self, op: PutOp) -> None:
        session = self._session(op.namespace, create=op.value is not None)
        if session is None:
            return  # deleting from a namespace that never held anything
        match = {_KEY: op.key}
        if op.value is None:
            old = self.manager.events(session, kinds=ITEM_KIND, where=match)
            for event in old:
                self.manager.delete_event(event.id)
            return
        value = dict(op.value)
        texts = self._texts(value, op.index)
        metadata = {_KEY: op.key, **_namespace_metadata(op.namespace)}
        content = "\n".join(texts) if texts else f"{op.key}: {json.dumps(value)[:500]}"
        self.manager.record(
            session,
            ITEM_KIND,
            content,
            value,
            metadata=metadata,
            index=bool(texts),
            replace=match,
        )

    def _texts(self, value: dict[str, Any], index: Any) -> list[str]:
        """What search sees of a value: the texts at the item's or the store's field paths."""
        if index is False:
            return []
        paths = self._fields if index is None else [(p, tokenize_path(p)) for p in index]
        texts: list[str] = []
        for path, tokens in paths:
            if path == "$":
                texts.append(json.dumps(value, ensure_ascii=False))
            else:
                texts.extend(text for text in get_text_at_path(value, tokens) if text)
        return texts

    def _session(self, namespace: tuple[str, ...], *, create: bool) -> str | None:
        """The id of this agent's session for ``namespace`` (created for a put)."""
        key = "langgraph:" + _joined(namespace)
        if not create:
            try:
                return self.manager.get_session(key).id
            except SessionNotFound:
                return None
        return self.manager.session_for(
            key,
            goal=f"LangGraph store namespace {_joined(namespace)}",
            metadata={"langgraph_namespace": list(namespace)},
            shared_pool=self.shared_pool,
        ).id


# -- mapping ---------------------------------------------------------------------------------


def _joined(namespace: Sequence[str]) -> str:
    return ".".join(namespace)  # LangGraph forbids "." in labels: the join is unambiguous


def _namespace_metadata(namespace: tuple[str, ...]) -> dict[str, str]:
    """The item's namespace and each of its prefixes, so a prefix search is one equality."""
    prefixes = {_PREFIX.format(n): _joined(namespace[:n]) for n in range(1, len(namespace) + 1)}
    return {_NAMESPACE: _joined(namespace), **prefixes}


def _prefix_where(prefix: tuple[str, ...]) -> dict[str, str] | None:
    return {_PREFIX.format(len(prefix)): _joined(prefix)} if prefix else None


def _namespace_of(event: Event) -> tuple[str, ...]:
    return tuple(str(event.metadata[_NAMESPACE]).split("."))


def _item(event: Event) -> Item:
    return Item(
        value=dict(event.payload or {}),
        key=str(event.metadata[_KEY]),
        namespace=_namespace_of(event),
        created_at=event.created_at,
        updated_at=event.created_at,  # a put replaces the event: its time is the update's
    )


def _search_item(event: Event, score: float | None = None) -> SearchItem:
    return SearchItem(
        namespace=_namespace_of(event),
        key=str(event.metadata[_KEY]),
        value=dict(event.payload or {}),
        created_at=event.created_at,
        updated_at=event.created_at,
        score=score,
    )


# -- LangGraph's filter semantics (langgraph.store.memory), kept identical -----------------


def _matches(value: Any, flt: Mapping[str, Any] | None) -> bool:
    if not flt:
        return True
    if not isinstance(value, Mapping):
        return False
    return all(_compare(value.get(key), wanted) for key, wanted in flt.items())


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(value, op, operand) for op, operand in wanted.items())
        if not isinstance(value, Mapping):
            return False
        return all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(v, w) for v, w in zip(value, wanted, strict=False))
        )
    return bool(value == wanted)


def _apply(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            left, right = float(value), float(operand)
        except (TypeError, ValueError):
            raise InvalidInput(
                f"Filter {op} compares numbers; {value!r} and {operand!r} are not both numbers."
            ) from None
        return {
            "$gt": left > right,
            "$gte": left >= right,
            "$lt": left < right,
            "$lte": left <= right,
        }[op]
    raise InvalidInput(f"Unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt, $lte.")


def _matches_condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))
