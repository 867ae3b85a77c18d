"""Sizes in the runtime package ``effectively_once_runtime`` (STYLE.md house rules 1, 8 and 9): no function over 60
lines, no module over 600, and the ``Consumer`` class at most 300.

A function's length is measured as in tests/unit/test_function_length.py (its whole ``def``, docstring included:
``end_lineno - lineno + 1``); a class's the same way.
"""

from __future__ import annotations

import ast

from ..unit.helpers import REPO
from ..unit.test_function_length import MAX_LINES, long_functions, long_modules

ROOT = REPO / "lambda_src" / "effectively_once_runtime"
MAX_CONSUMER_LINES = 300


def test_no_runtime_function_is_longer_than_60_lines() -> None:
    offenders = long_functions(sorted(ROOT.rglob("*.py")))

    assert offenders == {}, f"functions over {MAX_LINES} lines (name: lines): {offenders}"


def test_no_runtime_module_is_longer_than_600_lines() -> None:
    assert long_modules(sorted(ROOT.rglob("*.py"))) == {}


def test_the_consumer_class_is_at_most_300_lines() -> None:
    tree = ast.parse((ROOT / "consumer.py").read_text(encoding="utf-8"))
    [consumer] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Consumer"]

    assert (consumer.end_lineno or consumer.lineno) - consumer.lineno + 1 <= MAX_CONSUMER_LINES
