"""The built docs site as a reader sees it: no raw Sphinx markup on any page, and the API pages' cross-references are
links (``scripts/griffe_roles.py``, mkdocs.yml's mkdocstrings ``extensions``). The site is built once, strict, into a
temporary folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
    assert "<em>Default:</em> <code>lambda_.Runtime.PYTHON_3_14</code>" in page


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
