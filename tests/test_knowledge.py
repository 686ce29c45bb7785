"""Knowledge documents: the chunker's window, ingest and re-ingest, delete, bad input."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlane import DocumentNotFound, InvalidInput, SessionManager
from memlane.testing import HashEmbedder
from memlane.text.chunking import Chunk, chunk_markdown, estimate_tokens

RUNBOOK = """# Runbook

The payments service runs on three hosts behind the load balancer.

## Rotate keys

Run the rotation job every ninety days; it re-encrypts the vault.

## Deploy

Deploys go through the canary first.

```
make deploy  # a fenced block stays whole

# not a heading inside a fence
```

Then watch the error rate for ten minutes.
"""


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text)


def markdown(rng: random.Random) -> str:
    """A document with headings at random depths, paragraphs of every length, long words."""
    parts = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.4:
            parts.append(
                "#" * rng.randint(1, 4)
                + " "
                + " ".join(rng.choices(["Setup", "Über", "API", "v2"], k=3))
            )
        length = rng.choice([3, 20, 120, 700])
        text = " ".join(
            rng.choice(
                ["deploy", "the", "canary,", "naïve", "x" * rng.randint(1, 90), "日本語", "ok."]
            )
            for _ in range(length)
        )
        parts.append(text)
    return "\n\n".join(parts)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_every_chunk_fits_and_nothing_is_lost(seed: int) -> None:
    text = markdown(random.Random(seed))
    chunks = chunk_markdown(text, estimate_tokens, 64)
    for chunk in chunks:
        assert estimate_tokens(chunk.embedded) <= 62, chunk
        assert chunk.text.strip()
    body = [w for line in text.splitlines() if not line.startswith("#") for w in words(line)]
    assert [w for c in chunks for w in words(c.text)] == body


def test_headings_path_and_fences() -> None:
    chunks = chunk_markdown(RUNBOOK)
    assert [c.headings for c in chunks] == [
        ("Runbook",),
        ("Runbook", "Rotate keys"),
        ("Runbook", "Deploy"),
    ]
    assert chunks[1].embedded.startswith("Runbook > Rotate keys\n\n")
    assert "# not a heading inside a fence" in chunks[2].text


@pytest.mark.real_model
def test_chunks_fit_minilms_own_window() -> None:
    from memlane import MiniLMEmbedder

    model = MiniLMEmbedder()
    rng = random.Random(5)
    for _ in range(20):
        for chunk in chunk_markdown(markdown(rng), model.count_tokens, model.max_tokens):
            assert model.count_tokens(chunk.embedded) + 2 <= 256


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it embeds (the worker's and the queries')."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def __call__(self, texts: Sequence[str], /) -> Any:
        self.texts += len(texts)
        return super().__call__(texts)


def test_ingest_again_embeds_only_what_changed(make_manager: Any) -> None:
    embedder = CountingEmbedder()
    mgr = make_manager(embedder=embedder)
    first = mgr.ingest(text=RUNBOOK, name="runbook.md")
    assert (first.version, first.added, first.unchanged, first.removed) == (1, 3, 0, 0)
    mgr.flush()
    embedded = embedder.texts
    again = mgr.ingest(text=RUNBOOK, name="runbook.md")
    assert (again.version, again.added, again.unchanged, again.removed) == (1, 0, 3, 0)
    mgr.flush()
    assert embedder.texts == embedded  # nothing to embed
    edited = mgr.ingest(text=RUNBOOK.replace("ninety", "thirty"), name="runbook.md")
    assert (edited.version, edited.added, edited.unchanged, edited.removed) == (2, 1, 2, 1)
    mgr.flush()  # (the background worker may have embedded it already: count, don't race)
    assert embedder.texts == embedded + 1  # the edited paragraph only
    (hit,) = mgr.search("rotation job days", k=1, kinds=["knowledge"])
    assert "thirty" in hit.event.content and hit.event.metadata["headings"] == [
        "Runbook",
        "Rotate keys",
    ]
    assert hit.event.metadata["document"] == "runbook.md" and hit.event.metadata["chunk"] == 1
    for mode in ("keyword", "semantic"):
        assert "ninety" not in " ".join(
            h.event.content for h in mgr.search("ninety days", k=5, mode=mode)
        )
    assert mgr.delete_document(first.document_id) == 3
    assert mgr.search("rotation job", k=5, kinds=["knowledge"]) == []
    with pytest.raises(DocumentNotFound) as error:
        mgr.delete_document(first.document_id)
    assert isinstance(error.value, KeyError)


def test_a_file_and_a_custom_chunker(mgr: SessionManager, tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text(RUNBOOK, encoding="utf-8")
    result = mgr.ingest(path, metadata={"team": "payments"})
    assert result.name == str(path.resolve()) and result.added == 3
    (hit,) = mgr.search("canary", k=1, kinds="knowledge", where={"team": "payments"})
    assert hit.event.metadata["document"] == result.name
    custom = mgr.ingest(
        text="a b c", name="x", chunker=lambda t: ["one part", Chunk("two", ("H",))]
    )
    assert custom.added == 2


def test_shared_through_a_pool_only(make_manager) -> None:  # type: ignore[no-untyped-def]
    owner = make_manager("owner")
    owner.create_pool("team")
    owner.grant("team", "reader")
    reader = make_manager("reader", subscribe=["team"])
    stranger = make_manager("stranger")
    shared = owner.ingest(text=RUNBOOK, name="runbook", pool="team")
    owner.ingest(text="Private notes about the vault.", name="notes")
    assert reader.search("canary", k=1, kinds="knowledge")
    assert stranger.search("canary", k=1, kinds="knowledge") == []
    listed = owner.documents()
    assert [(d.name, d.version, d.chunks, d.pool) for d in listed] == [
        ("notes", 1, 1, None),
        ("runbook", 1, 3, "team"),
    ]
    assert [d.document_id for d in reader.documents()] == [shared.document_id]
    assert stranger.documents() == []
    owner.ingest(text=RUNBOOK.replace("canary", "blue-green"), name="runbook", pool="team")
    (runbook,) = [d for d in owner.documents() if d.name == "runbook"]
    assert (runbook.version, runbook.chunks) == (2, 3)


def test_bad_input_writes_nothing(mgr: SessionManager, tmp_path: Path) -> None:
    latin = tmp_path / "latin.md"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    cases = [
        ({}, "exactly one"),
        ({"source": "x.md", "text": "y"}, "exactly one"),
        ({"source": tmp_path / "missing.md"}, "not a file"),
        ({"source": tmp_path}, "not a file"),
        ({"source": latin}, "not UTF-8"),
        ({"text": "no name"}, "name="),
        ({"text": "   ", "name": "blank"}, "empty"),
        ({"text": "x", "name": "n", "chunker": lambda t: ["ok", ""]}, "chunk 1"),
        ({"text": "x", "name": "n", "chunker": lambda t: [3]}, "chunk 0"),
        ({"text": "x", "name": "n", "metadata": ["a"]}, "metadata"),
    ]
    for arguments, named in cases:
        with pytest.raises(InvalidInput) as error:
            mgr.ingest(**arguments)  # type: ignore[arg-type]
        assert named in str(error.value), (arguments, str(error.value))
    with pytest.raises(InvalidInput, match=r"latin\.md"):
        mgr.ingest(latin)
    assert mgr.events(None, kinds="knowledge") == []


def test_restore_cites_relevant_chunks_when_asked(mgr: SessionManager) -> None:
    mgr.ingest(text=RUNBOOK, name="runbook.md")
    session = mgr.start_session("Rotate the payment keys")
    mgr.add_message(session.id, "user", "when do we rotate keys?")
    ctx = mgr.restore(session.id, 600, query="key rotation every ninety days")
    assert "## Reference" in ctx.text
    assert "- knowledge (runbook.md#1): Runbook > Rotate keys" in ctx.text
    (share,) = [s for s in ctx.report.shares if s.section == "reference"]
    assert 0 < share.used <= share.offered
    assert "## Reference" not in mgr.restore(session.id, 600).text  # no query: not asked
    assert "## Reference" in mgr.restore(session.id, 600, knowledge=True).text
    assert "## Reference" not in mgr.restore(session.id, 600, query="keys", knowledge=False).text
    for budget in (80, 200, 1000, 4000):
        small = mgr.restore(session.id, budget, query="deploy canary", other_sessions=True)
        assert small.token_count <= budget
        ids = small.report.included_ids()
        assert len(ids) == len(set(ids))


def test_the_docs_name_the_fields_documents_have() -> None:
    """docs/memory.md lists DocumentInfo's and IngestResult's fields by their names (the
    README said ``id`` for ``document_id``: issue 28, D9)."""
    import dataclasses

    from memlane import DocumentInfo, IngestResult

    readme = (Path(__file__).resolve().parent.parent / "docs" / "memory.md").read_text()
    for cls in (DocumentInfo, IngestResult):
        listed = re.search(rf"\(`{cls.__name__}`:\s*([^)]*)\)", readme)
        assert listed is not None, cls.__name__
        names = re.findall(r"`(\w+)`", listed.group(1))
        assert names, listed.group(1)
        assert set(names) <= {field.name for field in dataclasses.fields(cls)}, names


def test_a_long_code_block_is_cut_between_its_lines() -> None:
    """Issue 29: a fenced block too long for one chunk was cut at sentence ends, which in
    code are anywhere (`{"read":` / `5})`); it is cut between lines now."""
    lines = [f'    client.call("tool_{i}", {{"read": {i}, "write": {i + 1}}})' for i in range(80)]
    text = "# API\n\n```python\n" + "\n".join(lines) + "\n```\n"
    chunks = chunk_markdown(text, estimate_tokens, window=128)
    assert len(chunks) > 2
    pieces = [line for chunk in chunks for line in chunk.text.split("\n")]
    assert [p for p in pieces if p.startswith("    client")] == lines  # every line whole


def test_a_citation_keeps_its_chunk_number_however_long_the_name(mgr: SessionManager) -> None:
    name = "handbook/" + "very-long-section-name-" * 6 + "rotation.md"
    mgr.ingest(text="# Keys\n\nWe rotate the API keys every 90 days.", name=name)
    session = mgr.start_session("answer a question about keys")
    text = mgr.restore(session.id, 2_000, query="how often do we rotate keys?").text
    label = re.search(r"- knowledge \(([^)]*)\)", text)
    assert label is not None, text
    assert label.group(1).endswith("rotation.md#0") and len(label.group(1)) <= 52
