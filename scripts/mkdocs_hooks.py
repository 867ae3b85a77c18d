"""mkdocs hooks (mkdocs.yml ``hooks``): the site works offline, opened from ``make docs-serve`` with no network.

Diagrams: mkdocs-material renders a ``mermaid`` code block with mermaid.js, which it fetches from unpkg.com when the
page is viewed unless the page already defines ``mermaid``. This hook ships mermaid.js pinned from npm
(package.json's ``mermaid``, in ``node_modules`` after ``make setup``) into the site as
``javascripts/mermaid.min.js``, and each page that has a diagram loads it from there (pages without one load
nothing). No page loads a script or a stylesheet from outside the site (tests/unit/test_site.py).

Identifiers: an inline code span without a space (a name, a flag, a path) gets the class ``word``, which
docs/stylesheets/extra.css keeps on one line; browsers otherwise break one at a hyphen or a slash
(``--crash-after-/effect``), and the theme anywhere (``removal_polic/y``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

REPO = Path(__file__).resolve().parent.parent
MERMAID_SOURCE = REPO / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
MERMAID_URI = "javascripts/mermaid.min.js"
_DIAGRAM = '<pre class="mermaid">'
_WORD = re.compile(r"<code>(?P<text>[^<\s]+)</code>")


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    if not MERMAID_SOURCE.is_file():
        raise PluginError(f"no {MERMAID_SOURCE}: the diagrams' mermaid.js is pinned in package.json: run make setup")
    files.append(File.generated(config, MERMAID_URI, abs_src_path=str(MERMAID_SOURCE)))
    return files


def on_post_page(output: str, page: Page, config: Any, **kwargs: Any) -> str:
    """Whole words for the inline code spans without a space; a page with a diagram loads the site's mermaid.js
    before the theme's script looks for ``mermaid``."""
    output = _WORD.sub(r'<code class="word">\g<text></code>', output)
    if _DIAGRAM not in output:
        return output
    script = f'<script src="{get_relative_url(MERMAID_URI, page.url)}"></script>'
    head, _, tail = output.rpartition("</head>")
    return f"{head}{script}</head>{tail}"
