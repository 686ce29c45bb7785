"""`memlane export --format yaml` and its import: the same records as JSON Lines, losslessly."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from memlane import SessionManager
from memlane.cli import cli
from memlane.testing import HashEmbedder

# Strings YAML would read as something else, and text that is hard to write in YAML.
TRICKY = [
    "yes", "No", "on", "~", "null", "", " ", "1e3", "0x10", "0o17", "012", ".inf", "-.nan",
    "2024-01-01", "2024-01-01T10:00:00Z", "12:30:00", "- item", "key: value", "# comment",
    "&anchor", "*alias", "!tag", "%", "@x", "`x", "'quoted'", '"double"', "a\nb\n", "tab\there",
    "bell\x07", "del\x7f", "nbsp\u00a0", "line\u2028sep", "bom\ufeff", "emoji 🦜", "ünïcödé",
    "trailing space ", "\tleading tab", "---", "...", "a" * 5000,
]  # fmt: skip


def asm(db: Path, *args: str, input: bytes | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--db", str(db), *args], input=input, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def build(db: Path) -> None:
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("YAML round trip", user_id="u1", metadata={"yes": "no"})
        for i, text in enumerate(TRICKY):
            mgr.record(
                session.id,
                "fact",
                f"value {i}: {text}" if not text.strip() else text,
                payload={"text": text, "n": [i, 2**62, -1.5e-7, 0.1, True, None, {"": text}]},
                tags=[(text.strip() or "blank")[:200]],
                metadata={"t": text, "i": i},
            )
        mgr.remember("u1", "Lives in Oslo", key="city")
        mgr.search("yes", k=3)


def test_yaml_export_round_trips_losslessly(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    build(db)
    as_json = asm(db, "export").stdout_bytes
    as_yaml = asm(db, "export", "--format", "yaml").stdout_bytes
    assert as_yaml.startswith(b"---\n") and as_yaml != as_json
    assert asm(db, "export", "--format", "yaml").stdout_bytes == as_yaml  # the same bytes
    documents = list(yaml.safe_load_all(as_yaml))
    assert documents[0] == {
        "type": "header",
        "format": "memlane/export",
        "version": 1,
    }
    (yaml_file := tmp_path / "dump.yaml").write_bytes(as_yaml)
    copy = tmp_path / "copy.db"
    imported = asm(copy, "import", str(yaml_file))
    assert f"{len(TRICKY) + 3} event(s)" in imported.stdout
    assert asm(copy, "export").stdout_bytes == as_json  # lossless, byte for byte
    again = tmp_path / "again.db"
    asm(again, "import", "-", input=as_yaml)  # stdin too
    assert asm(again, "export").stdout_bytes == as_json


def test_a_broken_yaml_file_names_its_line(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    build(db)
    text = asm(db, "export", "--format", "yaml").stdout
    lines = text.splitlines()
    broken = "\n".join([*lines[:12], "  bad: [unclosed", *lines[12:]]) + "\n"
    result = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "new.db"), "import", "-"], input=broken
    )
    assert result.exit_code != 0
    assert "not valid YAML at line" in result.output
