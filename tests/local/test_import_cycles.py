"""No import circles in the local tooling (house rule 7: a circle means a definition sits in the wrong module).

Walks every module of ``effectively_once_local`` with ``ast``: every import, the ones inside functions included (a
lazy import is how a circle hides), resolved to the package's own modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import effectively_once_local

PACKAGE = "effectively_once_local"
ROOT = Path(effectively_once_local.__file__).resolve().parent


def _own_imports(name: str, tree: ast.AST, modules: set[str], packages: set[str]) -> set[str]:
    """The package's own modules that module ``name`` imports, anywhere in it (``packages``: the names that are
    folders, whose relative imports start from themselves)."""
    package = name if name in packages else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            found.add(base)
            # `from . import effects`: the name is a module.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in modules and m != name}


def import_graph(sources: dict[str, str], packages: set[str] | None = None) -> dict[str, set[str]]:
    """``{module: the package's modules it imports}`` for ``{module name: source}``; ``packages`` names the folders
    (:default: the top package alone)."""
    modules = set(sources)
    folders = packages if packages is not None else {PACKAGE}
    return {name: _own_imports(name, ast.parse(source), modules, folders) for name, source in sources.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (``[a, b, ..., a]``), or ``None``."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def _package_sources() -> tuple[dict[str, str], set[str]]:
    sources, packages = {}, set()
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
            packages.add(".".join((PACKAGE, *parts)))
        sources[".".join((PACKAGE, *parts))] = path.read_text(encoding="utf-8")
    return sources, packages


def test_effectively_once_local_has_no_import_cycle() -> None:
    sources, packages = _package_sources()
    graph = import_graph(sources, packages)

    assert len(sources) > 15, "the walk must see the package's modules"
    assert sum(len(edges) for edges in graph.values()) > 30, "the walk must see the package's own imports"
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_walk_finds_a_cycle_through_a_lazy_import() -> None:
    sources = {
        f"{PACKAGE}.report": "from .chaos import X\ndef f():\n    from .backlog import render\n",
        f"{PACKAGE}.backlog": "from effectively_once_local.report import DlqMessage\n",
        f"{PACKAGE}.chaos": "import json\n",
        f"{PACKAGE}.demo": "from . import chaos\n",
    }
    graph = import_graph(sources)

    assert graph[f"{PACKAGE}.demo"] == {f"{PACKAGE}.chaos"}
    assert find_cycle(graph) == [f"{PACKAGE}.backlog", f"{PACKAGE}.report", f"{PACKAGE}.backlog"]
