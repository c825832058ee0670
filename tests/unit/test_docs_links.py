"""Every relative link of the README and the docs points at a file of the checkout, and the
README stays a front page (about two screens of an operator's terminal)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    missing = [target for target in LINK.findall(page.read_text())
               if "://" not in target and not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to missing files: {missing}"


def test_readme_is_a_front_page() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 130, f"README.md has {len(lines)} lines: move details to docs/"
