"""The built docs site as a reader sees it (issue 34, items 2 and 3). The site is built once, strict, into a temporary
folder, and served over http as ``make docs-serve`` serves it.

- No page shows raw Sphinx markup, and the API pages' cross-references are links (``scripts/griffe_roles.py``).
- It works offline: no page loads anything from outside the site, the diagram renders from the site's own
  mermaid.js (``scripts/mkdocs_hooks.py``), and search answers.
- At 1,400 px, no table or code block is wider than its column and no identifier breaks across lines.

The browser checks drive Debian's Chromium with Playwright (``make chromium``); without it they skip, or fail when
``CI`` is set.
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import griffe
import pytest

from .helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))
from griffe_roles import SphinxRoles, api_roots  # noqa: E402

ROLES = ("default", "class", "func", "meth", "attr", "data", "exc", "mod", "obj")
_RAW_ROLE = re.compile(rf":(?:{'|'.join(ROLES)}):")
_CODE = re.compile(r"<pre\b.*?</pre>|<code\b.*?</code>", re.DOTALL)


def raw_roles(html: str) -> list[str]:
    """The raw roles a page shows as text (code blocks and code spans, where a page may quote one, left out), each
    with what follows it."""
    text = _CODE.sub("<code/>", html)
    return [text[match.start() : match.end() + 30] for match in _RAW_ROLE.finditer(text)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)]
    done = subprocess.run(build, cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_no_page_shows_a_raw_role(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    found = {page.relative_to(site).as_posix(): roles for page in pages if (roles := raw_roles(page.read_text()))}

    assert len(pages) > 20
    assert found == {}


def test_raw_roles_are_found_outside_code_only() -> None:
    page = "<p>(:class:<code>ProcessingQueue</code>) :default: <code>0</code></p><pre><code>:default: x</code></pre>"

    assert [found.split("<", 1)[0] for found in raw_roles(page)] == [":class:", ":default: "]
    assert raw_roles("<p>see <code>:default:</code></p>") == []


def test_api_cross_references_are_links_and_defaults_are_shown(site: Path) -> None:
    page = (site / "api" / "constructs" / "index.html").read_text()

    assert re.search(r'<a class="autorefs autorefs-internal"[^>]*href="#effectively_once\.ProcessingQueue"', page)
    assert re.search(r"<em>Default:</em> <code( class=\"word\")?>lambda_\.Runtime\.PYTHON_3_14</code>", page)


def test_the_extension_renders_the_pages_modules(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        '"""Use :class:`Thing` or :func:`~pkg.helper`, not :func:`_hidden` or :class:`Other`."""\n'
        "from ._impl import Thing\n"
        '__all__ = ["Thing", "helper"]\n'
        "def helper() -> None:\n"
        '    """Help. :default: none."""\n'
        "def _hidden() -> None:\n"
        '    """Hidden."""\n'
    )
    (package / "_impl.py").write_text(
        'class Thing:\n    """A thing; see :meth:`go`."""\n    def go(self) -> None:\n        """Go."""\n'
    )
    extensions = griffe.load_extensions(SphinxRoles(roots=["pkg"]))
    loaded = griffe.load("pkg", search_paths=[tmp_path], extensions=extensions)

    assert loaded.docstring is not None
    assert loaded.docstring.value == (
        "Use [`Thing`][pkg._impl.Thing] or [`helper`][pkg.helper], not `_hidden` or `Other`."
    )
    assert loaded["helper"].docstring.value == "Help. *Default:* none."
    assert loaded["_impl.Thing"].docstring.value == "A thing; see [`go`][pkg._impl.Thing.go]."


def test_the_api_pages_render_the_modules_the_extension_links() -> None:
    assert api_roots() == [
        "effectively_once",
        "effectively_once.testing",
        "effectively_once.powertools_layer",
        "effectively_once_runtime",
        "effectively_once_runtime.names",
    ]


# --- no outside loads, offline diagrams, search, layout at 1,400 px ------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
WIDTH = 1400
_OUTSIDE = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(?:[a-z]+:)?//[^\"]*\"", re.IGNORECASE)

# Per page: the tables and code blocks wider than the space they are shown in, and the inline code spans without a
# space that the browser laid out over more than one line (a broken identifier: "removal_polic/y").
MEASURE = """() => {
  const root = document.querySelector(".md-content") || document.body;
  const overflowing = [...root.querySelectorAll("pre > code, table")]
    .filter((el) => el.scrollWidth > el.clientWidth + 1)
    .map((el) => `${el.tagName} ${el.scrollWidth}px in ${el.clientWidth}px: ${el.textContent.slice(0, 60)}`);
  const broken = [...root.querySelectorAll("code")]
    .filter((el) => !el.closest("pre") && !/\\s/.test(el.textContent) && el.getClientRects().length > 1)
    .map((el) => el.textContent);
  return { overflowing, broken };
}"""


def outside_loads(html: str) -> list[str]:
    """The scripts, stylesheets, images and frames a page's HTML loads from another host."""
    return _OUTSIDE.findall(html)


def test_no_page_loads_a_script_or_stylesheet_from_outside_the_site(site: Path) -> None:
    found = {
        page.relative_to(site).as_posix(): hits
        for page in site.rglob("*.html")
        if (hits := outside_loads(page.read_text()))
    }

    assert found == {}
    assert outside_loads('<script src="https://unpkg.com/mermaid@11/dist/mermaid.min.js"></script>')
    assert outside_loads('<link rel="stylesheet" href="//fonts.googleapis.com/css">')
    assert not outside_loads('<script src="../javascripts/mermaid.min.js"></script>')


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The built site over http on a free loopback port, as ``make docs-serve`` serves it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        reason = f"no {CHROMIUM}: `make chromium` installs Debian's chromium package"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: a skipped browser test fails CI)", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    flags = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=[*flags, "--disable-component-update", "--disable-sync"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any, served: str) -> Iterator[Any]:
    """A 1,400 px wide tab that lets only the site's own requests through; ``page.outside`` lists the others."""
    tab = browser.new_page(viewport={"width": WIDTH, "height": 1000})
    tab.outside = []

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if url.startswith(served):
            request_route.continue_()
        else:
            tab.outside.append(url)
            request_route.abort()

    tab.route("**/*", route)
    yield tab
    tab.close()


def _pages(site: Path) -> list[str]:
    return sorted(p.parent.relative_to(site).as_posix().removeprefix(".") for p in site.rglob("index.html"))


def test_every_page_fits_at_1400_px_and_loads_nothing_from_outside(site: Path, served: str, page: Any) -> None:
    found = {}
    for path in _pages(site):
        page.goto(f"{served}/{path}/" if path else f"{served}/", wait_until="load")
        layout = page.evaluate(MEASURE)
        if layout["overflowing"] or layout["broken"] or page.outside:
            found[path or "(home)"] = {**layout, "outside": list(page.outside)}
        page.outside.clear()

    assert len(_pages(site)) > 20
    assert found == {}


def test_the_measure_finds_a_broken_identifier_and_an_overflowing_block(page: Any) -> None:
    page.set_content(
        '<div class="md-content"><table><tr><td style="width:60px;word-break:break-word">'
        "<code>removal_policy_of_the_table</code></td></tr></table>"
        '<pre style="width:100px;overflow:auto"><code style="display:block;overflow:auto">'
        + "x" * 300
        + "</code></pre></div>"
    )

    layout = page.evaluate(MEASURE)

    assert layout["broken"] == ["removal_policy_of_the_table"]
    assert len(layout["overflowing"]) == 1 and layout["overflowing"][0].startswith("CODE ")


def test_the_diagram_renders_offline_from_the_sites_own_mermaid(served: str, page: Any) -> None:
    """The theme swaps the diagram's ``pre.mermaid`` (its source text) for a ``div.mermaid`` holding the SVG in a
    closed shadow root; without mermaid.js the page would ask unpkg.com for it, and keep the text."""
    page.goto(f"{served}/constructs/", wait_until="load")
    page.wait_for_selector("div.mermaid", state="attached", timeout=30_000)

    assert page.evaluate("() => typeof mermaid") == "object"
    assert page.locator("pre.mermaid").count() == 0
    assert page.evaluate("() => document.querySelector('div.mermaid').getBoundingClientRect().height") > 100
    assert page.outside == []


def test_search_answers_on_the_served_site(served: str, page: Any) -> None:
    page.goto(f"{served}/", wait_until="load")
    page.fill("[data-md-component=search-query]", "visibility timeout")
    # The theme's "No matching documents" matches /matching document/ too, and then the count is 0 (one CI run of a
    # clean clone): wait for "1 matching document" or "N matching documents".
    page.wait_for_function(
        "() => /[0-9]+ matching document/.test(document.querySelector('.md-search-result__meta')?.textContent ?? '')",
        timeout=30_000,
    )

    assert page.locator(".md-search-result__item").count() > 0
    assert page.outside == []
