"""Sizes in the dev tooling ``effectively_once_local`` (issue 29, item 1; STYLE.md house rules 8 and 9): no function
over 60 lines and no module over 600, measured as in tests/unit/test_function_length.py (a function's whole ``def``,
docstring included: ``end_lineno - lineno + 1``). The constructs and the runtime have the same two tests
(tests/unit/test_function_length.py, tests/runtime/test_function_length.py)."""

from __future__ import annotations

from ..unit.helpers import REPO
from ..unit.test_function_length import MAX_LINES, long_functions, long_modules

MODULES = sorted((REPO / "tools" / "effectively_once_local").rglob("*.py"))


def test_no_tooling_function_is_longer_than_60_lines() -> None:
    offenders = long_functions(MODULES)

    assert offenders == {}, f"functions over {MAX_LINES} lines (name: lines): {offenders}"


def test_no_tooling_module_is_longer_than_600_lines() -> None:
    assert len(MODULES) > 40
    assert long_modules(MODULES) == {}
