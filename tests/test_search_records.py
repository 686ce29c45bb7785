"""A search hit of a JSON tool output names the records its query points at (Hit.records):
the API, a JSON text output, the CLI (table and --json) and the inspector's search page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.testing import HashEmbedder

from .test_cli import as_json, asm, ok

INVOICES = {
    "data": {
        "invoices": [
            {
                "id": i,
                "customer": f"cust{i}",
                "status": "overdue" if i % 7 == 3 else "paid",
                "amount": i * 10.5,
            }
            for i in range(60)
        ]
    }
}


def record_of(line: str) -> tuple[str, dict[str, object]]:
    path, _, body = line.partition(": ")
    loaded = json.loads(body)
    assert isinstance(loaded, dict)
    return path, loaded


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "records.db"
    with SessionManager("billing", path, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session("collect overdue invoices").id
        mgr.record_tool_output(sid, INVOICES, tool="billing_api")
        # the same response passed as a pretty-printed string: read as JSON too
        mgr.record_tool_output(sid, json.dumps({"tickets": INVOICES["data"]["invoices"]}, indent=2))
        mgr.add_message(sid, "assistant", "cust23 asked about an invoice. " * 60)
    return path


def test_a_json_output_s_hit_names_the_record_its_query_points_at(db: Path) -> None:
    with SessionManager("billing", db, embedder=HashEmbedder()) as mgr:
        hits = mgr.search("status of the invoice of cust23", k=5)
        by_kind = {(hit.event.kind, hit.event.payload is None): hit for hit in hits}
        payload_hit = by_kind[("tool_output", False)]
        path, record = record_of(payload_hit.records[0])
        # the whole record, with its place in the payload: the flattened content has lost it
        assert path == "data.invoices[23]"
        assert record == INVOICES["data"]["invoices"][23]
        assert len(payload_hit.records) <= 3
        text_hit = by_kind[("tool_output", True)]
        assert record_of(text_hit.records[0]) == ("tickets[23]", record)
        # a message is no JSON output: no records
        assert by_kind[("message", True)].records == ()
        # no record holds a word of the query: none named
        assert all(hit.records == () for hit in mgr.search("zebra xylophone", k=5))


def test_records_are_ranked_by_the_words_one_of_them_holds(db: Path) -> None:
    with SessionManager("billing", db, embedder=HashEmbedder()) as mgr:
        hit = next(
            hit
            for hit in mgr.search("which invoices are overdue", k=5)
            if hit.event.payload is not None
        )
    statuses = [record_of(line)[1]["status"] for line in hit.records]
    assert statuses and set(statuses) == {"overdue"}


def test_the_cli_shows_the_records(db: Path) -> None:
    hits = as_json(asm(db, "search", "status of the invoice of cust23", "--json"))
    payload = next(hit for hit in hits if hit["payload"] is not None)
    assert payload["records"][0].startswith("data.invoices[23]: ")
    message = next(hit for hit in hits if hit["kind"] == "message")
    assert message["records"] == []
    out = ok(asm(db, "search", "status of the invoice of cust23")).stdout
    assert "of its payload" in out and "data.invoices[23]" in out


def test_the_inspector_s_search_page_shows_the_records(db: Path) -> None:
    pytest.importorskip("starlette", reason="memlane ui needs the [ui] extra")
    from starlette.testclient import TestClient

    from memlane.admin import StoreAdmin
    from memlane.ui import Source, create_app
    from memlane.ui.security import cookie_name

    token = "test-token-0123456789"
    admin = StoreAdmin(db, embedder=HashEmbedder(), read_only=True)
    app = create_app(Source(admin), token=token, hosts=["testserver"])
    with TestClient(app, follow_redirects=False) as client:
        client.cookies.set(cookie_name(token), token)
        page = client.get("/search", params={"q": "status of the invoice of cust23", "k": 5})
    assert page.status_code == 200
    assert "of its payload" in page.text and "data.invoices[23]" in page.text
    assert "&#34;customer&#34;:&#34;cust23&#34;" in page.text  # (escaped, as all content)
