"""The privacy and operations part of the conformance suite: on every backend (and vector
index), erasing a user leaves nothing of theirs to read — search by any agent, export,
facts — and touches no one else's data; redaction stores placeholders only; a retention
policy never deletes an acknowledged write; health() describes the store.

:class:`~memlane.testing.BackendConformance` inherits these tests; they use its
``make`` and ``backend`` fixtures. (The raw bytes of SQLite's files and PostgreSQL's tables
are checked by the project's own tests.)
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from ..core.clock import now_us
from ..errors import SessionNotFound
from ..manager import SessionManager
from ..retention import RetentionPolicy

__all__ = ["PrivacyConformance"]

ManagerFactory = Callable[..., SessionManager]
_CANARY = "zebracanary7f3q"
_OTHER = "okapiwitness9k2"


class PrivacyConformance:
    """Erasure and redaction on one backend (a mixin of ``BackendConformance``)."""

    def test_an_erased_user_is_gone_for_every_reader(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        first = make("a")
        first.create_pool("team")
        first.grant("team", "b")
        agents = [first, make("b", subscribe=["team"])]
        for mgr in agents:
            for user, word in (("u-canary", _CANARY), ("u-other", _OTHER)):
                session = mgr.start_session(
                    f"{word} order", user_id=user, shared_pool="team" if mgr is agents[0] else None
                )
                mgr.add_message(session.id, "user", f"about {word}, twice: {word}")
                mgr.record_step(session.id, "looked up", result={"note": word})
                mgr.remember(user, f"Prefers the {word} plan", key="plan")
            mgr.flush()
        assert all(mgr.search(_CANARY, k=5, mode="keyword") for mgr in agents)
        admin = backend.admin()
        try:
            receipt = admin.erase_user("u-canary")
            assert receipt.sessions == 4 and receipt.facts == 2
            assert receipt.events.get("message") == 2
            exported = "\n".join(json.dumps(record) for record in admin.export())
            assert _CANARY not in exported and _OTHER in exported
            assert admin.sessions(user="u-canary") == []
        finally:
            admin.close()
        for mgr in agents:
            for mode in ("hybrid", "keyword", "semantic"):
                hits = mgr.search(_CANARY, k=20, mode=mode)
                assert all(_CANARY not in hit.event.content for hit in hits), mode
            assert mgr.facts("u-canary") == []
            assert [f.text for f in mgr.facts("u-other")] == [f"Prefers the {_OTHER} plan"]
            assert mgr.search(_OTHER, k=5, mode="keyword")

    def test_redaction_stores_placeholders_on_every_backend(self, make: ManagerFactory) -> None:
        mgr = make(redactor="default")
        session = mgr.start_session("Refund ann@example.org")
        event = mgr.record_step(
            session.id, "charged 4111 1111 1111 1111", result={"to": "ann@example.org"}
        )
        again = mgr.get_event(event.id)
        assert again.content == "charged [CARD_1]"
        assert again.payload == {"result": {"to": "[EMAIL_1]"}}
        assert mgr.get_session(session.id).goal == "Refund [EMAIL_1]"
        assert mgr.search("4111", k=5, mode="keyword") == []

    def test_retention_never_deletes_an_acknowledged_write(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        """A writer records into old sessions while a policy deletes them: each session is
        either kept (written before the decision: it is not old any more) or deleted with the
        write refused (SessionNotFound) — never deleted under an acknowledged write."""
        mgr, writer = make("a"), make("a")
        sessions = [mgr.start_session(f"old task {i}").id for i in range(40)]
        admin = backend.admin()
        year_ago = now_us() - 365 * 86_400 * 1_000_000
        with admin.store.atomic() as tx:
            for session_id in sessions:
                tx.execute(
                    "UPDATE sessions SET updated_us = ? WHERE id = ?", (year_ago, session_id)
                )
        written: dict[str, str] = {}
        refused: list[str] = []

        def write() -> None:
            for session_id in reversed(sessions):
                try:
                    written[session_id] = writer.add_message(session_id, "user", "late").id
                except SessionNotFound:
                    refused.append(session_id)

        thread = threading.Thread(target=write)
        try:
            thread.start()
            result = admin.apply_retention(RetentionPolicy("30d"))
            thread.join()
        finally:
            admin.close()
        assert not set(result.sessions) & set(written)
        assert set(written) | set(refused) == set(sessions)
        for event_id in written.values():
            assert writer.get_event(event_id).content == "late"

    def test_health_describes_the_store(self, make: ManagerFactory, backend: Any) -> None:
        mgr = make()
        mgr.record_fact(mgr.start_session("work").id, "waits for its vector")
        report = mgr.health()
        assert report.backlog >= 2 and report.stalled  # nobody embeds: no worker here
        mgr.flush()
        report = mgr.health()
        assert report.backlog == 0 and report.ok and report.last_embedded_at is not None
        assert report.schema and report.store_bytes and report.store_bytes > 0
        admin = backend.admin()
        try:
            assert admin.health().to_dict()["schema"] == report.schema
        finally:
            admin.close()
