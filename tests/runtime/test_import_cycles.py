"""No import circles in the runtime package ``effectively_once_runtime`` (STYLE.md house rule 7: a circle means a
definition sits in the wrong module).

The graph is read from the source (AST) with the reader of the constructs' test (tests/unit/test_import_cycles.py):
every ``import`` and ``from ... import`` counts, at module level, inside functions and under ``if TYPE_CHECKING:``
(a type-only import is an edge too: ``consumer`` and ``sqs_batch`` once imported each other that way).
"""

from __future__ import annotations

from pathlib import Path

from ..unit.helpers import REPO
from ..unit.test_import_cycles import _imported, cycles

PACKAGE = "effectively_once_runtime"
ROOT = REPO / "lambda_src" / PACKAGE


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: the modules of the package at ``root`` it imports}, module names as ``<root's name>.<path>``."""

    def name(path: Path) -> str:
        parts = path.relative_to(root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name(path): path for path in sorted(root.rglob("*.py"))}
    known = set(modules)
    return {module: _imported(module, path, known) for module, path in modules.items()}


def test_runtime_has_no_import_cycles() -> None:
    assert cycles(import_graph(ROOT)) == []


def test_the_graph_holds_the_runtime_modules() -> None:
    graph = import_graph(ROOT)

    assert f"{PACKAGE}.sqs_batch" in graph[f"{PACKAGE}.consumer"]
    assert f"{PACKAGE}.consumer" not in graph[f"{PACKAGE}.sqs_batch"]
    assert f"{PACKAGE}.effects._context" in graph[f"{PACKAGE}.effects.http"]


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("", encoding="utf-8")
    for name, source in files.items():
        (root / name).write_text(source, encoding="utf-8")
    return root


def test_fails_on_a_circle_made_of_a_type_only_import(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "consumer.py": "from .batch import Batch\n",
            "batch.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .consumer import Consumer\n",
        },
    )

    assert cycles(import_graph(root)) == [["pkg.batch", "pkg.consumer"]]


def test_fails_on_a_circle_made_of_a_deferred_import(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"a.py": "from . import b\n", "b.py": "def late():\n    from . import a\n    return a\n"},
    )

    assert cycles(import_graph(root)) == [["pkg.a", "pkg.b"]]


def test_a_one_way_pair_is_no_circle(tmp_path: Path) -> None:
    root = _package(tmp_path, {"a.py": "from .b import B\n", "b.py": "class B: ...\n"})

    assert import_graph(root)["pkg.a"] == {"pkg.b"}
    assert cycles(import_graph(root)) == []
