"""No import circles in the ``effectively_once`` package (STYLE.md house rule 7: a circle means a definition sits in
the wrong module).

The graph is read from the source (AST), not from ``sys.modules``: every ``import`` and ``from ... import`` counts,
at module level, inside functions (a deferred import hides a circle, it does not remove it) and under
``TYPE_CHECKING``. ``from . import name`` is an edge to the submodule ``name`` when there is one, else to the
package. Importing a submodule also runs its package's ``__init__``, which is not counted: ``__init__`` imports
its submodules only lazily (PEP 562). ``effectively_once.local`` (the deprecated alias of the dev tooling, now its
own package ``effectively_once_local``, walked by tests/local/test_import_cycles.py) is outside the graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .helpers import REPO

PACKAGE = "effectively_once"
ROOT = REPO / "constructs" / PACKAGE
EXCLUDED = (f"{PACKAGE}.local",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    found = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}
    return {name: path for name, path in found.items() if not name.startswith(EXCLUDED)}


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name of ``from <dots><module> import ...`` written in ``module`` (at ``path``)."""
    if node.level == 0:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports, anywhere in its source."""
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, path, node)
            submodules = {f"{source}.{alias.name}" for alias in node.names} & known
            targets.update(submodules or {source})
            # ``from .x import A, y``: when only some names are submodules, the others come from ``x`` itself.
            if submodules and len(submodules) < len(node.names):
                targets.add(source)
    return {target for target in targets if target in known and target != module}


def import_graph() -> dict[str, set[str]]:
    """{module: the package's modules it imports}, ``effectively_once.local`` left out."""
    modules = _modules()
    known = set(modules)
    return {name: _imported(name, path, known) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted, as ``[a, b, ...]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_package_has_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_graph_counts_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "pkg" / "a.py"
    module.parent.mkdir()
    module.write_text("def build():\n    from .b import B\n    return B\n", encoding="utf-8")

    assert _imported("pkg.a", module, {"pkg.a", "pkg.b"}) == {"pkg.b"}


def test_graph_leaves_out_the_dev_tooling() -> None:
    graph = import_graph()

    assert f"{PACKAGE}.queue_consumer" in graph[f"{PACKAGE}.payment_processor"]
    assert not any(name.startswith(EXCLUDED) for name in graph)


def test_cycle_detection_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert cycles(graph) == [["a", "b", "c"]]
