"""restore() shows a large JSON tool output by the records a query asks about (issue 31):
a JSON output's content is its payload flattened and cut at 4,000 characters, and restore
used to show the payload whole or summarised (keys and odd items), so a record past the cut
was in the context only by luck. Now the payload is read as lines of records
(text/json_records.py), cut into passages, and the records that hold the query's words are
shown — for a payload read as its preview (over 32 KB), a text output that is JSON, and a
megabyte output (its first records only; never over budget)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from memlane import SessionManager
from memlane.search.records import forget_record_views, record_view
from memlane.testing import HashEmbedder
from memlane.text import json_records
from memlane.text.json_records import PASSAGE_CHARS, VIEW_CHARS, line_spans, record_lines
from memlane.text.tokens import tokenizer_for

CITIES = ["Ghent", "Porto", "Graz", "Cork", "Turin", "Lyon", "Malmo", "Bergen", "Aarhus"]
STATUSES = ["delivered", "in_transit", "returned", "out_for_delivery"]
TOK = tokenizer_for("gpt-4o")


def shipments(count: int, held: int) -> dict[str, Any]:
    """An API response of ``count`` shipments; number ``held`` alone is held at customs in
    Ljubljana (the others go elsewhere and have other statuses)."""
    rows = []
    for i in range(count):
        rows.append(
            {
                "tracking_number": f"1Z{i:06d}X{(i * 7919) % 10_000:04d}",
                "carrier": ["DHL", "UPS", "GLS", "DPD"][i % 4],
                "destination": {"city": CITIES[i % len(CITIES)], "country": "EU"},
                "status": STATUSES[i % len(STATUSES)],
                "weight_kg": round(1 + (i * 37 % 2_500) / 100, 2),
            }
        )
    rows[held]["destination"]["city"] = "Ljubljana"
    rows[held]["status"] = "held_at_customs"
    return {"data": {"shipments": rows, "page": 1}}


QUESTION = "Which shipment to Ljubljana is held at customs? Give its tracking number."


def answer(payload: dict[str, Any], held: int) -> str:
    return str(payload["data"]["shipments"][held]["tracking_number"])


def chatter(mgr: SessionManager, sid: str, turns: int) -> None:
    for i in range(turns):
        mgr.add_message(sid, "user", f"Check on the courier dashboard, item {i}, please.")
        mgr.add_message(sid, "assistant", f"Done with item {i}: nothing unusual there.")


@pytest.fixture
def mgr(tmp_path: Any) -> Any:
    with SessionManager("courier", tmp_path / "m.db", embedder=HashEmbedder()) as manager:
        yield manager


@pytest.mark.parametrize("count", [60, 400], ids=["small-payload", "previewed-payload"])
def test_the_record_a_query_names_is_shown_past_the_flattened_cut(
    mgr: SessionManager, count: int
) -> None:
    """The held shipment sits past the 4,000 characters the content keeps, and (400 rows)
    past the 32 KB over which restore reads the payload's preview only: before, restore
    summarised the output and the tracking number was not in the context."""
    held = count * 3 // 4
    payload = shipments(count, held)
    sid = mgr.start_session("track parcels").id
    chatter(mgr, sid, 5)
    event = mgr.record_tool_output(sid, payload, tool="http GET")
    chatter(mgr, sid, 5)
    mgr.flush()
    flattened = mgr.get_event(event.id).content
    assert answer(payload, held) not in flattened  # (past the cut: the test means something)
    if count == 400:
        assert len(json.dumps(payload)) > 32_768
    ctx = mgr.restore(sid, 2_000, query=QUESTION)
    assert ctx.token_count <= 2_000
    assert answer(payload, held) in ctx.text
    item = next(item for item in ctx.report.items if item.event_id == event.id)
    assert item.action == "passages" and item.passages
    assert "ljubljana" in item.reason and "custom" in item.reason  # why: the query's words
    # the record is shown whole, on one line, with its path
    line = next(line for line in ctx.text.splitlines() if answer(payload, held) in line)
    assert line.strip().startswith(f"data.shipments[{held}]: ")
    assert json.loads(line.split(": ", 1)[1])["status"] == "held_at_customs"
    # and the block names the output and which of its passages it shows
    assert re.search(
        r"^- \[tool_output \(tool: http GET\), \d{4}-\d\d-\d\d \d\d:\d\d, [\d,]+ tokens — "
        r"passages? [\d, and-]+ of \d+(, cut)?\]$",
        ctx.text,
        re.MULTILINE,
    )


def test_without_a_query_word_in_it_the_output_keeps_its_summary(mgr: SessionManager) -> None:
    """A query none of whose words is in the output does not choose records by chance."""
    payload = shipments(400, 300)
    sid = mgr.start_session("track parcels").id
    event = mgr.record_tool_output(sid, payload, tool="http GET")
    chatter(mgr, sid, 3)
    ctx = mgr.restore(sid, 2_000, query="What did the weather forecast say for tomorrow?")
    item = next(item for item in ctx.report.items if item.event_id == event.id)
    assert item.action != "passages"
    assert ctx.token_count <= 2_000


def test_a_text_output_that_is_pretty_printed_json_is_read_as_records(
    mgr: SessionManager,
) -> None:
    """A tool that hands back its response as a string (pretty-printed: a record's name and
    its status on different lines) is shown by the record, not by the lines near a word."""
    held = 45
    payload = shipments(60, held)
    sid = mgr.start_session("track parcels").id
    chatter(mgr, sid, 5)
    event = mgr.record_tool_output(sid, json.dumps(payload, indent=2), tool="curl")
    mgr.flush()
    ctx = mgr.restore(sid, 2_000, query=QUESTION)
    assert answer(payload, held) in ctx.text
    item = next(item for item in ctx.report.items if item.event_id == event.id)
    assert item.action == "passages"
    line = next(line for line in ctx.text.splitlines() if answer(payload, held) in line)
    assert '"status":"held_at_customs"' in line and '"city":"Ljubljana"' in line


def test_a_text_output_that_only_looks_like_json_is_shown_as_text(mgr: SessionManager) -> None:
    text = "[" + " ".join(f"line {i} of the build log, step {i} passed;" for i in range(200))
    text += " the artifact was uploaded to bucket ci-artifacts-eu]"
    sid = mgr.start_session("build").id
    event = mgr.record_tool_output(sid, text, tool="ci")
    chatter(mgr, sid, 3)
    assert record_view(mgr.get_event(event.id), None) is None  # (it does not parse)
    ctx = mgr.restore(sid, 1_000, query="Which bucket was the artifact uploaded to?")
    assert "ci-artifacts-eu" in ctx.text


def test_a_megabyte_output_is_shown_by_its_first_records_within_budget(
    mgr: SessionManager,
) -> None:
    """Records are made from the first VIEW_CHARS characters only: what one output costs a
    restore is bounded, and the header says the passages are of the output's beginning."""
    payload = shipments(8_000, 7_000)  # ~1 MB
    early = payload["data"]["shipments"][40]
    early["destination"]["city"] = "Ljubljana"
    early["status"] = "held_at_customs"
    sid = mgr.start_session("track parcels").id
    event = mgr.record_tool_output(sid, payload, tool="http GET")
    chatter(mgr, sid, 3)
    mgr.flush()
    ctx = mgr.restore(sid, 2_000, query=QUESTION)
    assert ctx.token_count <= 2_000
    assert early["tracking_number"] in ctx.text
    assert re.search(r"passages? [\d, and-]+ of the first \d+", ctx.text)
    view = record_view(mgr.get_event(event.id), None)
    assert view is not None
    assert len(view.event.content) <= VIEW_CHARS + 1_000


def test_a_view_is_kept_until_an_erasure_lets_go_of_it(mgr: SessionManager) -> None:
    sid = mgr.start_session("track parcels", user_id="u-1").id
    event = mgr.get_event(mgr.record_tool_output(sid, shipments(60, 5), tool="http GET").id)
    first = record_view(event, None)
    assert first is not None and record_view(event, None) is first
    mgr.erase_user("u-1")
    assert record_view(event, None) is not first  # made again: the erasure let go of it
    forget_record_views()


# -- the lines and their passages -----------------------------------------------------------


def test_record_lines_keep_each_record_whole_and_in_order() -> None:
    payload = shipments(30, 7)
    lines, whole = record_lines(payload)
    assert whole
    rows = [line for line in lines if line.startswith("data.shipments[")]
    assert len(rows) == 30
    for i, line in enumerate(rows):
        path, text = line.split(": ", 1)
        assert path == f"data.shipments[{i}]"
        assert json.loads(text) == payload["data"]["shipments"][i]
    assert lines[-1] == "data.page: 1"


def test_record_lines_of_a_deep_value_do_not_recurse() -> None:
    deep: Any = "bottom"
    for i in range(5_000):
        deep = {f"k{i % 3}": deep, "pad": "x" * 100}
    lines, _ = record_lines(deep)
    assert lines and any('"bottom"' in line for line in lines)


@pytest.mark.parametrize(
    "key", ["a]b[c", "we\nird", "x: y", 'say "hi"', "app.version", "", "line\u2028sep"]
)
def test_a_key_that_looks_like_a_path_still_gives_one_line_and_one_passage_a_record(
    key: str,
) -> None:
    """Keys come from tools: one holding a bracket, a newline, ": ", a quote or a dot is
    written quoted, so that each record stays one line whose path names it (before, "a]b[c"
    made every record's path "a]" and packed seven records into one passage; a newline split
    a record's line in two)."""
    rows = [{"id": i, "status": "zz" if i == 5 else "ok", "pad": "p" * 40} for i in range(60)]
    payload = {key: rows, "page": 1}
    lines, whole = record_lines(payload)
    assert whole and len(lines) == 61
    assert all("\n" not in line and "\u2028" not in line for line in lines)
    text = "\n".join(lines)
    spans = line_spans(text, key=json_records.record_of)
    records = [text[start:stop] for start, stop in spans]
    assert len(records) == 61  # a passage a record (and the page)
    for i, line in enumerate(lines[:60]):
        path = json_records.record_of(line)
        assert path.endswith(f"[{i}]") and json.loads(path[: -len(f"[{i}]")]) == key
        assert json.loads(line[len(path) + 2 :]) == rows[i]


def test_a_hit_names_the_one_record_under_an_odd_key(mgr: SessionManager) -> None:
    rows = [{"id": i, "status": "zz" if i == 5 else "ok", "pad": "p" * 40} for i in range(100)]
    sid = mgr.start_session("probe").id
    event = mgr.record_tool_output(sid, {"a]b[c": rows}, tool="inventory")
    mgr.flush()
    hit = next(h for h in mgr.search("status zz", k=3, session_id=sid) if h.event.id == event.id)
    assert hit.records[0] == '"a]b[c"[5]: {"id":5,"pad":"' + "p" * 40 + '","status":"zz"}'


def test_line_spans_pack_whole_lines_and_cut_only_a_line_too_long() -> None:
    lines = [f"rows[{i}]: " + json.dumps({"id": i, "note": "n" * (i % 50)}) for i in range(200)]
    lines.insert(100, "blob: " + " ".join(["word"] * 400))  # one line of ~2,000 characters
    text = "\n".join(lines)
    spans = line_spans(text)
    assert all(stop - start <= PASSAGE_CHARS for start, stop in spans)
    assert all(text[a:b].strip() for a, b in spans)
    starts = {start for start, _ in spans}
    stops = {stop for _, stop in spans}
    for line_start in (m.end() for m in re.finditer("\n", text)):
        # every line begins a passage or lies inside one: no record is split except the blob
        assert line_start in starts or any(a < line_start < b for a, b in spans)
    # a record's line is never cut between two passages (only the blob is)
    blob_at = text.index("blob: ")
    blob_end = text.index("\n", blob_at)
    for stop in stops:
        if not blob_at < stop < blob_end:
            assert stop == len(text) or text[stop] == "\n"


def test_a_question_about_many_records_is_answered_by_each_that_holds_its_words(
    mgr: SessionManager,
) -> None:
    """Records are passages of their own: "which tests failed?" shows each failed one (11
    of 1,000), not the three passages of neighbouring records a long text would get."""
    sid = mgr.start_session("Triage the nightly test run").id
    rows = [{"test": f"suite/test_{i}", "status": "passed"} for i in range(1_000)]
    failed = list(range(100, 1_000, 87))
    for i in failed:
        rows[i]["status"] = "failed"
    event = mgr.record_tool_output(sid, {"results": rows}, tool="pytest")
    ctx = mgr.restore(sid, 1_000, query="Which tests failed last night?")
    assert ctx.token_count <= 1_000
    for i in failed:
        assert f'results[{i}]: {{"status":"failed","test":"suite/test_{i}"}}' in ctx.text
    item = next(item for item in ctx.report.items if item.event_id == event.id)
    assert item.action == "passages"
    assert {i + 1 for i in failed} <= set(item.passages)


@pytest.mark.postgres
def test_postgres_reads_a_previewed_output_whole_for_its_records(postgres_url: str) -> None:
    """The whole payload of an output read as its preview is fetched from the store: on
    PostgreSQL as on SQLite."""
    url = postgres_url + ("&" if "?" in postgres_url else "?") + "schema=json_records"
    with SessionManager("courier", url=url, embedder=HashEmbedder()) as manager:
        payload = shipments(400, 300)
        sid = manager.start_session("track parcels").id
        chatter(manager, sid, 3)
        event = manager.record_tool_output(sid, payload, tool="http GET")
        manager.flush()
        ctx = manager.restore(sid, 2_000, query=QUESTION)
        assert answer(payload, 300) in ctx.text
        item = next(item for item in ctx.report.items if item.event_id == event.id)
        assert item.action == "passages"
        # and a search hit of it names the record (Hit.records), as on SQLite
        hit = next(hit for hit in manager.search(QUESTION, k=5) if hit.event.id == event.id)
        assert answer(payload, 300) in hit.records[0]
