"""Chroma as the vector index when it fails (issue 9, items 10 and 12): reads fail loudly or
degrade visibly, deletes the index missed are retried from the log, a lost index is rebuilt.

A real `chroma run` server is stopped and started again on the same port and folder."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import SessionManager, StoreUnavailable
from memlane.engine.storage import PENDING_DELETES
from memlane.testing import HashEmbedder

from .servers import free_port

pytestmark = pytest.mark.chroma


class ChromaProcess:
    """`chroma run` on a fixed port and folder, so it can be stopped and started again."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.port = folder, free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"chroma+http://127.0.0.1:{self.port}"

    def start(self) -> None:
        chroma = Path(sys.executable).parent / "chroma"
        args = [str(chroma), "run", "--path", str(self.folder), "--host", "127.0.0.1"]
        with open(self.folder.parent / "chroma.log", "ab") as log:
            self.proc = subprocess.Popen(
                [*args, "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.5),
            ):
                return
            time.sleep(0.2)
        raise RuntimeError("chroma run did not start within 60 s")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(20)
            self.proc = None


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[ChromaProcess]:
    server = ChromaProcess(tmp_path / "chroma")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_an_unreachable_index_fails_loudly_and_deletes_wait_for_it(
    tmp_path: Path, chroma: ChromaProcess
) -> None:
    db = tmp_path / "log.db"
    mgr = SessionManager("a", db, index=chroma.url, embedder=HashEmbedder(), background=False)
    try:
        keep = mgr.start_session("orchids and their light")
        mgr.record_fact(keep.id, "orchids need indirect light")
        doomed = mgr.start_session("cacti and their water")
        mgr.record_fact(doomed.id, "cacti need little water")
        mgr.flush()
        chroma.stop()
        # semantic search asked for vectors: an error that says so, never an empty answer
        with pytest.raises(StoreUnavailable, match="Chroma index"):
            mgr.search("orchid light", mode="semantic")
        # hybrid (the default) answers by keyword, and health() says why
        hits = mgr.search("orchids indirect light", k=3)
        assert hits and hits[0].event.content == "orchids need indirect light"
        assert "Chroma" in (mgr.health().index_error or "") and not mgr.health().ok
        # the log's delete happens; the index's is kept for later, not reported as a failure
        assert mgr.delete_session(doomed.id) == 2
        pending = json.loads(mgr._writer.log.get_meta(PENDING_DELETES) or "[]")
        assert len(pending) == 2  # the goal's and the fact's vectors
        chroma.start()
        mgr._writer.storage.maintenance()  # what the worker runs: the missed delete goes through
        assert mgr._writer.log.get_meta(PENDING_DELETES) == "[]"
        collections = mgr._writer.storage.vectors._all_collections()  # type: ignore[attr-defined]
        assert all(not c.get(where={"session": doomed.id})["ids"] for c in collections)
        assert mgr.search("orchid light", mode="semantic")[0].event.session_id == keep.id
        assert mgr.health().ok
    finally:
        mgr.close()


def test_a_lost_index_is_rebuilt_from_the_log(tmp_path: Path, chroma: ChromaProcess) -> None:
    """Before: an emptied Chroma was silently re-created and every older event had no vector
    until someone ran `memlane reindex` (320 of 1,721 in the trial)."""
    db = tmp_path / "log.db"
    with SessionManager(
        "a", db, index=chroma.url, embedder=HashEmbedder(), background=False
    ) as mgr:
        session = mgr.start_session("notes on plants")
        for i in range(30):
            mgr.record_fact(session.id, f"plant {i} needs {['sun', 'shade', 'water'][i % 3]}")
        mgr.flush()
        index = mgr._writer.storage.vectors
        for collection in index._all_collections():  # type: ignore[attr-defined]
            index._client.delete_collection(collection.name)  # type: ignore[attr-defined]
        index._collections.clear()  # type: ignore[attr-defined]  (the index loses everything)
        assert mgr._writer.storage.audit() == 31  # the goal and 30 facts queued again
        mgr.flush()
        hits = mgr.search("plant 7 needs", k=3, mode="semantic")
        assert "plant 7 needs" in hits[0].event.content
        assert mgr._writer.storage.audit() == 0
