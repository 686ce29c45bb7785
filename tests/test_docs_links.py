"""Every relative link in README.md, CHANGELOG.md and docs/**/*.md points at a file that
exists, and a ``#fragment`` into a Markdown page names one of its headings (as GitHub makes
them). Links to the web are not followed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import REPO

_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^()\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def pages() -> list[Path]:
    found = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]
    return [page for page in found if page.exists()]


def _prose(text: str) -> str:
    """The page without its code: fenced blocks and inline code hold no links."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def links(page: Path) -> list[str]:
    return [
        target
        for target in _LINK.findall(_prose(page.read_text(encoding="utf-8")))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and where.suffix == ".md" and fragment not in anchors(where):
            broken.append(f"{target} (no heading #{fragment} in {where.name})")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_the_slugs_are_githubs() -> None:
    assert slug("6. Restore") == "6-restore"
    assert slug("Search in memory, fed in commit order (issue 12)") == (
        "search-in-memory-fed-in-commit-order-issue-12"
    )
    assert slug("`record()`: the write path") == "record-the-write-path"
    assert slug("Layers → checked") == "layers--checked"
