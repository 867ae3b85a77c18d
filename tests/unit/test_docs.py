"""The README stays short and every page of the docs site is reachable: each ``docs/`` page is in mkdocs.yml's nav
and each nav entry is a page (``make docs`` builds the site itself, strict)."""

from __future__ import annotations

import re

from .helpers import DOCS, REPO

README_MAX_BYTES = 15_500


def _nav_pages() -> list[str]:
    """The pages mkdocs.yml's ``nav:`` block names (read as text: mkdocs.yml carries a ``!!python/name`` tag)."""
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = config.split("\nnav:\n", 1)[1]
    nav = re.split(r"^\S", nav, maxsplit=1, flags=re.M)[0]  # up to the next top-level key
    found = (re.fullmatch(r".*:\s+([\w./-]+\.md)\s*", line) for line in nav.splitlines())
    return [match.group(1) for match in found if match]


def test_readme_is_at_most_15_5_kb() -> None:
    size = len((REPO / "README.md").read_bytes())

    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes: move text into a docs page"


def test_every_docs_page_is_in_the_nav() -> None:
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    nav = _nav_pages()

    assert pages, "no pages under docs/"
    assert sorted(set(pages) - set(nav)) == []


def test_every_nav_entry_is_a_page_listed_once() -> None:
    nav = _nav_pages()

    assert len(nav) == len(set(nav)), nav
    assert [page for page in nav if not (DOCS / page).is_file()] == []


def test_nav_reading_can_fail() -> None:
    assert "capacity.md" in _nav_pages()
    assert "no-such-page.md" not in _nav_pages()
