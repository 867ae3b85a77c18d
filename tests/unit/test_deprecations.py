"""Deprecations are told once: docs/deprecations.md's table. Each row is named in the CHANGELOG's ``### Deprecated``
entries of its release with the same removal version; its surface, triggered for real, raises exactly the warnings of
its row, each naming that version; no product file or docs page states a removal version the table lacks.

To add a deprecation (one small edit each):

1. a row in docs/deprecations.md's table, with a new ``id`` and the surface's name as the first code span of
   ``deprecated``;
2. a CHANGELOG entry under ``### Deprecated`` of the row's ``deprecated in`` release (``[Unreleased]`` while that
   release is not out) that names the surface and its removal version (``removed in X.Y.Z``);
3. an entry ``"<id>": <trigger>`` in :data:`TRIGGERS`: a function that uses the surface and returns what it raised,
   usually one line with :func:`_warned` (in process), :func:`_imported` (a module alias, in a fresh interpreter) or
   :func:`_synth_warnings` (the ``Annotations`` of a stack).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match

from effectively_once import (
    AsyncInvocationOptions,
    IdempotencyTable,
    IdempotentQueueConsumer,
    IdempotentQueueConsumerOptions,
    PaymentProcessor,
    ProcessingQueue,
)
from effectively_once_runtime.consumer import Consumer

from .helpers import DOCS, REPO, inline_function, new_stack

TABLE_PAGE = DOCS / "deprecations.md"
CHANGELOG = REPO / "CHANGELOG.md"
#: The product: what users import and run (not tests, docs, examples or benchmarks).
PRODUCT = (
    REPO / "constructs" / "effectively_once",
    REPO / "lambda_src" / "effectively_once_runtime",
    REPO / "tools" / "effectively_once_local",
)
#: The warning column's words: Python's two categories and CDK's synth-time ``Annotations`` warning.
CATEGORIES = ("DeprecationWarning", "FutureWarning", "synth warning")
SYNTH = "synth warning"
VERSION = re.compile(r"\b\d+\.\d+\.\d+\b")
#: A stated removal, or a default's change: "removed in 0.4.0", "until 0.4.0", "the default in 0.4.0".
STATED_REMOVAL = re.compile(r"\b(?:removed in|until|default in)\s+v?(\d+(?:\.\d+)+)")
STATED_DEPRECATION = re.compile(r"\bdeprecated in\s+v?(\d+(?:\.\d+)+)")
#: This library's synth warning ids of deprecations end so (``effectively-once:asyncInvocationDeprecated``).
SYNTH_ID = re.compile(r"effectively-once:\w+Deprecated\b")


@dataclass(frozen=True)
class Row:
    """One row of the table: ``surface`` is the first code span of its ``deprecated`` cell."""

    id: str
    surface: str
    deprecated_in: str
    removed_in: str
    categories: frozenset[str]
    synth_ids: frozenset[str]


@dataclass(frozen=True)
class Raised:
    """A warning a surface raised: ``category`` is one of :data:`CATEGORIES`."""

    category: str
    message: str


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def parse_table(text: str) -> list[Row]:
    """The rows of the table whose header starts ``| id |``.

    :raises AssertionError: no such table, or a cell without its version.
    """
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| id |"))
    header = _cells(lines[start])
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cell = dict(zip(header, _cells(line), strict=True))
        deprecated_in, removed_in = (VERSION.match(cell[name]) for name in ("deprecated in", "removed in"))
        assert deprecated_in and removed_in, f"versions are X.Y.Z at the start of their cells: {line}"
        rows.append(
            Row(
                id=cell["id"].strip("`"),
                surface=re.findall(r"`([^`]+)`", cell["deprecated"])[0],
                deprecated_in=deprecated_in.group(),
                removed_in=removed_in.group(),
                categories=frozenset(name for name in CATEGORIES if name in cell["warning"]),
                synth_ids=frozenset(SYNTH_ID.findall(cell["warning"])),
            )
        )
    return rows


def package_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])


def changelog_deprecated(text: str, version: str) -> list[str]:
    """The entries (bullets) under ``### Deprecated`` of ``version``'s section; ``[Unreleased]``'s when ``version``
    has no section yet and is later than the package's."""
    sections = dict(re.findall(r"^## \[([^\]]+)\][^\n]*\n(.*?)(?=^## \[|\Z)", text, flags=re.M | re.S))
    if version not in sections and _version(version) > _version(package_version()):
        version = "Unreleased"
    found = re.search(r"^### Deprecated\n(.*?)(?=^##|\Z)", sections.get(version, ""), flags=re.M | re.S)
    return [] if found is None else [entry for entry in re.split(r"^- ", found.group(1), flags=re.M)[1:]]


def mismatches(row: Row, raised: list[Raised]) -> list[str]:
    """What the warnings a surface raised say against its row (empty: they agree)."""
    found = []
    categories = {warning.category for warning in raised}
    if categories != row.categories:
        found.append(f"raised {sorted(categories)}, the table says {sorted(row.categories)}")
    for warning in raised:
        stated = set(STATED_REMOVAL.findall(warning.message))
        if stated != {row.removed_in}:
            found.append(f"{warning.category} states removal {sorted(stated)}, not {row.removed_in}: {warning.message}")
        others = set(VERSION.findall(warning.message)) - {row.deprecated_in, row.removed_in}
        if others:
            found.append(f"{warning.category} names other versions {sorted(others)}: {warning.message}")
    synth = " ".join(warning.message for warning in raised if warning.category == SYNTH)
    found += [f"no synth warning {id}" for id in sorted(row.synth_ids) if id not in synth]
    return found


# Triggers: each uses one deprecated surface and returns what it raised.


def _warned(build: Callable[[], object], naming: str) -> list[Raised]:
    """The ``DeprecationWarning`` and ``FutureWarning`` that ``build()`` raised whose text names ``naming`` (another
    library's warnings are not ours to check)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [
        Raised(w.category.__name__, str(w.message))
        for w in caught
        if w.category.__name__ in CATEGORIES and naming in str(w.message)
    ]


def _synth_warnings(stack: Stack) -> list[Raised]:
    """The stack's synth warnings of deprecations (their ids: :data:`SYNTH_ID`)."""
    found = Annotations.from_stack(stack).find_warning("*", Match.any_value())
    return [Raised(SYNTH, str(w.entry.data)) for w in found if SYNTH_ID.search(str(w.entry.data))]


def _imported(*modules: str) -> list[Raised]:
    """The warnings of importing ``modules`` in a fresh interpreter (a module warns at its first import only) whose
    text names the module."""
    code = (
        "import importlib, json, sys, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for name in sys.argv[1:]:\n"
        "        importlib.import_module(name)\n"
        "print(json.dumps([[w.category.__name__, str(w.message)] for w in caught]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *modules], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    caught = json.loads(done.stdout.splitlines()[-1])
    return [
        Raised(category, message)
        for category, message in caught
        if category in CATEGORIES and any(module in message for module in modules)
    ]


def _payment_processor_keywords() -> list[Raised]:
    stack = new_stack()
    raised = _warned(lambda: PaymentProcessor(stack, "Payments", batch_size=5), naming="PaymentProcessor(")
    return raised + _synth_warnings(stack)


def _queue_consumer_async_invocation() -> list[Raised]:
    stack = new_stack()

    def build() -> None:
        IdempotentQueueConsumer(
            stack,
            "Consumer",
            queue=ProcessingQueue(stack, "Queue"),
            function=inline_function(stack, "Fn"),
            table=IdempotencyTable(stack, "Table"),
            async_invocation=AsyncInvocationOptions(),
        )

    return _warned(build, naming="async_invocation") + _synth_warnings(stack)


def _queue_consumer_options_async_invocation() -> list[Raised]:
    stack = new_stack()
    options = IdempotentQueueConsumerOptions(async_invocation=AsyncInvocationOptions())
    raised = _warned(lambda: PaymentProcessor(stack, "Payments", consumer_options=options), naming="async_invocation")
    return raised + _synth_warnings(stack)


def _runtime_effect_key_default() -> list[Raised]:
    return _warned(lambda: Consumer(key="order.id", key_prefix="orders"), naming="effect_key")


#: One trigger per row id of the table.
TRIGGERS: dict[str, Callable[[], list[Raised]]] = {
    "payment-processor-keywords": _payment_processor_keywords,
    "queue-consumer-async-invocation": _queue_consumer_async_invocation,
    "queue-consumer-options-async-invocation": _queue_consumer_options_async_invocation,
    "local-alias-package": lambda: _imported("effectively_once.local"),
    "constructs-consumer-module": lambda: _imported("effectively_once.consumer"),
    "local-flat-module-paths": lambda: _imported("effectively_once_local.esm", "effectively_once_local.stack_run"),
    "local-profiles-module-paths": lambda: _imported(
        "effectively_once_local.profiles.chaos_run", "effectively_once_local.runner.async_inbox"
    ),
    "runtime-effect-key-default": _runtime_effect_key_default,
}

ROWS = {row.id: row for row in parse_table(TABLE_PAGE.read_text(encoding="utf-8"))}


def test_every_row_has_a_trigger_and_every_trigger_a_row() -> None:
    assert sorted(ROWS) == sorted(TRIGGERS)


def _coming(version: str) -> bool:
    """``version`` is the coming release: later than the package's, with no CHANGELOG section of its own yet (its
    entries are ``[Unreleased]``'s, :func:`changelog_deprecated`)."""
    text = CHANGELOG.read_text(encoding="utf-8")
    return _version(version) > _version(package_version()) and f"## [{version}]" not in text


@pytest.mark.parametrize("id", sorted(ROWS))
def test_a_row_is_deprecated_by_now_and_removed_in_a_later_release(id: str) -> None:
    row, current = ROWS[id], _version(package_version())

    # Deprecated in a release that is out, or in the coming one (step 2 of the module's docstring).
    assert _version(row.deprecated_in) <= current or _coming(row.deprecated_in), (row, package_version())
    assert _version(row.deprecated_in) < _version(row.removed_in), row
    assert current < _version(row.removed_in), (row, package_version())
    assert row.categories, f"{id}: its warning names none of {CATEGORIES}"
    assert (SYNTH in row.categories) == bool(row.synth_ids), f"{id}: a synth warning is named by its id"


@pytest.mark.parametrize("id", sorted(ROWS))
def test_a_row_is_in_the_changelog_deprecated_entries_of_its_release(id: str) -> None:
    row = ROWS[id]
    deprecated = changelog_deprecated(CHANGELOG.read_text(encoding="utf-8"), row.deprecated_in)
    entries = [entry for entry in deprecated if row.surface in entry]

    assert entries, f"no `### Deprecated` entry of {row.deprecated_in} in the CHANGELOG names {row.surface}"
    assert [sorted(set(STATED_REMOVAL.findall(entry))) for entry in entries] == [[row.removed_in]] * len(entries)


@pytest.mark.parametrize("id", sorted(ROWS))
def test_a_deprecated_surface_raises_its_rows_warnings_naming_its_removal_version(id: str) -> None:
    raised = TRIGGERS[id]()

    assert raised, f"{id}: using it raised no warning"
    assert mismatches(ROWS[id], raised) == []


def _stated(path: Path) -> list[tuple[str, str, str]]:
    """(file, phrase, version) of each removal or deprecation version ``path`` states."""
    text = path.read_text(encoding="utf-8")
    return [
        (path.relative_to(REPO).as_posix(), kind, version)
        for kind, pattern in (("removed in", STATED_REMOVAL), ("deprecated in", STATED_DEPRECATION))
        for version in pattern.findall(text)
    ]


def test_no_product_file_or_docs_page_states_a_version_the_table_lacks() -> None:
    files = [p for root in PRODUCT for p in sorted(root.rglob("*.py"))] + sorted(DOCS.rglob("*.md"))
    stated = [s for path in [*files, REPO / "README.md"] for s in _stated(path)]
    known = {
        "removed in": {row.removed_in for row in ROWS.values()},
        "deprecated in": {row.deprecated_in for row in ROWS.values()},
    }

    assert len(files) > 30 and stated, "the product's files were found and state some versions"
    assert [(file, kind, version) for file, kind, version in stated if version not in known[kind]] == []


# The checks can fail.

X_ID = "effectively-once:xDeprecated"
ROW = Row("x", "X(old=...)", "0.3.0", "0.4.0", frozenset({"DeprecationWarning", SYNTH}), frozenset({X_ID}))


def test_a_warning_naming_another_version_than_its_row_is_a_mismatch() -> None:
    said = "X(old=...) is deprecated and will be removed in {}: use X(new=...) [ack: " + X_ID + "]"
    agreeing = [Raised("DeprecationWarning", said.format("0.4.0")), Raised(SYNTH, said.format("0.4.0"))]

    assert mismatches(ROW, agreeing) == []
    assert mismatches(ROW, [agreeing[0], Raised(SYNTH, said.format("0.5.0"))])
    assert mismatches(ROW, [Raised("DeprecationWarning", said.format("0.4")), agreeing[1]])
    assert mismatches(ROW, [Raised("DeprecationWarning", "X(old=...): the next minor version drops it"), agreeing[1]])
    assert mismatches(ROW, [agreeing[0]]), "the synth warning is missing"
    assert mismatches(ROW, [*agreeing, Raised("FutureWarning", said.format("0.4.0"))]), "a category not in the row"


def test_the_table_and_the_changelog_readers_can_fail() -> None:
    table = "| id | deprecated | deprecated in | removed in | replacement | warning |\n|---|---|---|---|---|---|\n"
    row = "| `y` | `Y(old=...)` | 0.3.0 | {} | `Y(new=...)` | `FutureWarning` |\n"
    changelog = "## [Unreleased]\n\n## [0.3.0] - 2026-12-03\n\n### Deprecated\n- `Y(old=...)`: removed in 0.4.0.\n"

    assert parse_table(table + row.format("0.4.0 (its default changes)")) == [
        Row("y", "Y(old=...)", "0.3.0", "0.4.0", frozenset({"FutureWarning"}), frozenset())
    ]
    with pytest.raises(AssertionError, match="X.Y.Z"):
        parse_table(table + row.format("the next minor version"))
    assert changelog_deprecated(changelog, "0.3.0") == ["`Y(old=...)`: removed in 0.4.0.\n"]
    assert changelog_deprecated(changelog, "0.2.0") == []
