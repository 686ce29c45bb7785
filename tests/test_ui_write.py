"""memlane ui --allow-write: each write is a confirmation page (which changes nothing) and a
POST that needs the server's CSRF token; without --allow-write neither route exists."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="memlane ui needs the [ui] extra")

from starlette.testclient import TestClient

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.errors import SessionNotFound
from memlane.testing import HashEmbedder
from memlane.ui import Source, create_app
from memlane.ui.security import cookie_name

from .ui_store import ESCAPED, HOSTILE, build

TOKEN = "write-token-0123456789"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    db_path = tmp_path / "sessions.db"
    return db_path, build(db_path)


def client_for(db_path: Path, *, writable: bool, agent: str | None = None) -> TestClient:
    admin = StoreAdmin(db_path, embedder=HashEmbedder(), read_only=not writable)
    app = create_app(Source(admin, agent=agent), token=TOKEN, hosts=["testserver"])
    client = TestClient(app, follow_redirects=False)
    client.cookies.set(cookie_name(TOKEN), TOKEN)
    return client


@pytest.fixture
def writer(store: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    with client_for(store[0], writable=True) as client:
        yield client


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "the confirmation page has no CSRF field"
    return found.group(1)


def session_exists(db_path: Path, session_id: str) -> bool:
    with StoreAdmin(db_path) as admin:
        try:
            admin.session(session_id)
        except SessionNotFound:
            return False
        return True


def test_read_only_has_no_write_route(store: tuple[Path, dict[str, str]]) -> None:
    db_path, ids = store
    with client_for(db_path, writable=False) as client:
        assert client.get("/confirm", params={"action": "delete-session"}).status_code == 404
        assert client.post("/act", data={"action": "delete-session"}).status_code == 404
        page = client.get(f"/sessions/{ids['main']}")
        assert "Delete session" not in page.text and "delete…" not in page.text
        assert (
            "retract…"
            not in client.get("/users", params={"agent": "researcher", "user": "u-42"}).text
        )


def test_deleting_a_session_asks_then_needs_the_csrf_token(
    writer: TestClient, store: tuple[Path, dict[str, str]]
) -> None:
    db_path, ids = store
    timeline = writer.get(f"/sessions/{ids['long']}")
    assert "Delete session…" in timeline.text
    confirm = writer.get("/confirm", params={"action": "delete-session", "session": ids["long"]})
    assert confirm.status_code == 200
    assert "Delete this session?" in confirm.text and "232 events" in confirm.text
    assert session_exists(db_path, ids["long"])  # asking changed nothing
    form = {"action": "delete-session", "session": ids["long"]}
    assert writer.post("/act", data=form).status_code == 403  # no token
    assert writer.post("/act", data={**form, "csrf": "forged"}).status_code == 403
    other_site = writer.post(
        "/act",
        data={**form, "csrf": csrf_of(confirm.text)},
        headers={"origin": "http://evil.example"},
    )
    assert other_site.status_code == 403
    assert session_exists(db_path, ids["long"])
    done = writer.post("/act", data={**form, "csrf": csrf_of(confirm.text)})
    assert done.status_code == 200 and "and its 232 events" in done.text
    assert not session_exists(db_path, ids["long"])
    assert writer.get(f"/sessions/{ids['long']}").status_code == 404


def test_deleting_an_event(writer: TestClient, store: tuple[Path, dict[str, str]]) -> None:
    db_path, ids = store
    with StoreAdmin(db_path) as admin:
        decision = next(e for e in admin.events(ids["main"]) if e.kind == "decision")
    params = {"action": "delete-event", "session": ids["main"], "event": decision.id}
    confirm = writer.get("/confirm", params=params)
    assert "Delete this event?" in confirm.text and "Keep SQLite" in confirm.text
    done = writer.post("/act", data={**params, "csrf": csrf_of(confirm.text)})
    assert done.status_code == 200 and decision.id in done.text
    with StoreAdmin(db_path) as admin:
        assert decision.id not in {e.id for e in admin.events(ids["main"])}
    unknown = writer.get("/confirm", params={**params, "event": "01NOSUCHEVENT0000000000000"})
    assert unknown.status_code == 404


def test_retracting_a_fact_keeps_the_reason(
    writer: TestClient, store: tuple[Path, dict[str, str]]
) -> None:
    db_path, _ = store
    facts = writer.get("/users", params={"agent": "researcher", "user": "u-42"})
    assert "retract…" in facts.text
    with SessionManager("researcher", db_path=db_path, embedder=HashEmbedder()) as mgr:
        zurich = next(f for f in mgr.facts("u-42") if f.text == "Lives in Zurich")
    params = {"action": "retract-fact", "agent": "researcher", "user": "u-42", "fact": zurich.id}
    confirm = writer.get("/confirm", params=params)
    assert "Retract this fact?" in confirm.text and 'name="reason" required' in confirm.text
    done = writer.post(
        "/act", data={**params, "reason": "moved to Bern", "csrf": csrf_of(confirm.text)}
    )
    assert done.status_code == 200 and "moved to Bern" in done.text
    with SessionManager("researcher", db_path=db_path, embedder=HashEmbedder()) as mgr:
        assert zurich.id not in {f.id for f in mgr.facts("u-42")}
    empty_reason = writer.post("/act", data={**params, "reason": "", "csrf": csrf_of(confirm.text)})
    assert empty_reason.status_code == 400  # the library's message, not a traceback


def test_erasing_a_user_shows_the_receipt(
    writer: TestClient, store: tuple[Path, dict[str, str]]
) -> None:
    db_path, ids = store
    params = {"action": "erase-user", "agent": "researcher", "user": "u-42"}
    confirm = writer.get("/confirm", params=params)
    assert "Erase this user?" in confirm.text and "in the memory of agent" in confirm.text
    done = writer.post("/act", data={**params, "csrf": csrf_of(confirm.text)})
    assert done.status_code == 200 and "Erasure receipt" in done.text
    assert "Sessions erased" in done.text
    assert not session_exists(db_path, ids["main"])  # u-42's session
    assert session_exists(db_path, ids["long"])  # no user: kept


def test_agent_scope_holds_for_writes(store: tuple[Path, dict[str, str]]) -> None:
    db_path, ids = store
    with client_for(db_path, writable=True, agent="researcher") as client:
        other = client.get(
            "/confirm", params={"action": "delete-session", "session": ids["hostile"]}
        )
        assert other.status_code == 404
    assert session_exists(db_path, ids["hostile"])


def test_confirmation_pages_escape_what_they_show(
    writer: TestClient, store: tuple[Path, dict[str, str]]
) -> None:
    _, ids = store
    pages = [
        writer.get("/confirm", params={"action": "delete-session", "session": ids["hostile"]}),
        writer.get(
            "/confirm", params={"action": "erase-user", "agent": HOSTILE[0], "user": HOSTILE[1]}
        ),
        writer.get("/confirm", params={"action": HOSTILE[0]}),
    ]
    for page in pages:
        assert HOSTILE[0] not in page.text and HOSTILE[1] not in page.text
    assert ESCAPED[0] in pages[0].text and ESCAPED[1] in pages[1].text
    assert pages[2].status_code == 400 and "Unknown action" in pages[2].text
