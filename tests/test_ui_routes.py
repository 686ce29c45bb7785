"""The inspector's pages through Starlette's test client: every page and every error, the
token and Host checks, hostile content rendered inert, and a store that browsing leaves as
it was (recall counts included)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="memlane ui needs the [ui] extra")

from starlette.testclient import TestClient

from memlane import SessionManager
from memlane.admin import StoreAdmin, json_line
from memlane.testing import HashEmbedder
from memlane.ui import Source, create_app
from memlane.ui.security import cookie_name
from memlane.ui.views import sessions as sessions_view

from .ui_store import ESCAPED, HOSTILE, LONG_SESSION_EVENTS, build

TOKEN = "test-token-0123456789"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    db_path = tmp_path_factory.mktemp("ui") / "sessions.db"
    return db_path, build(db_path)


def open_source(db_path: Path, agent: str | None = None) -> Source:
    admin = StoreAdmin(db_path, embedder=HashEmbedder(), read_only=True)
    return Source(admin, agent=agent)


@pytest.fixture(scope="module")
def client(store: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    app = create_app(open_source(store[0]), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as test_client:
        test_client.cookies.set(cookie_name(TOKEN), TOKEN)
        yield test_client


@pytest.fixture
def ids(store: tuple[Path, dict[str, str]]) -> dict[str, str]:
    return store[1]


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# -- the pages ---------------------------------------------------------------------------


def test_home_leads_to_the_sessions(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 307
    assert response.headers["location"].endswith("/sessions")


def test_sessions_page_lists_and_filters(client: TestClient, ids: dict[str, str]) -> None:
    page = client.get("/sessions")
    assert page.status_code == 200
    assert "Compare Postgres and SQLite for the job queue" in page.text
    assert "A long run" in page.text
    assert f"/sessions/{ids['main']}" in page.text
    assert "u-42" in page.text
    assert "data-local" in page.text and 'datetime="' in page.text  # local time, UTC on hover
    by_text = client.get("/sessions", params={"q": "postgres"})
    assert "job queue" in by_text.text and "A long run" not in by_text.text
    by_agent = client.get("/sessions", params={"agent": "researcher", "status": "active"})
    assert "A long run" in by_agent.text and f"/sessions/{ids['hostile']}" not in by_agent.text
    by_user = client.get("/sessions", params={"user": "u-42"})
    assert "job queue" in by_user.text and "A long run" not in by_user.text
    nothing = client.get("/sessions", params={"q": "no such goal"})
    assert "No sessions match" in nothing.text


def test_sessions_page_pages(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from memlane.ui.views import sessions

    monkeypatch.setattr(sessions, "PER_PAGE", 1)
    first = client.get("/sessions")
    assert "page=2" in first.text and "Next" in first.text
    third = client.get("/sessions", params={"page": 3})
    assert third.status_code == 200 and "Page 3" in third.text
    assert "Next" not in text_of(third.text)
    assert client.get("/sessions", params={"page": 4}).text.count('class="goal"') == 0


def test_a_bad_filter_shows_the_library_s_message(client: TestClient) -> None:
    bad_status = client.get("/sessions", params={"status": "sleeping"})
    assert bad_status.status_code == 400
    assert "sleeping" in bad_status.text and "Traceback" not in bad_status.text
    bad_page = client.get("/sessions", params={"page": "two"})
    assert bad_page.status_code == 400 and "The page must be a whole number" in bad_page.text


def test_timeline_shows_events_in_order_with_their_details(
    client: TestClient, ids: dict[str, str]
) -> None:
    page = client.get(f"/sessions/{ids['main']}")
    assert page.status_code == 200
    body = page.text
    order = [body.index(text) for text in ("Postgres 16", "Keep SQLite", "billing service")]
    assert order == sorted(order)
    assert 'class="kind kind-fact"' in body and 'class="kind kind-decision"' in body
    assert '<span class="role">user</span>' in body
    assert '<span class="tag">infra</span>' in body
    assert "★ 0.80" in body  # the decision's importance
    # the long content and the payload are folded, with their size
    assert body.count('<details class="fold">') >= 1
    assert "Paragraph 39" in body and "k chars" in body
    assert "payload" in body and '"table": "t399"' in body.replace("&#34;", '"')
    assert "Restore preview" in body


def test_timeline_pages_a_long_session(client: TestClient, ids: dict[str, str]) -> None:
    # the goal, then the steps: a page of 100 events holds the goal and steps 0..98
    first = client.get(f"/sessions/{ids['long']}")
    assert "step number 0<" in first.text and "step number 98<" in first.text
    assert "step number 99<" not in first.text
    assert "Page 1 of 3" in text_of(first.text)
    second = client.get(f"/sessions/{ids['long']}", params={"page": 2})
    assert "step number 99<" in second.text and "step number 198<" in second.text
    last = client.get(f"/sessions/{ids['long']}", params={"page": "last"})
    assert f"step number {LONG_SESSION_EVENTS - 1}<" in last.text
    assert "step number 198<" not in last.text and "Page 3 of 3" in text_of(last.text)
    by_key = client.get("/sessions/long-run")  # a key names a session too
    assert by_key.status_code == 200 and "A long run" in by_key.text
    by_kind = client.get(f"/sessions/{ids['main']}", params={"kind": "decision"})
    assert "Keep SQLite" in by_kind.text and "Postgres 16" not in by_kind.text


def test_timeline_links_pending_steps_and_shows_what_a_summary_covers(
    client: TestClient, ids: dict[str, str]
) -> None:
    main = client.get(f"/sessions/{ids['main']}").text
    done_by = re.search(r'completed by <a href="[^"?]+\?event=(\w+)">', main)
    assert done_by and f'id="e-{done_by.group(1)}"' in main  # the step that completed it
    assert "completes the pending step" in main
    last = client.get(f"/sessions/{ids['long']}", params={"page": "last"}).text
    covers = re.search(r'covers \d+ events, from <a href="[^"?]+\?event=(\w+)">', last)
    assert covers  # the first covered event: on page 1
    jump = client.get(f"/sessions/{ids['long']}", params={"event": covers.group(1)})
    assert jump.status_code == 303
    assert jump.headers["location"].endswith(f"?page=1#e-{covers.group(1)}")


def test_a_link_to_an_event_opens_the_page_that_shows_it(
    client: TestClient, ids: dict[str, str]
) -> None:
    with StoreAdmin(client.app.state.source.admin.url) as admin:  # type: ignore[attr-defined]
        steps = admin.events(ids["long"], kinds=["step"])
    for number in (0, 98, 99, 150, 229):  # the goal is event 0: step 99 is the 101st event
        event = steps[number]
        jump = client.get(f"/sessions/{ids['long']}", params={"event": event.id})
        page = 1 + (number + 1) // 100
        assert jump.headers["location"].endswith(f"?page={page}#e-{event.id}"), number
        shown = client.get(jump.headers["location"].split("#")[0])
        assert f'id="e-{event.id}"' in shown.text
    unknown = client.get(f"/sessions/{ids['long']}", params={"event": "01NOSUCHEVENT0000000000000"})
    assert unknown.status_code == 404 and "holds no event" in unknown.text


def test_an_unknown_session_is_a_404_page(client: TestClient) -> None:
    page = client.get("/sessions/01NOSUCHSESSION00000000000")
    assert page.status_code == 404
    assert "Not found" in page.text and "does not exist" in page.text
    assert client.get("/restore", params={"session": "nope-nope"}).status_code == 404
    assert client.get("/no/such/page").status_code == 404


def test_a_bad_kind_is_the_library_s_message(client: TestClient, ids: dict[str, str]) -> None:
    page = client.get(f"/sessions/{ids['main']}", params={"kind": "decison"})
    assert page.status_code == 400 and "Unknown event kind" in page.text


def test_search_shows_hits_with_scores_and_ranks(client: TestClient) -> None:
    empty = client.get("/search")
    assert empty.status_code == 200 and "autofocus" in empty.text
    page = client.get("/search", params={"q": "Postgres production queue", "k": 3})
    assert page.status_code == 200
    assert "Postgres 16" in page.text
    assert re.search(r"keyword #1\b", page.text)
    assert "semantic #" in page.text
    assert "fused (RRF)" in page.text
    keyword = client.get("/search", params={"q": "Postgres", "mode": "keyword"})
    assert "keyword #1" in keyword.text and "semantic #" not in keyword.text
    assert "BM25" in keyword.text


def test_search_answers_htmx_with_the_hits_alone(client: TestClient) -> None:
    partial = client.get("/search", params={"q": "Postgres"}, headers={"HX-Request": "true"})
    assert partial.status_code == 200
    assert "<html" not in partial.text and 'class="hits"' in partial.text


def test_htmx_gets_errors_as_fragments_it_swaps_in(client: TestClient, ids: dict[str, str]) -> None:
    htmx = {"HX-Request": "true"}
    search = client.get("/search", params={"q": "x", "mode": "fuzzy"}, headers=htmx)
    assert search.status_code == 200 and "Unknown search mode" in search.text
    assert "<html" not in search.text
    params = {"session": ids["main"], "budget": -5}
    restore = client.get("/restore", params=params, headers=htmx)
    assert restore.status_code == 200 and "max_tokens must be a positive" in restore.text


def test_search_shows_a_long_event_s_passage(client: TestClient) -> None:
    page = client.get("/search", params={"q": "disk on db-37 full", "mode": "semantic", "k": 1})
    assert "passage, characters" in page.text


def test_search_in_one_session_and_bad_values(client: TestClient, ids: dict[str, str]) -> None:
    page = client.get("/search", params={"q": "step number 7", "session": ids["long"], "k": 2})
    assert "step number 7" in page.text and "Postgres 16" not in page.text
    bad_mode = client.get("/search", params={"q": "x", "mode": "fuzzy"})
    assert bad_mode.status_code == 400 and "Unknown search mode" in bad_mode.text
    bad_k = client.get("/search", params={"q": "x", "k": "0"})
    assert bad_k.status_code == 400 and "k (how many hits) must be between" in bad_k.text


def test_search_filters_on_metadata_and_time(client: TestClient) -> None:
    tool = client.get("/search", params={"q": "rows table", "where": '{"tool": "psql"}'})
    assert tool.status_code == 200
    assert "kind-tool_output" in tool.text
    assert "Postgres 16" not in tool.text and "1 hit for" in tool.text
    later = client.get("/search", params={"q": "Postgres", "since": "2999-01-01"})
    assert later.status_code == 200 and "No hits" in later.text
    earlier = client.get("/search", params={"q": "Postgres", "until": "2999-01-01"})
    assert "Postgres 16" in earlier.text
    not_json = client.get("/search", params={"q": "x", "where": "tool=psql"})
    assert not_json.status_code == 400 and "not JSON" in not_json.text
    bad_operator = client.get("/search", params={"q": "x", "where": '{"n": {"$near": 1}}'})
    assert bad_operator.status_code == 400 and "$near" in bad_operator.text
    bad_time = client.get("/search", params={"q": "x", "since": "last blue moon"})
    assert bad_time.status_code == 400 and "since" in bad_time.text


def test_restore_preview_shows_text_sections_and_report(
    client: TestClient, ids: dict[str, str]
) -> None:
    form = client.get("/restore")
    assert form.status_code == 200 and "Pick a session" in form.text
    page = client.get("/restore", params={"session": ids["main"], "budget": 400})
    assert page.status_code == 200
    body = page.text
    assert "Budget 400 tokens" in body
    assert "Compare Postgres and SQLite for the job queue" in body  # the goal, in the text
    assert "Sections" in body and "What restore considered" in body
    assert "included" in body
    assert ".messages" in body and '<span class="role">system</span>' in body


def test_restore_preview_compares_two_budgets(client: TestClient, ids: dict[str, str]) -> None:
    asked = {"session": ids["main"], "budget": 60, "budget2": 2000}
    page = client.get("/restore", params=asked)
    assert page.status_code == 200
    assert "columns-2" in page.text
    assert "Budget 60 tokens" in page.text and "Budget 2,000 tokens" in page.text
    assert "dropped" in page.text  # the small budget drops something
    # One restore per request: the second column is a placeholder htmx fills on load...
    later = re.findall(
        r'<section class="restore-column later"([^>]*)>(.*?)</section>', page.text, re.S
    )
    assert len(later) == 1 and 'data-budget="2000"' in later[0][0]
    assert 'hx-trigger="load"' in later[0][0]
    fetch = unescape(re.search(r'hx-get="([^"]+)"', later[0][0]).group(1))
    assert "only=2" in fetch
    assert page.text.count('<b class="used">') == 1
    # ...from the same route, which then restores only that budget.
    column = client.get(fetch, headers={"HX-Request": "true"})
    assert column.status_code == 200 and "<html" not in column.text
    assert "Budget 2,000 tokens" in column.text and "Budget 60 tokens" not in column.text
    assert '<b class="used">' in column.text and "later" not in column.text
    link = unescape(re.search(r'<a href="([^"]+)"', later[0][1]).group(1))
    alone = client.get(link)  # the placeholder's link, for a page without scripts
    assert "Budget 2,000 tokens" in alone.text and "columns-1" in alone.text
    partial = client.get(
        "/restore",
        params={"session": ids["main"], "budget": 300},
        headers={"HX-Request": "true"},
    )
    assert "<html" not in partial.text and "Budget 300 tokens" in partial.text


def test_restore_preview_shows_the_library_s_budget_message(
    client: TestClient, ids: dict[str, str]
) -> None:
    negative = client.get("/restore", params={"session": ids["main"], "budget": -5})
    assert negative.status_code == 400
    assert "max_tokens must be a positive integer" in negative.text
    words = client.get("/restore", params={"session": ids["main"], "budget": "lots"})
    assert words.status_code == 400 and "Budget must be a whole number" in words.text


def test_users_page_shows_facts_with_their_history(client: TestClient) -> None:
    form = client.get("/users")
    assert form.status_code == 200 and "remember(user_id" in form.text
    page = client.get("/users", params={"agent": "researcher", "user": "u-42"})
    assert page.status_code == 200
    body = text_of(page.text)
    assert "Lives in Zurich" in body and "Lives in Berlin" in body
    assert "superseded" in body and "retracted: it was coffee" in body
    assert "Prefers short answers" in body and "no key" in body
    assert "2 current facts" in body  # Zurich, and the preference
    then = client.get(
        "/users", params={"agent": "researcher", "user": "u-42", "as_of": "2024-06-01"}
    )
    assert "Lives in Berlin" in then.text and "Lives in Zurich" not in then.text
    nobody = client.get("/users", params={"agent": "researcher", "user": "u-0"})
    assert "knows nothing about u-0" in nobody.text
    bad_time = client.get("/users", params={"agent": "researcher", "user": "u-42", "as_of": "soon"})
    assert bad_time.status_code == 400 and "as_of" in bad_time.text
    which = client.get("/users", params={"user": "u-42"})  # two agents: which one?
    assert which.status_code == 400 and "Which agent?" in which.text


def test_the_session_links_to_its_user(client: TestClient, ids: dict[str, str]) -> None:
    page = client.get(f"/sessions/{ids['main']}")
    assert "/users?agent=researcher&amp;user=u-42" in page.text


def test_knowledge_page_lists_documents_and_their_chunks(
    client: TestClient, ids: dict[str, str]
) -> None:
    assert "Choose an agent" in client.get("/knowledge").text
    page = client.get("/knowledge", params={"agent": "researcher"})
    assert page.status_code == 200 and "queue-runbook.md" in page.text
    doc = client.get("/knowledge", params={"agent": "researcher", "document": ids["runbook"]})
    body = text_of(doc.text)
    assert "queue-runbook.md · version 2" in body
    assert "drained by four workers" in body and "written in version 2" in body
    unknown = client.get("/knowledge", params={"agent": "researcher", "document": "nope"})
    assert unknown.status_code == 400 and "has no document" in unknown.text


def test_knowledge_page_shows_a_document_s_versions_and_each_one_s_chunks(
    tmp_path: Path,
) -> None:
    db_path = tmp_path / "docs.db"
    sections = {
        "Queue": "The queue is drained by three workers.",
        "Paging": "Page the on-call after 5 failures.",
        "Backups": "Backups run nightly at 02:00.",
    }
    runbook = "\n\n".join(f"# {title}\n\n{body}" for title, body in sections.items())
    with SessionManager("ops", db_path=db_path, embedder=HashEmbedder()) as mgr:
        mgr.ingest(text=runbook, name="runbook.md")  # version 1: three chunks
        mgr.ingest(text=runbook.replace("three", "four"), name="runbook.md")  # re-writes one
        changed = runbook.replace("three", "four").replace("02:00", "03:00")
        document = mgr.ingest(text=changed, name="runbook.md").document_id  # and another
    app = create_app(open_source(db_path), token=TOKEN, hosts=["testserver"])
    with TestClient(app) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        base = {"agent": "ops", "document": document}
        body = text_of(c.get("/knowledge", params=base).text)
        assert "runbook.md · version 3 · 3 chunks" in body
        assert "3 (current) 1 show them 2 1 show them 1 1 show them" in body
        assert "gone from the store" in body  # what ingest does not keep, said
        first = text_of(c.get("/knowledge", params={**base, "version": 1}).text)
        assert "The 1 chunk version 1 wrote" in first and "Page the on-call" in first
        assert "three workers" not in first and "four workers" not in first  # (replaced)
        third = text_of(c.get("/knowledge", params={**base, "version": 3}).text)
        assert "03:00" in third and "four workers" not in third
        beyond = c.get("/knowledge", params={**base, "version": 4})
        assert beyond.status_code == 400
        assert "The version must be between 0 and 3" in beyond.text


def test_pools_page_lists_grants_and_a_pool_s_log(client: TestClient) -> None:
    page = client.get("/pools")
    assert page.status_code == 200
    body = text_of(page.text)
    assert "ops" in body and "auditor" in body and "owner" in body
    log = client.get("/pools", params={"pool": "ops"})
    assert "The log of ops" in log.text and "auditor" in text_of(log.text.split("The log of")[1])


def test_health_page(client: TestClient) -> None:
    page = client.get("/health")
    assert page.status_code == 200
    body = text_of(page.text)
    assert "Embedding backlog" in body and "Schema" in body
    assert "researcher" in body and "sessions" in body
    assert "Worker lag none: nothing waits" in body
    assert "Last worker error none recorded" in body
    assert "Vector index in the store" in body


def test_health_page_shows_how_long_the_backlog_has_waited(tmp_path: Path) -> None:
    db_path = tmp_path / "backlog.db"
    with SessionManager("a", db_path=db_path, embedder=HashEmbedder(), background=False) as m:
        m.record_fact(m.start_session("work").id, "waits for its vector")
    app = create_app(open_source(db_path), token=TOKEN, hosts=["testserver"])
    with TestClient(app) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        body = text_of(c.get("/health").text)
    assert "2 events waiting for vectors" in body
    assert re.search(r"Worker lag the oldest waiting event was recorded \d+ s ago", body)


def test_static_files_are_served(client: TestClient) -> None:
    htmx = client.get("/static/htmx.min.js")
    assert htmx.status_code == 200 and "htmx" in htmx.text[:2000]
    assert client.get("/static/htmx.LICENSE").status_code == 200
    assert client.get("/static/ui.css").status_code == 200


# -- security ----------------------------------------------------------------------------


def test_no_token_is_refused(store: tuple[Path, dict[str, str]]) -> None:
    app = create_app(open_source(store[0]), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as anonymous:
        for path in ("/", "/sessions", "/search?q=x", "/restore", "/static/ui.css"):
            response = anonymous.get(path)
            assert response.status_code == 401, path
            assert "needs its token" in response.text
        assert anonymous.get("/sessions", params={"token": "wrong"}).status_code == 401
        anonymous.cookies.set(cookie_name(TOKEN), "wrong")
        assert anonymous.get("/sessions").status_code == 401


def test_the_token_becomes_a_strict_http_only_cookie(
    store: tuple[Path, dict[str, str]],
) -> None:
    app = create_app(open_source(store[0]), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as visitor:
        first = visitor.get("/sessions", params={"token": TOKEN, "q": "queue"})
        assert first.status_code == 303
        assert first.headers["location"] == "/sessions?q=queue"  # the token left the address
        cookie = first.headers["set-cookie"]
        assert f"{cookie_name(TOKEN)}={TOKEN}" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert visitor.get("/sessions?q=queue").status_code == 200  # the cookie is enough


def test_the_token_redirect_stays_on_this_server(store: tuple[Path, dict[str, str]]) -> None:
    app = create_app(open_source(store[0]), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as visitor:
        response = visitor.get("http://testserver//evil.example/x", params={"token": TOKEN})
        assert response.status_code == 303
        assert response.headers["location"] == "/evil.example/x"


def test_an_unexpected_error_is_a_page_without_a_traceback(
    store: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = open_source(store[0])

    def broken(**_: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(source, "sessions", broken)
    app = create_app(source, token=TOKEN, hosts=["testserver"])
    with TestClient(app, raise_server_exceptions=False) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        page = c.get("/sessions")
    assert page.status_code == 500
    assert "Unexpected RuntimeError" in page.text
    assert "secret internals" not in page.text and "Traceback" not in page.text


def test_a_wrong_host_is_refused(store: tuple[Path, dict[str, str]]) -> None:
    app = create_app(open_source(store[0]), token=TOKEN, hosts=["127.0.0.1:8760"])
    with TestClient(app, base_url="http://evil.example:8760", follow_redirects=False) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        response = c.get("/sessions", params={"token": TOKEN})
        assert response.status_code == 403
        assert "evil.example" in response.text
    app = create_app(open_source(store[0]), token=TOKEN, hosts=["127.0.0.1:8760"])
    with TestClient(app, base_url="http://127.0.0.1:8760", follow_redirects=False) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        assert c.get("/sessions").status_code == 200


def test_every_answer_carries_the_security_headers(client: TestClient) -> None:
    response = client.get("/sessions")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "same-origin"


def test_no_route_writes(client: TestClient, ids: dict[str, str]) -> None:
    """Read-only: no route takes a POST, PUT, PATCH or DELETE (405 or 404, never a write)."""
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for path in ("/", "/sessions", f"/sessions/{ids['main']}", "/search", "/restore"):
            response = client.request(method, path)
            assert response.status_code in (404, 405), (method, path)
    app = client.app
    methods = {
        method
        for route in app.routes  # type: ignore[attr-defined]
        for method in (getattr(route, "methods", None) or ())
    }
    assert methods <= {"GET", "HEAD"}


def _assert_inert(html: str) -> None:
    """No hostile string appears unescaped: no live <script>, no injected attribute."""
    assert HOSTILE[0] not in html
    assert HOSTILE[1] not in html
    assert "<script>alert" not in html
    assert not re.search(r"""\son\w+=alert""", html.replace("&#34; onerror", ""))
    assert 'href="javascript:' not in html and 'src="javascript:' not in html
    assert len(re.findall(r"<script\b", html)) <= 2  # htmx and ui.js, nothing else


def test_hostile_content_renders_as_text_everywhere(
    client: TestClient, ids: dict[str, str]
) -> None:
    pages = {
        "sessions": client.get("/sessions").text,
        "timeline": client.get(f"/sessions/{ids['hostile']}").text,
        "search": client.get("/search", params={"q": "hostile content", "k": 5}).text,
        "restore": client.get("/restore", params={"session": ids["hostile"], "budget": 3000}).text,
        "search by key": client.get("/search", params={"q": "alert", "mode": "keyword"}).text,
        "users": client.get("/users", params={"agent": HOSTILE[0], "user": HOSTILE[1]}).text,
        "knowledge": client.get("/knowledge", params={"agent": HOSTILE[0]}).text,
        "health": client.get("/health").text,
        "pools": client.get("/pools", params={"pool": HOSTILE[2]}).text,
    }
    for name, html in pages.items():
        _assert_inert(html)
        assert ESCAPED[0] in html, name  # shown, as text
    timeline = pages["timeline"]
    assert ESCAPED[1] in timeline  # the attribute-breaking string, as text
    assert f'<span class="role">{ESCAPED[0]}</span>' in timeline  # metadata's role
    assert f'<span class="tag">{ESCAPED[2]}</span>' in timeline  # a tag
    assert f"agent <b>{ESCAPED[0]}</b>" in timeline  # the agent id
    assert f"<b>{ESCAPED[1]}</b></a>" in timeline  # the user id (a link to their facts)
    assert "user=%22+onerror%3Dalert%281%29+x%3D%22" in timeline  # (in the link: URL-encoded)
    assert f"key <b>{ESCAPED[0]}</b>" in timeline  # the session key
    assert "&#34;html&#34;: &#34;&lt;script&gt;" in timeline  # the payload, pretty-printed
    assert f"source: {ESCAPED[1]}" in pages["users"]  # a fact's source
    assert ESCAPED[1] in pages["knowledge"]  # a document's name


def test_hostile_text_in_the_query_and_the_errors_is_escaped(client: TestClient) -> None:
    for params in (
        {"q": HOSTILE[0]},
        {"q": HOSTILE[1], "mode": HOSTILE[0]},
        {"q": "x", "session": HOSTILE[0]},
    ):
        html = client.get("/search", params=params).text
        _assert_inert(html)
    _assert_inert(client.get(f"/sessions/{HOSTILE[0]}").text)
    _assert_inert(client.get("/sessions", params={"status": HOSTILE[1]}).text)
    _assert_inert(client.get("/restore", params={"session": "x", "model": HOSTILE[1]}).text)


# -- scoping and read-only -----------------------------------------------------------------


def test_agent_scope_shows_only_that_agent_s_memory(store: tuple[Path, dict[str, str]]) -> None:
    db_path, ids = store
    app = create_app(open_source(db_path, agent="researcher"), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        sessions = c.get("/sessions").text
        assert "job queue" in sessions and ESCAPED[0] not in sessions
        assert c.get(f"/sessions/{ids['hostile']}").status_code == 404
        assert c.get(f"/sessions/{ids['main']}").status_code == 200
        hits = c.get("/search", params={"q": "hostile content alert", "k": 10}).text
        assert "hostile" not in text_of(hits).replace("hostile content alert", "")
        restore = c.get("/restore", params={"session": ids["hostile"], "budget": 500})
        assert restore.status_code == 404
        facts = c.get("/users", params={"agent": HOSTILE[0], "user": HOSTILE[1]})
        assert ESCAPED[0] not in facts.text.split("<main>", 1)[1]  # researcher's view only


def test_a_text_filter_looks_at_the_most_recent_sessions_unless_asked_for_all(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions_view, "SCAN", 2)  # (10,000 on a real store)
    bounded = client.get("/sessions", params={"q": "JOB QUEUE"})
    assert bounded.status_code == 200
    assert "Compare Postgres and SQLite" not in bounded.text  # older than the 2 newest
    assert "2 most recently active sessions" in bounded.text
    everything = client.get("/sessions", params={"q": "JOB QUEUE", "scan": "all"})
    assert "Compare Postgres and SQLite" in everything.text
    assert "most recently active sessions" not in everything.text
    assert "/sessions?q=JOB+QUEUE&amp;scan=all" in bounded.text  # the link that asks


def test_agent_scope_includes_the_sessions_of_pools_it_was_granted(tmp_path: Path) -> None:
    # --agent shows what the agent may read: its own sessions and those of the pools it
    # holds a grant on (the library's scope), not only its own
    db_path = tmp_path / "pools.db"
    with SessionManager("owner", db_path=db_path, embedder=HashEmbedder()) as owner:
        owner.create_pool("ops")
        pooled = owner.start_session("Rotate the ops certificates", shared_pool="ops")
        owner.record_fact(pooled.id, "The certificates expire on the first of March.")
        private = owner.start_session("Draft the owner's private notes")
        owner.grant("ops", "auditor", "read")
    with SessionManager("auditor", db_path=db_path, embedder=HashEmbedder()) as auditor:
        own = auditor.start_session("Audit the access logs")
    app = create_app(open_source(db_path, agent="auditor"), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        listed = c.get("/sessions").text
        assert pooled.id in listed and own.id in listed
        assert private.id not in listed
        assert pooled.id in c.get("/sessions", params={"q": "certificates"}).text
        assert c.get(f"/sessions/{pooled.id}").status_code == 200
        assert c.get(f"/sessions/{private.id}").status_code == 404
        hits = c.get("/search", params={"q": "certificates expire", "k": 5}).text
        assert "first of March" in hits
        restored = c.get("/restore", params={"session": pooled.id, "budget": 500})
        assert restored.status_code == 200 and "first of March" in restored.text
    with SessionManager("owner", db_path=db_path, embedder=HashEmbedder()) as owner:
        owner.revoke("ops", "auditor")
    app = create_app(open_source(db_path, agent="auditor"), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        assert pooled.id not in c.get("/sessions").text
        assert c.get(f"/sessions/{pooled.id}").status_code == 404


def _snapshot(db_path: Path) -> list[str]:
    with StoreAdmin(db_path) as admin:
        return [json_line(record) for record in admin.export()]


def test_browsing_changes_nothing_in_the_store(tmp_path: Path) -> None:
    db_path = tmp_path / "sessions.db"
    ids = build(db_path)
    before = _snapshot(db_path)
    recalled = [json.loads(line) for line in before if '"recall_count"' in line]
    assert any(record["recall_count"] for record in recalled)  # (searches above counted)
    app = create_app(open_source(db_path), token=TOKEN, hosts=["testserver"])
    with TestClient(app) as c:
        c.cookies.set(cookie_name(TOKEN), TOKEN)
        c.get("/sessions")
        for session in ids.values():
            c.get(f"/sessions/{session}")
            c.get("/restore", params={"session": session, "budget": 800, "budget2": 3000})
            c.get("/restore", params={"session": session, "budget": 800, "query": "Postgres"})
        for mode in ("hybrid", "semantic", "keyword"):
            c.get("/search", params={"q": "Postgres queue", "mode": mode, "k": 20})
        c.get("/users", params={"agent": "researcher", "user": "u-42"})
        c.get("/knowledge", params={"agent": "researcher"})
        c.get("/health")
        c.get("/pools", params={"pool": "ops"})
    assert _snapshot(db_path) == before


def test_a_rule_ranked_for_a_request_says_so(tmp_path: Path) -> None:
    """A standing rule hybrid search ranked for a request (search/rules.py) shows 'rule #N'
    beside its ranks: it may have come up by that list alone."""
    db_path = tmp_path / "rules.db"
    rule = "Please always give version numbers when you recommend a library."
    with SessionManager("agent", db_path, embedder=HashEmbedder()) as mgr:
        sid = mgr.start_session(goal="Build the expense tracker").id
        mgr.add_message(sid, "user", f"The login form works now. {rule} Next, the dark mode.")
        for n in range(12):
            mgr.add_message(sid, "assistant", f"PDF reports need a report library, part {n}.")
        mgr.flush()
    app = create_app(open_source(db_path), token=TOKEN, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as client:
        client.cookies.set(cookie_name(TOKEN), TOKEN)
        page = client.get(
            "/search",
            params={"q": "Which library should I use for PDF reports?", "k": 5, "session": sid},
        )
        assert page.status_code == 200
        assert "rule #1" in page.text and "version numbers" in page.text
        plain = client.get("/search", params={"q": "PDF reports library", "k": 5, "session": sid})
        assert "rule #" not in plain.text
