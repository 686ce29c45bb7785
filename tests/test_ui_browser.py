"""memlane ui in a real browser: Debian's headless Chromium (chromium-headless-shell, which
.ci/run installs) driven by playwright against the real server (uvicorn in a thread, on a
free port). htmx updates the hits and the restore preview in place, a folded payload opens,
times are written in local time, and hostile content in every field never runs a script.

Screenshots go to the test's folder; those of docs/ui.md and the README are taken by
scripts/ui_screenshots.py (run here too, into a temporary folder) against its demo store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

pytest.importorskip("starlette", reason="memlane ui needs the [ui] extra")
pytest.importorskip("playwright", reason="the browser tests need playwright (the dev extra)")

from playwright.sync_api import Browser, Page, sync_playwright

from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder
from memlane.ui import Inspector, Source

from .conftest import REPO
from .ui_store import HOSTILE, build

pytestmark = pytest.mark.browser

CHROMIUM = Path(os.environ.get("MEMLANE_CHROMIUM", "/usr/lib/chromium/chromium-headless-shell"))
if not CHROMIUM.exists():
    pytest.skip(
        f"no headless Chromium at {CHROMIUM}: apt-get install chromium-headless-shell "
        "(or point MEMLANE_CHROMIUM at one)",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Inspector, dict[str, str]]]:
    db_path = tmp_path_factory.mktemp("ui-browser") / "sessions.db"
    ids = build(db_path)
    source = Source(StoreAdmin(db_path, embedder=HashEmbedder(), read_only=True))
    inspector = Inspector(source, port=0)
    inspector.start()
    yield inspector, ids
    inspector.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, server: tuple[Inspector, dict[str, str]]) -> Iterator[Page]:
    """A fresh page that has visited the printed URL (the token became its cookie), and
    fails the test if any dialog (``alert``) opens or the page logs an error."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    opened = context.new_page()
    dialogs: list[str] = []
    errors: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    opened.goto(server[0].url)
    assert opened.url.endswith("/sessions")  # the token left the address
    yield opened
    context.close()
    assert dialogs == [], f"a script ran: {dialogs}"
    assert errors == [], errors


def base(server: tuple[Inspector, dict[str, str]]) -> str:
    return server[0].url.split("/?", 1)[0]


def screenshot(page: Page, name: str, folder: Path) -> None:
    shot = folder / name
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 5_000


def mark_page(page: Page) -> None:
    """A mark that a full page load would wipe: its survival shows htmx swapped a part."""
    page.evaluate("window.__stayed = true")


def stayed(page: Page) -> Any:
    return page.evaluate("window.__stayed === true")


def test_typing_a_query_shows_hits_in_place(
    page: Page, server: tuple[Inspector, dict[str, str]], tmp_path: Path
) -> None:
    page.click("nav >> text=Search")
    page.wait_for_url("**/search")
    query = page.locator("input[name=q]")
    page.wait_for_selector("input[name=q]:focus", timeout=3000)  # autofocus
    mark_page(page)
    query.fill("Postgres production queue")
    query.press("Enter")
    page.wait_for_selector("ol.hits li")
    hits = page.locator("ol.hits li")
    assert "Postgres 16" in hits.first.inner_text()
    assert "keyword #1" in hits.first.inner_text()
    assert stayed(page), "the page reloaded: htmx did not swap the hits in"
    assert "q=Postgres" in page.url  # the address follows (hx-push-url)
    page.select_option("select[name=mode]", "keyword")
    query.fill("billing")
    query.press("Enter")
    page.wait_for_selector("ol.hits li >> text=billing service")
    assert "semantic #" not in page.locator("#hits").inner_text()
    assert stayed(page)
    query.fill("Postgres production queue")
    page.select_option("select[name=mode]", "hybrid")
    query.press("Enter")
    page.wait_for_selector("p.summary >> text=hybrid")
    page.fill("input[name=where]", "not json")
    query.press("Enter")
    page.wait_for_selector("#hits .error")
    assert "not JSON" in page.locator("#hits").inner_text()
    page.fill("input[name=where]", "")
    query.press("Enter")
    page.wait_for_selector("p.summary >> text=hybrid")
    screenshot(page, "ui-search.png", tmp_path)


def test_slash_jumps_to_the_query(page: Page, server: tuple[Inspector, dict[str, str]]) -> None:
    page.goto(f"{base(server)}/search?q=Postgres")
    page.locator("input[name=q]").blur()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.name") == "q"
    assert page.locator("input[name=q]").input_value() == "Postgres"  # not typed into


def test_restore_preview_follows_the_budget(
    page: Page, server: tuple[Inspector, dict[str, str]], tmp_path: Path
) -> None:
    ids = server[1]
    page.goto(f"{base(server)}/restore?session={ids['main']}&budget=2000&budget2=120")
    # The second budget's column comes with its own request, after the page.
    page.wait_for_selector("section.restore-column[data-budget='120'] b.used")
    assert page.locator("section.restore-column").count() == 2
    assert page.locator("section.restore-column.later").count() == 0
    second = page.locator("section.restore-column[data-budget='120']")
    assert 0 < int(second.locator("b.used").inner_text().replace(",", "")) <= 120
    mark_page(page)
    budget = page.locator("input[name=budget]")
    budget.fill("90")
    budget.press("Enter")
    page.wait_for_selector("section.restore-column h2 >> text=Budget 90 tokens")
    page.wait_for_selector("section.restore-column[data-budget='120'] b.used")
    assert stayed(page)
    first = page.locator("section.restore-column").first
    used = int(first.locator("b.used").inner_text().replace(",", ""))
    assert 0 < used <= 90
    assert "dropped" in first.inner_text()
    screenshot(page, "ui-restore.png", tmp_path)
    budget.fill("-5")
    budget.press("Enter")
    page.wait_for_selector("#restore-result .error")
    assert "max_tokens must be a positive integer" in page.locator("#restore-result").inner_text()
    assert stayed(page)


def test_a_folded_payload_opens(page: Page, server: tuple[Inspector, dict[str, str]]) -> None:
    page.goto(f"{base(server)}/sessions/{server[1]['main']}")
    payload = page.locator("details.json", has_text="payload").first
    body = payload.locator("pre")
    assert not body.is_visible()
    payload.locator("summary").click()
    assert body.is_visible()
    assert '"table": "t399"' in body.inner_text()
    long_text = page.locator("details.fold", has_text="Paragraph 0").first
    long_text.locator("summary").click()
    assert "Paragraph 39" in long_text.locator("pre").inner_text()


def test_times_are_local_with_utc_on_hover(
    page: Page, server: tuple[Inspector, dict[str, str]]
) -> None:
    first = page.locator("time").first
    assert first.get_attribute("title", timeout=2000).endswith("UTC")  # type: ignore[union-attr]
    page.wait_for_function("!document.querySelector('time[data-local]')")
    assert "UTC" not in first.inner_text()


def test_hostile_content_never_runs(page: Page, server: tuple[Inspector, dict[str, str]]) -> None:
    """Every page that shows the hostile session, with every fold open: no dialog opens (the
    page fixture fails the test if one does), and the strings are there, as text."""
    ids = server[1]
    at = base(server)
    for path in (
        "/sessions",
        f"/sessions/{ids['hostile']}",
        "/search?q=hostile+content&k=10",
        "/search?q=alert&mode=keyword",
        f"/restore?session={ids['hostile']}&budget=3000",
        "/users?" + urlencode({"agent": HOSTILE[0], "user": HOSTILE[1]}),
        "/knowledge?" + urlencode({"agent": HOSTILE[0]}),
        "/health",
        "/pools?" + urlencode({"pool": HOSTILE[2]}),
    ):
        page.goto(at + path)
        for summary in page.locator("details > summary").all():
            summary.click()
        text = page.locator("main").inner_text()
        assert HOSTILE[0] in text, path
        assert page.evaluate("document.querySelectorAll('main script').length") == 0
        assert page.evaluate("document.querySelectorAll('[onerror]').length") == 0
        assert page.evaluate("document.querySelectorAll('a[href^=\"javascript:\"]').length") == 0
    timeline = f"{at}/sessions/{ids['hostile']}"
    page.goto(timeline)
    assert set(page.locator(".role").all_inner_texts()) == set(HOSTILE)  # metadata's roles
    # hover and click what shows user text: nothing runs
    page.locator(".tag").first.hover()
    page.locator(".event .content").first.click()
    page.wait_for_timeout(200)


def test_a_write_asks_first_then_happens(browser: Browser, tmp_path: Path) -> None:
    """With --allow-write: the timeline's "Delete session…" leads to a page that asks, and
    only its button deletes."""
    db_path = tmp_path / "sessions.db"
    ids = build(db_path)
    source = Source(StoreAdmin(db_path, embedder=HashEmbedder()))  # writable
    inspector = Inspector(source, port=0)
    inspector.start()
    try:
        context = browser.new_context()
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(inspector.url)
        page.goto(inspector.url.split("/?", 1)[0] + f"/sessions/{ids['long']}")
        page.click("text=Delete session…")
        page.wait_for_selector("h1 >> text=Delete this session?")
        with StoreAdmin(db_path) as admin:
            assert admin.session(ids["long"]).events == 232  # asking deleted nothing
        page.click("button.danger")
        page.wait_for_selector("h1 >> text=Done")
        assert "and its 232 events" in page.locator("main").inner_text()
        page.goto(inspector.url.split("/?", 1)[0] + f"/sessions/{ids['long']}")
        assert "Not found" in page.locator("h1").inner_text()
        assert dialogs == []
        context.close()
    finally:
        inspector.stop()


def test_the_screenshot_script_shoots_every_page(tmp_path: Path) -> None:
    """scripts/ui_screenshots.py (docs/images) builds its demo store and shoots each page."""
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "ui_screenshots.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MEMLANE_CHROMIUM": str(CHROMIUM)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shots = sorted(path.name for path in tmp_path.glob("*.png"))
    assert shots == sorted(
        f"ui-{name}.png"
        for name in (
            "sessions", "timeline", "search", "restore", "users", "knowledge", "pools", "health"
        )
    )  # fmt: skip
    assert all(path.stat().st_size > 20_000 for path in tmp_path.glob("*.png"))
    linked = (REPO / "docs" / "ui.md").read_text()
    assert all(f"images/{name}" in linked for name in shots)  # each one shown in the docs
