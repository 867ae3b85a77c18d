"""No function or method in the ``effectively_once`` package is longer than 60 lines (STYLE.md house rule 8: a
longer one does several things; compose it of small steps, each named after what it does), and no module is longer
than 600 lines (issue 29: a module that size holds more than one job).

The rule, as measured here: a function's length is its whole span in the source, from its ``def`` line (decorators
not included) to its last line, as Python's AST gives it (``end_lineno - lineno + 1``). Its signature, docstring,
comments and blank lines count, and so do functions nested in it (which are also measured on their own). Props
documentation belongs in the class docstring, where CDK puts it, not in ``__init__``'s. ``effectively_once.local``
(the deprecated alias of the dev tooling, now its own package ``effectively_once_local``) is not measured here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .helpers import REPO

ROOT = REPO / "constructs" / "effectively_once"
EXCLUDED = ROOT / "local"
MAX_LINES = 60
MAX_MODULE_LINES = 600


def function_lengths(source: str) -> dict[str, int]:
    """{qualified name: lines} of every function and method in ``source`` (``Class.method``, ``outer.inner``)."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                lengths[name] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def _modules() -> list[Path]:
    return [path for path in sorted(ROOT.rglob("*.py")) if not path.is_relative_to(EXCLUDED)]


def long_functions(modules: list[Path]) -> dict[str, int]:
    """``{"<path>:<qualified name>": lines}`` of every function of ``modules`` over :data:`MAX_LINES`; the runtime's
    and the tooling's size tests use it too."""
    return {
        f"{path.relative_to(REPO)}:{name}": lines
        for path in modules
        for name, lines in function_lengths(path.read_text(encoding="utf-8")).items()
        if lines > MAX_LINES
    }


def long_modules(modules: list[Path]) -> dict[str, int]:
    """``{path: lines}`` of every module of ``modules`` over :data:`MAX_MODULE_LINES`."""
    sizes = {str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines()) for path in modules}
    return {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES}


def test_no_function_is_longer_than_60_lines() -> None:
    offenders = long_functions(_modules())

    assert offenders == {}, f"functions over {MAX_LINES} lines (name: lines): {offenders}"


def test_no_module_is_longer_than_600_lines() -> None:
    assert long_modules(_modules()) == {}


def test_length_counts_the_docstring_and_nested_functions() -> None:
    source = 'class A:\n    def f(self):\n        """Doc.\n\n        More."""\n        def g():\n            pass\n'

    assert function_lengths(source) == {"A.f": 6, "A.f.g": 2}


def test_modules_are_measured_without_the_dev_tooling() -> None:
    measured = _modules()

    assert ROOT / "queue_consumer.py" in measured
    assert not any(path.is_relative_to(EXCLUDED) for path in measured)
