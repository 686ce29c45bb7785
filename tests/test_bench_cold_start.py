"""bench/cold_start.py on a tiny MiniLM store: each round empties the page cache (here a file
stands in for /proc/sys/vm/drop_caches, which only root may write) and times a fresh
process's import, open and first two searches; a store that does not exist is refused."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memlane import MiniLMEmbedder, SessionManager

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cold_start() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cold_start", REPO / "bench" / "cold_start.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.real_model
def test_each_round_empties_the_cache_and_times_a_fresh_process(
    cold_start: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path / "s.db"
    with SessionManager("bench", store, embedder=MiniLMEmbedder()) as mgr:
        session = mgr.start_session("cold start")
        for n in range(5):
            mgr.add_message(session.id, "user", f"the login page errors after fix {n}")
    drops = tmp_path / "drop_caches"
    monkeypatch.setattr(cold_start, "DROP", drops)
    monkeypatch.setattr(sys, "argv", ["cold_start.py", str(store), "--rounds", "2"])
    cold_start.main()
    out = capsys.readouterr().out
    assert drops.read_text() == "3\n"
    assert out.count("after {") == 2 and "after (median of 2):" in out
    for key in ("import_s", "open_s", "first_search_s", "second_search_ms", "start_to_answer_s"):
        assert f'"{key}": ' in out


def test_a_missing_store_is_refused(
    cold_start: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["cold_start.py", str(tmp_path / "none.db")])
    with pytest.raises(SystemExit, match="does not exist"):
        cold_start.main()
