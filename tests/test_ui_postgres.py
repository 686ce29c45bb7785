"""memlane ui on a PostgreSQL store: the pages, the library reads they use (a text filter on
sessions, a page of a timeline), opened read-only, and a store left as it was."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

pytest.importorskip("starlette", reason="memlane ui needs the [ui] extra")

from starlette.testclient import TestClient

from memlane.admin import StoreAdmin, json_line
from memlane.testing import HashEmbedder
from memlane.ui import Source, create_app
from memlane.ui.security import cookie_name

from .ui_store import ESCAPED, HOSTILE, build

pytestmark = pytest.mark.postgres

TOKEN = "pg-token-0123456789"
_schemas = itertools.count()


@pytest.fixture(scope="module")
def store(postgres_url: str) -> tuple[str, dict[str, str]]:
    joiner = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{joiner}schema=ui_{next(_schemas)}"
    return url, build(url)


@pytest.fixture(scope="module")
def client(store: tuple[str, dict[str, str]]) -> Iterator[TestClient]:
    url = store[0]
    admin = StoreAdmin(url=url, embedder=HashEmbedder(), read_only=True)
    app = create_app(Source(admin, url=url), token=TOKEN, hosts=["testserver"])
    with TestClient(app) as test_client:
        test_client.cookies.set(cookie_name(TOKEN), TOKEN)
        yield test_client


def test_the_pages_on_postgres(client: TestClient, store: tuple[str, dict[str, str]]) -> None:
    url, ids = store
    before = _export(url)
    by_text = client.get("/sessions", params={"q": "POSTGRES"})
    assert "job queue" in by_text.text and "A long run" not in by_text.text
    assert "No sessions match" in client.get("/sessions", params={"q": "100%_"}).text
    last = client.get(f"/sessions/{ids['long']}", params={"page": "last"})
    assert last.status_code == 200 and "step number 229<" in last.text
    assert "keyword #" in client.get("/search", params={"q": "Postgres production"}).text
    restore = client.get("/restore", params={"session": ids["main"], "budget": 300})
    assert restore.status_code == 200 and "Budget 300 tokens" in restore.text
    facts = client.get("/users", params={"agent": "researcher", "user": "u-42"})
    assert "Lives in Zurich" in facts.text
    hostile = client.get(f"/sessions/{ids['hostile']}")
    assert HOSTILE[0] not in hostile.text and ESCAPED[0] in hostile.text
    assert client.get("/health").status_code == 200
    assert _export(url) == before


def _export(url: str) -> list[str]:
    with StoreAdmin(url=url) as admin:
        return [json_line(record) for record in admin.export()]
