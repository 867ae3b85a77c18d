"""The README stays short and every page of the docs site is reachable: each ``docs/`` page is in mkdocs.yml's nav
and each nav entry is a page (``make docs`` builds the site itself, strict)."""

from __future__ import annotations

import re
from pathlib import Path

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


# --- tables: every row has its header's cells -----------------------------------------------------------------------

#: A table's delimiter row (``|---|:---:|``), the line under its header.
_DELIMITER = re.compile(r"\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?")
_FENCE = re.compile(r"(`{3,}|~{3,})")
_SNIPPET = re.compile(r'--8<--\s+"([^"]+)"')


def _separators(row: str) -> list[int]:
    """Where ``row`` (stripped) splits into cells, as the ``tables`` extension splits it: at each pipe that is not
    escaped (``\\|``) and not inside a code span (a backtick run up to the next run of the same length)."""
    found, i = [], 0
    while i < len(row):
        if row[i] == "\\":
            i += 2
            continue
        if row[i] == "`":
            run = re.match(r"`+", row[i:])
            assert run is not None
            close = re.compile(rf"(?<!`){run.group()}(?!`)").search(row, i + len(run.group()))
            i = close.end() if close else i + len(run.group())
            continue
        if row[i] == "|":
            found.append(i)
        i += 1
    return found


def cell_count(row: str) -> int:
    """The cells of a table row: its splits plus one, a leading and a trailing pipe being the row's edges."""
    text = row.strip()
    splits = _separators(text)
    edges = (1 if splits[:1] == [0] else 0) + (1 if splits and splits[-1] == len(text) - 1 and len(text) > 1 else 0)
    return len(splits) + 1 - edges


def tables(text: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """Each markdown table of ``text`` (outside fenced code): its header and its other rows with their line numbers.
    A table's rows run to the next blank line, as the ``tables`` extension reads them: a paragraph glued under a table
    is rows of it."""
    lines, found, fence = text.splitlines(), [], ""
    i = 0
    while i < len(lines):
        header = lines[i].strip()
        if fence:  # inside fenced code, up to a fence of its own character at least as long
            fence = "" if header.startswith(fence) and not header.strip(fence[0]) else fence
            i += 1
            continue
        if opened := _FENCE.match(header):
            fence, i = opened[1], i + 1
            continue
        if not (_separators(header) and i + 1 < len(lines) and _DELIMITER.fullmatch(lines[i + 1].strip())):
            i += 1
            continue
        rows, i = [], i + 1
        while i < len(lines) and lines[i].strip():
            rows.append((i + 1, lines[i].strip()))
            i += 1
        found.append((header, rows))
    return found


def uneven_rows(text: str) -> list[str]:
    """Each row of a table of ``text`` whose cells are not its header's: its line number, the counts and its start."""
    return [
        f"line {number}: {got} cells, its header {want}: {row[:60]}"
        for header, rows in tables(text)
        for want in [cell_count(header)]
        for number, row in rows
        if (got := cell_count(row)) != want
    ]


def _site_sources() -> list[Path]:
    """Every page under ``docs/`` and each file a page includes (``--8<-- "path"``, pymdownx.snippets)."""
    pages = sorted(DOCS.rglob("*.md"))
    included = {REPO / m.group(1) for p in pages for m in _SNIPPET.finditer(p.read_text(encoding="utf-8"))}
    return pages + sorted(included)


def test_every_table_row_has_its_headers_cells() -> None:
    sources = _site_sources()
    found = {p.relative_to(REPO).as_posix(): rows for p in sources if (rows := uneven_rows(p.read_text("utf-8")))}

    assert REPO / "examples" / "orders" / "README.md" in sources
    assert sum(len(tables(p.read_text("utf-8"))) for p in sources) > 50, "the scan sees the site's tables"
    assert found == {}


def test_uneven_rows_are_found_and_escaped_or_quoted_pipes_are_not_cells() -> None:
    table = "| a | b |\n|---|:---:|\n| `x | y` | a \\| b |\n| ``c ` | d`` | e |\n"

    assert uneven_rows(table) == []
    assert uneven_rows("| a | b |\n|---|---|\n| 1 | 2 | | glued text\non a second line\n\nafter\n") == [
        "line 3: 4 cells, its header 2: | 1 | 2 | | glued text",
        "line 4: 1 cells, its header 2: on a second line",
    ]
    assert uneven_rows("a | b\n--- | ---\n1 | 2 | 3\n") == ["line 3: 3 cells, its header 2: 1 | 2 | 3"]
    assert uneven_rows("```text\n| a | b |\n|---|---|\n| 1 |\n```\n") == []
    assert [cell_count(row) for row in ("| a |", "a", "|", "a | b |", "| a \\|")] == [1, 1, 1, 2, 1]


# --- commands run in the checkout say whose Python runs them --------------------------------------------------------

#: The tooling run bare (``python -m``, not ``.venv/bin/python -m``) on an app of the checkout (``examples/``).
_CHECKOUT_RUN = re.compile(r"(?<![\w/.])python3? -m effectively_once_local [^\n]*--app-dir examples/")
_ACTIVATE = ".venv/bin/activate"


def unactivated_runs(text: str) -> list[str]:
    """Each command of ``text`` (its lines continued with ``\\`` joined) that runs the tooling bare on an app of the
    checkout with no activation of its ``.venv`` (:data:`_ACTIVATE`) before it on the page: its start, spaces as one.
    Run so in a fresh shell, ``python`` is not the checkout's, and the command is not found or not this one."""
    joined = text.replace("\\\n", " ")
    return [
        " ".join(m.group().split())[:60] for m in _CHECKOUT_RUN.finditer(joined) if _ACTIVATE not in joined[: m.start()]
    ]


def test_every_command_run_in_the_checkout_activates_its_venv_first() -> None:
    pages = [*_site_sources(), *sorted((REPO / "examples").glob("*/README.md"))]
    found = {p.relative_to(REPO).as_posix(): runs for p in pages if (runs := unactivated_runs(p.read_text("utf-8")))}

    assert found == {}


def test_a_bare_run_before_any_activation_is_found() -> None:
    run = "python -m effectively_once_local chaos \\\n  --app-dir examples/orders --stack OrdersExample\n"

    assert unactivated_runs(run) == ["python -m effectively_once_local chaos --app-dir examples/"]
    assert unactivated_runs(f"```bash\n. .venv/bin/activate\n{run}```\n") == []
    assert unactivated_runs(run.replace("python", ".venv/bin/python")) == []
    assert unactivated_runs(f"{run}then `. .venv/bin/activate`") != []
    assert unactivated_runs(run.replace("examples/orders", ".")) == [], "an app of one's own: its own venv"
