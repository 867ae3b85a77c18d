"""No pattern in the project ends with ``$`` (issue 12, section 8): ``re.match(r"^x$", "x\\n")`` matches, because ``$``
also matches before a final newline (and before every newline under ``re.M``). Match whole values with
``re.fullmatch`` or end a pattern with ``\\Z``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP = {".venv", "node_modules", "cdk.out", "reports", ".git", "build", "dist"}


def _python_files() -> list[Path]:
    """Every Python file of the project but this one (its samples show the fault on purpose)."""
    here = Path(__file__).resolve()
    return [p for p in REPO.rglob("*.py") if not SKIP.intersection(p.relative_to(REPO).parts) and p != here]


def _dollar_anchored(tree: ast.AST) -> list[tuple[int, str]]:
    """String literals ending in an unescaped ``$`` (optionally followed by closing groups); f-string text is
    output (a price), not a pattern."""
    in_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in in_fstrings
            and re.search(r"(?<!\\)\$\)*\Z", node.value)
        ):
            found.append((node.lineno, node.value))
    return found


def test_no_string_in_the_project_is_a_dollar_anchored_pattern() -> None:
    files = _python_files()
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {value!r}"
        for path in files
        for line, value in _dollar_anchored(ast.parse(path.read_text(encoding="utf-8")))
    ]

    assert len(files) > 20, "the scan must see the project's Python files"
    assert offenders == [], "use re.fullmatch or \\Z instead of $:\n" + "\n".join(offenders)


def test_the_check_finds_the_fault_it_is_about() -> None:
    sample = 'import re\n_ID = re.compile(r"^[a-z]{1,8}$")\nNAME = "(x|y$)"\nOK = r"price in \\$"\nF = f"{1}$"\n'

    assert sorted(line for line, _ in _dollar_anchored(ast.parse(sample))) == [2, 3]
    assert re.match(r"^[a-z]{1,8}$", "pay\n"), "the fault itself: $ matches before a final newline"
    assert not re.fullmatch(r"[a-z]{1,8}", "pay\n")
