"""The README stays a one-page entry: short, and every page it links exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_readme_is_one_page_and_its_links_resolve():
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links, "the README links the docs"
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing, f"README links to missing files: {missing}"


def test_docs_links_resolve():
    missing = []
    for page in (REPO / "docs").glob("*.md"):
        for link in re.findall(r"\]\(([^)#:]+\.md)\)", page.read_text()):
            if not (page.parent / link).exists():
                missing.append(f"{page.name} -> {link}")
    assert not missing, missing
