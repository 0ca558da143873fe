"""The reference pages stay references: no section is titled by when its
work was done, and docs/performance.md stays short enough to find a figure in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))
#: A date, a month name or a "session"/"round" in a heading dates the section.
DATED = re.compile(r"\b(\d{4}-\d{2}-\d{2}|January|February|March|April|May|June|July|August|"
                   r"September|October|November|December|session|round \d)\b", re.IGNORECASE)
#: The most lines docs/performance.md may have: one table per scenario, not a notebook.
PERFORMANCE_MAX_LINES = 600


def headings(page: Path) -> list[str]:
    fenced = False
    found = []
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.append(line)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_section_is_titled_by_when_its_work_was_done(page):
    dated = [h for h in headings(page) if DATED.search(h)]
    assert not dated, f"{page.name}: headings dated: {dated}"


def test_the_performance_page_is_a_reference_of_at_most_600_lines():
    lines = len((DOCS / "performance.md").read_text().splitlines())
    assert lines <= PERFORMANCE_MAX_LINES, f"docs/performance.md has {lines} lines"


def test_the_dated_heading_check_finds_a_dated_heading(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```\n# 2026-11-20 not a heading\n```\n\n## Figures of 2026-11-20\n")
    assert headings(page) == ["# Title", "## Figures of 2026-11-20"]
    assert DATED.search(headings(page)[1])
