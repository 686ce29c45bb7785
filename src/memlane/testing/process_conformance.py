"""The processes-and-threads part of the conformance suite: another process that crashed
before embedding leaves its events to whoever opens the store next; several processes write
at once where the backend declares ``multi_process`` (and a second one is refused clearly
where it does not); threads share one manager.

:class:`~memlane.testing.BackendConformance` inherits these tests; they use its ``make`` and
``backend`` fixtures. The other processes run the scripts below with this interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import Any

from ..manager import SessionManager

__all__ = ["ProcessConformance"]

ManagerFactory = Callable[..., SessionManager]


def _run_child(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


_CHILD_WRITER = """
    import os, sys
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    url, index, agent, count, mode = sys.argv[1:6]
    mgr = SessionManager(agent, url=url, index=index or None, embedder=HashEmbedder(),
                         background=False)
    session = mgr.start_session(f"{agent} writes {count} facts")
    for i in range(int(count)):
        mgr.record_fact(session.id, f"{agent} fact {i} about widget {i % 7}")
    print(session.id, flush=True)
    if mode == "crash":
        os._exit(0)  # no close(), no flush(): the outbox is left for someone else
    mgr.close()
"""

_CHILD_OPEN = """
    import sys
    from memlane import SessionManager, StoreBusy
    from memlane.testing import HashEmbedder

    try:
        SessionManager("other", url=sys.argv[1], index=sys.argv[2] or None,
                       embedder=HashEmbedder(), background=False).close()
    except StoreBusy as exc:
        print("refused:", exc)
    else:
        print("opened")
"""


class ProcessConformance:
    """Processes and threads on one backend (a mixin of ``BackendConformance``)."""

    def test_crash_catch_up(self, make: ManagerFactory, backend: Any) -> None:
        make().close()  # create the schema once
        out = _run_child(_CHILD_WRITER, backend.url, backend.index or "", "crashy", "40", "crash")
        assert out.returncode == 0, out.stderr
        session_id = out.stdout.split()[0]
        mgr = make("crashy")
        assert mgr.pending_embeddings() >= 40
        mgr.flush()
        assert mgr.pending_embeddings() == 0
        assert len(mgr.events(session_id)) == 41
        hits = mgr.search("crashy fact 17 about widget 3", k=3, mode="semantic")
        assert "crashy fact 17 about widget 3" in {hit.event.content for hit in hits}

    def test_several_processes_as_declared(self, make: ManagerFactory, backend: Any) -> None:
        mgr = make("watcher")
        if not mgr.capabilities.multi_process:
            # declared single-process: a second process is refused while this one has it open
            out = _run_child(_CHILD_OPEN, backend.url, backend.index or "")
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith("refused:") and "server" in out.stdout
            return
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    textwrap.dedent(_CHILD_WRITER),
                    backend.url,
                    backend.index or "",
                    f"writer-{n}",
                    "60",
                    "close",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(3)
        ]
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
        mgr.flush()
        with backend.admin() as admin:
            stats = admin.stats()
        for n in range(3):
            assert sum(stats.events_by_agent[f"writer-{n}"].values()) == 61
        assert stats.pending_embeddings == 0 and stats.vectors == stats.events

    def test_threads_share_one_manager(self, make: ManagerFactory) -> None:
        mgr = make(background=True)
        session = mgr.start_session("threads")
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(40):
                    mgr.record_fact(session.id, f"thread {n} fact {i}")
                    if i % 10 == 0:
                        mgr.search(f"thread {n}", k=3)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        mgr.flush()
        assert len(mgr.events(session.id, kinds=["fact"])) == 160
        assert mgr.pending_embeddings() == 0
