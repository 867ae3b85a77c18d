"""The docs' props tables match the code (docs/constructs.md; the runtime's `Consumer` table on docs/runtime.md):
every prop of every public construct has a row, every row is a keyword-only prop, and every default (a Python
expression in backticks, or "required") equals the signature's."""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import pytest
from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

import effectively_once

from .helpers import docs_page

CONSTRUCTS_PAGE = docs_page("constructs.md")
RUNTIME_PAGE = docs_page("runtime.md")
NAMESPACE = {
    "Duration": Duration,
    "RemovalPolicy": RemovalPolicy,
    "logs": logs,
    "lambda_": lambda_,
    "None": None,
    "True": True,
    "False": False,
}
REQUIRED = "required"


def _sections() -> dict[str, str]:
    """``## Name`` sections of the Constructs page: {name: text}."""
    return {m.group(1): m.group(2) for m in re.finditer(r"^## (\w+)\n(.*?)(?=^## |\Z)", CONSTRUCTS_PAGE, re.M | re.S)}


def _props_table(section: str) -> dict[str, str]:
    """{prop: default cell} of the table whose header is ``| prop | type | default | description |``."""
    lines = section.splitlines()
    start = lines.index("| prop | type | default | description |")
    rows: dict[str, str] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[2]
    return rows


def _documented_default(cell: str) -> Any:
    if cell == REQUIRED:
        return inspect.Parameter.empty
    match = re.match(r"`([^`]+)`", cell)
    assert match, f"default cell must start with a backticked expression or say {REQUIRED!r}: {cell!r}"
    return eval(match.group(1), {"__builtins__": {}}, NAMESPACE)  # noqa: S307 - the project's own docs page


def _same(documented: Any, actual: Any) -> bool:
    if isinstance(documented, Duration) and isinstance(actual, Duration):
        return documented.to_seconds() == actual.to_seconds()
    if isinstance(documented, (lambda_.Architecture, lambda_.Runtime)):  # jsii objects: equal by name, not identity
        return type(documented) is type(actual) and documented.name == actual.name
    return type(documented) is type(actual) and documented == actual


def _props(cls: type) -> dict[str, inspect.Parameter]:
    if dataclasses.is_dataclass(
        cls
    ):  # option types (AlarmThresholds, ExistingQueue, ...): every field, factory defaults built
        return {
            f.name: inspect.Parameter(
                f.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=(
                    f.default_factory()
                    if f.default_factory is not dataclasses.MISSING
                    else inspect.Parameter.empty
                    if f.default is dataclasses.MISSING  # a required field
                    else f.default
                ),
            )
            for f in dataclasses.fields(cls)
        }
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


CONSTRUCTS = sorted(effectively_once.__all__)


def test_every_public_construct_has_a_section_with_a_props_table() -> None:
    sections = _sections()
    for name in CONSTRUCTS:
        assert name in sections, name
        assert _props_table(sections[name]), name


@pytest.mark.parametrize("name", CONSTRUCTS)
def test_props_table_lists_exactly_the_keyword_only_props(name: str) -> None:
    assert sorted(_props_table(_sections()[name])) == sorted(_props(getattr(effectively_once, name)))


@pytest.mark.parametrize("name", CONSTRUCTS)
def test_documented_defaults_match_the_signature(name: str) -> None:
    props = _props(getattr(effectively_once, name))
    wrong = {
        prop: (cell, props[prop].default)
        for prop, cell in _props_table(_sections()[name]).items()
        if prop in props and not _same(_documented_default(cell), props[prop].default)
    }
    assert wrong == {}


def test_default_comparison_can_fail() -> None:
    assert not _same(_documented_default("`Duration.days(3)`"), Duration.days(4))
    assert not _same(_documented_default("`5`"), 5.0)
    assert not _same(_documented_default("`None`: a new one"), False)
    assert not _same(_documented_default("`lambda_.Architecture.ARM_64`"), lambda_.Architecture.X86_64)
    assert not _same(_documented_default("`lambda_.Runtime.PYTHON_3_13`"), lambda_.Runtime.PYTHON_3_14)


def test_runtime_consumer_table_lists_exactly_its_keyword_arguments() -> None:
    from effectively_once_runtime import Consumer

    lines = RUNTIME_PAGE.split("\n| `Consumer` argument | type | default | meaning |\n", 1)[1].splitlines()
    documented = set()
    defaults = {}
    for line in lines[1:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        for name in re.findall(r"`(\w+)`", cells[0]):
            documented.add(name)
            defaults[name] = cells[2]
    params = {n: p for n, p in inspect.signature(Consumer).parameters.items() if p.kind is p.KEYWORD_ONLY}

    assert documented == set(params)
    for name, param in params.items():
        if param.default is inspect.Parameter.empty:
            assert defaults[name] == REQUIRED, name
        elif param.default is None or isinstance(param.default, bool):
            assert defaults[name].startswith(f"`{param.default}`"), name
