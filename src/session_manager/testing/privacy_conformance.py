"""The privacy part of the conformance suite: on every backend (and vector index), erasing a
user leaves nothing of theirs to read — search by any agent, export, facts — and touches no
one else's data; redaction stores placeholders only.

:class:`~session_manager.testing.BackendConformance` inherits these tests; they use its
``make`` and ``backend`` fixtures. (The raw bytes of SQLite's files and PostgreSQL's tables
are checked by the project's own tests.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..manager import SessionManager

__all__ = ["PrivacyConformance"]

ManagerFactory = Callable[..., SessionManager]
_CANARY = "zebracanary7f3q"
_OTHER = "okapiwitness9k2"


class PrivacyConformance:
    """Erasure and redaction on one backend (a mixin of ``BackendConformance``)."""

    def test_an_erased_user_is_gone_for_every_reader(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        agents = [make("a"), make("b", subscribe=["team"])]
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
