"""docs/extending.md held to the code (issue 56, item 5). For an effect adapter, an event shape, an asynchronous
source, a store kind and a fault kind the page lists every product file to touch, as a numbered list, and says how
many; this module fails when a file listed is not there, when a count is not the list's, when a registry the page
names (a name in capitals: ``STORE_KINDS``, ``inert_faults._NO_PLACE``) is not in the module it names or its section
lists, and when a registry lacks an entry for a kind that exists.

What other modules already hold is not repeated here: every source kind the inbox knows has a sender and a finder
(``test_source_kinds.py``), every store kind's services are write services and every list of kinds is built from
the classes (``test_store_kinds.py``), every fault class has its ``ChaosConfig`` field and its places' rules
(``test_fault_classes.py``), every kill phase is named on the page (``test_fault_kinds.py``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from effectively_once_local.chaos.fault_classes import FAULT_CLASSES, FaultClass
from effectively_once_local.chaos.fault_model import KILL_PHASES
from effectively_once_local.chaos.sdk_faults import SDK_FAULT_KINDS
from effectively_once_local.chaos.sql_watch import SQL_CONNECTIONS
from effectively_once_local.chaos.write_services import WRITE_SERVICES
from effectively_once_local.proof.store_kinds import STORE_KINDS
from effectively_once_local.traffic.source_kinds import SOURCE_KINDS
from effectively_once_runtime import events
from effectively_once_runtime.effects import _LAZY

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "extending.md"
#: The product's folders: the files a section lists are in them.
ROOTS = ("constructs/effectively_once", "lambda_src/effectively_once_runtime", "tools/effectively_once_local")
EFFECTS = REPO / "lambda_src" / "effectively_once_runtime" / "effects"
ADAPTER, SHAPE, SOURCE = "A new effect adapter", "A new event shape", "A new asynchronous source"
STORE, FAULT = "A new store kind", "A new fault kind"
SECTIONS = (ADAPTER, SHAPE, SOURCE, STORE, FAULT)
#: The registries the checks below read, by the section that must name them.
CHECKED = {
    ADAPTER: {"_LAZY"},
    SHAPE: {"TRIGGERS", "ASYNC_TRIGGERS"},
    SOURCE: {"SOURCE_KINDS"},
    STORE: {"STORE_KINDS", "WRITE_SERVICES", "SQL_CONNECTIONS"},
    FAULT: {"FAULT_CLASSES", "KILL_PHASES", "SDK_FAULT_KINDS"},
}
_WORDS = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5, "Six": 6, "Seven": 7}
_STATED = re.compile(rf"^({'|'.join(_WORDS)}) files?\b", re.MULTILINE)
_ITEM = re.compile(r"^\d+\. .*(?:\n {3}.*)*", re.MULTILINE)
_LISTED = re.compile(rf"`((?:{'|'.join(ROOTS)})/[\w/]+\.py)`( \(new\))?")
_REFERENCE = re.compile(r"`(?:([\w/]+)\.)?(\w+)(?:\(\))?`")
_FILE = re.compile(r"`([\w/.]+\.py)`")


@cache
def _modules() -> tuple[Path, ...]:
    """Every module of the product (the deprecated alias ``effectively_once.local`` left out)."""
    alias = REPO / "constructs" / "effectively_once" / "local"
    return tuple(p for root in ROOTS for p in sorted((REPO / root).rglob("*.py")) if not p.is_relative_to(alias))


@cache
def _top_names(path: Path) -> frozenset[str]:
    """The names a module binds at its top level: assignments, functions, classes, imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def _named(qualifier: str) -> list[Path]:
    """The product modules ``qualifier`` names: ``events``, ``proof/key_check`` (a path's end, without ``.py``)."""
    return [p for p in _modules() if p.with_suffix("").as_posix().endswith(f"/{qualifier}")]


def _is_registry(name: str) -> bool:
    return name.lstrip("_").replace("_", "").isupper() and len(name.lstrip("_")) >= 4


def sections(page: str) -> dict[str, str]:
    """The page's ``## `` sections by title."""
    parts = re.split(r"^## ([^\n]+)", page, flags=re.MULTILINE)
    return {title.strip(): text for title, text in zip(parts[1::2], parts[2::2], strict=True)}


def listed_files(text: str) -> list[list[tuple[str, bool]]]:
    """Per numbered item of a section: the product files it names, each with whether it is marked ``(new)``."""
    return [[(m.group(1), bool(m.group(2))) for m in _LISTED.finditer(item)] for item in _ITEM.findall(text)]


def _list_problems(title: str, text: str) -> list[str]:
    """A section's list: each item names a product file that exists (a new one: in a folder that does), and the
    section says how many files, once, as many as the list has."""
    problems: list[str] = []
    items = listed_files(text)
    for n, files in enumerate(items, 1):
        if not files:
            problems.append(f"{title}, step {n}: names no product file")
        for path, new in files:
            there = (REPO / path).parent.is_dir() if new else (REPO / path).is_file()
            if not there:
                problems.append(f"{title}, step {n}: {path} is not there")
    stated = [_WORDS[word] for word in _STATED.findall(text)]
    if len(stated) != 1:
        problems.append(f"{title}: says how many files {len(stated)} times, not once ('Two files: ...')")
    elif stated[0] != len(items):
        problems.append(f"{title}: says {stated[0]} files, its list has {len(items)}")
    return problems


def _reference_problems(title: str, text: str) -> list[str]:
    """Every registry the section names is in the module it names (``faults.KILL_POINT_ROLES``) or, unqualified, in
    a file its list names; every other ``module.name`` of a product module is in that module."""
    listed = [REPO / path for files in listed_files(text) for path, new in files if not new]
    listed = [path for path in listed if path.is_file()]
    problems = []
    for qualifier, name in _REFERENCE.findall(text):
        if name == "py":
            continue  # a file (``chaos/faults.py``): _file_problems
        modules = _named(qualifier) if qualifier else listed
        if qualifier and not modules and _is_registry(name):
            problems.append(f"{title}: `{qualifier}.{name}` names no module of the product")
        elif (qualifier and modules) or _is_registry(name):
            if not any(name in _top_names(path) for path in modules):
                where = qualifier or "the files the section lists"
                problems.append(f"{title}: {name} is not in {where}")
    return problems


def _file_problems(page: str) -> list[str]:
    """Every ``.py`` file the page names anywhere is there: a path from the repository's root, or the end of one of
    the product's paths (``chaos/sdk_faults.py``); a file marked ``(new)`` and a pattern (``test_<store>.py``) aside."""
    new = {path for text in sections(page).values() for files in listed_files(text) for path, is_new in files if is_new}
    problems = []
    for name in sorted(set(_FILE.findall(page)) - new):
        there = (REPO / name).is_file() or any(p.as_posix().endswith(f"/{name}") for p in _modules())
        if not there:
            problems.append(f"{name} is not there")
    return problems


def problems(page: str) -> list[str]:
    """What on ``page`` is not true of the code today (empty: nothing)."""
    found = sections(page)
    listed = [f"no section '## {title}'" for title in SECTIONS if title not in found]
    for title in (t for t in SECTIONS if t in found):
        listed += _list_problems(title, found[title]) + _reference_problems(title, found[title])
        named = {name for _, name in _REFERENCE.findall(found[title])}
        listed += [f"{title}: does not name {name}" for name in sorted(CHECKED[title] - named)]
    return listed + _file_problems(page)


def _table(text: str, header: str) -> dict[str, list[str]]:
    """A table's rows under its header row (``| header | ...``): the first cell, unquoted, -> the row's cells."""
    parts = text.split(f"\n| {header} |", 1)
    rows = parts[1].split("\n\n", 1)[0].splitlines()[2:] if len(parts) == 2 else []
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows if row.startswith("|")]
    return {row[0].strip("`"): row for row in cells}


def _flags(cell: str) -> set[str]:
    return set(re.findall(r"`(--[a-z-]+)`", cell))


def adapter_gaps(modules: Iterable[str], lazy: Mapping[str, str]) -> list[str]:
    """Each adapter module (``effects/<name>.py``, not private) is exported through ``_LAZY``, and ``_LAZY`` names
    no module that is not there."""
    modules, exported = set(modules), set(lazy.values())
    return [f"effects/{m}.py: no name of it in effects/__init__._LAZY" for m in sorted(modules - exported)] + [
        f"effects/__init__._LAZY names effects/{m}.py, which is not there" for m in sorted(exported - modules)
    ]


def source_gaps(async_triggers: Iterable[str], kinds: Iterable[Any], bridged: set[str], alone: set[str]) -> list[str]:
    """Each asynchronous trigger of the runtime has a source kind, unless the page says it is in the runtime alone
    (``alone``); each kind's events are put in the inbox by a bridge (``bridged``: the inbox sources the bridges of
    ``aws/moto_async_bridges.py`` put)."""
    by_trigger = {kind.trigger: kind for kind in kinds}
    gaps = [
        f"events.ASYNC_TRIGGERS has {t!r}: no kind of traffic/source_kinds.py delivers it, and the page does not say"
        " it is in the runtime alone"
        for t in async_triggers
        if t not in by_trigger and t not in alone
    ]
    gaps += [
        f"the page says {t!r} is in the runtime alone, but a source kind delivers it" for t in alone & set(by_trigger)
    ]
    return gaps + [
        f"source kind {type(kind).__name__}: no bridge of aws/moto_async_bridges.py puts {kind.inbox_source!r} events"
        for kind in by_trigger.values()
        if kind.inbox_source not in bridged
    ]


def store_gaps(kinds: Mapping[str, Any], services: Iterable[str], drivers: set[str]) -> list[str]:
    """Each write service is the write side of a store kind, and each SQL kind's driver is watched
    (``chaos/sql_watch.SQL_CONNECTIONS``)."""
    used = {service for kind in kinds.values() for service in kind.services}
    gaps = [f"write service {s!r} is no store kind's (proof/store_kinds.py)" for s in services if s not in used]
    return gaps + [
        f"store kind {name!r}: its driver {kind.driver!r} is not in chaos/sql_watch.SQL_CONNECTIONS"
        for name, kind in kinds.items()
        if getattr(kind, "driver", None) and kind.driver not in drivers
    ]


def store_table_gaps(text: str, kinds: Mapping[str, Any]) -> list[str]:
    """The store kind section's table: one row per kind, with its ``--effect`` form and its services."""
    table = _table(text, "store kind")
    gaps = [f"store kind {name!r}: no row in the store kinds' table" for name in kinds if name not in table]
    gaps += [f"the store kinds' table has {name!r}, no store kind" for name in table if name not in kinds]
    for name, (_, syntax, services, *_) in ((n, row) for n, row in table.items() if n in kinds):
        kind = kinds[name]
        if syntax != f"`{kind.syntax}`" or set(re.findall(r"`(\w+)`", services)) != set(kind.services):
            gaps.append(f"store kind {name!r}: its row is not {kind.syntax} written through {kind.services}")
    return gaps


def _kill_row_problems(table: Mapping[str, str], phases: Iterable[str], classes: Iterable[FaultClass]) -> list[str]:
    """The kill kinds' table: a row per kill phase, each flag a flag of the class that strikes or counts it, and
    every flag of a drawn class named."""
    classes = list(classes)
    gaps = [f"kill phase {p!r}: no row in the kinds' table" for p in phases if p not in table]
    gaps += [f"the kinds' table has {k!r}, no kill phase" for k in table if k not in phases]
    for kind, cell in table.items():
        own = {
            f.name
            for c in classes
            if kind == c.fate or ("total", "kills", kind) in c.counted
            for f in (c.chaos, c.demo)
            if f is not None
        }
        gaps += [f"kind {kind!r}: {flag} strikes another kind" for flag in sorted(_flags(cell) - own)]
    named = {flag for cell in table.values() for flag in _flags(cell)}
    drawn = {f.name for c in classes if c.fate is not None for f in (c.chaos, c.demo) if f is not None}
    return gaps + [f"{flag} draws a kill, and the kinds' table does not name it" for flag in sorted(drawn - named)]


def fault_table_gaps(
    text: str, phases: Iterable[str], sdk_kinds: Iterable[str], classes: Iterable[FaultClass]
) -> list[str]:
    """The fault kind section's tables (kill kinds, SDK fault kinds) against the kinds and the fault classes, and
    every class's chaos flag named in the section."""
    classes, sdk_kinds = list(classes), list(sdk_kinds)
    gaps = _kill_row_problems({k: row[-1] for k, row in _table(text, "kind").items()}, list(phases), classes)
    sdk = {k: row[-1] for k, row in _table(text, "SDK fault kind").items()}
    gaps += [f"SDK fault kind {k!r}: no row in the SDK faults' table" for k in sdk_kinds if k not in sdk]
    gaps += [f"the SDK faults' table has {k!r}, no SDK fault kind" for k in sdk if k not in sdk_kinds]
    for kind, cell in sdk.items():
        own = {c.chaos.name for c in classes if ("sdk_faults", "by_kind", kind) in c.counted}
        if _flags(cell) != own:
            gaps.append(f"SDK fault kind {kind!r}: drawn by {sorted(own)}, the table says {sorted(_flags(cell))}")
    return gaps + [
        f"fault class {c.name!r}: its flag {c.flag} is not named" for c in classes if f"`{c.flag}`" not in text
    ]


def _bridged_sources() -> set[str]:
    """The inbox sources the bridges put events under: the third argument of each ``put_in_inbox`` call, a name of
    the module."""
    from effectively_once_local.aws import moto_async_bridges as bridges

    tree = ast.parse(Path(bridges.__file__).read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "put_in_inbox"]
    return {getattr(bridges, c.args[2].id) for c in calls if len(c.args) > 2 and isinstance(c.args[2], ast.Name)}


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def test_the_page_lists_files_that_are_there_and_registries_that_are_in_them() -> None:
    assert problems(_page()) == []


def test_a_new_fault_kind_touches_two_product_files_and_a_store_kind_three_of_the_tooling() -> None:
    """The issue's bar: the counts the page states (held to its lists above) stay within it."""
    found = sections(_page())
    fault, store = listed_files(found[FAULT]), listed_files(found[STORE])

    assert len(fault) <= 2 and len(store) <= 3
    assert all(path.startswith("tools/effectively_once_local/") for files in store for path, _ in files)


def test_every_adapter_module_is_exported() -> None:
    modules = [p.stem for p in EFFECTS.glob("*.py") if not p.stem.startswith("_")]

    assert adapter_gaps(modules, _LAZY) == []


def test_every_asynchronous_trigger_has_a_source_kind_and_every_kind_a_bridge() -> None:
    alone = set(re.findall(r"`(\w+)` records are in the runtime alone", sections(_page())[SOURCE]))

    assert alone == {events.S3}, "the page names the asynchronous triggers the tooling does not drive"
    assert source_gaps(events.ASYNC_TRIGGERS, SOURCE_KINDS, _bridged_sources(), alone) == []


def test_every_write_service_is_a_store_kinds_and_every_kind_is_on_the_page() -> None:
    drivers = {module for module, _ in SQL_CONNECTIONS}

    assert store_gaps(STORE_KINDS, WRITE_SERVICES, drivers) == []
    assert store_table_gaps(sections(_page())[STORE], STORE_KINDS) == []


def test_every_kill_phase_and_sdk_fault_kind_has_its_row_and_every_fault_class_its_flag() -> None:
    assert fault_table_gaps(sections(_page())[FAULT], KILL_PHASES, SDK_FAULT_KINDS, FAULT_CLASSES) == []


_STORE_STEP = "`tools/effectively_once_local/proof/store_kinds.py`: a `StoreKind` class in `STORE_KINDS` (an"


@pytest.mark.parametrize(
    ("old", "new", "reported"),
    [
        (_STORE_STEP, _STORE_STEP.replace("store_kinds.py", "store_kind.py"), "store_kind.py is not there"),
        (_STORE_STEP, _STORE_STEP.replace("`STORE_KINDS`", "`STORE_KINDZ`"), "STORE_KINDZ is not in"),
        ("`inert_faults._NO_PLACE`", "`inert_faults._NO_PLACES`", "_NO_PLACES is not in inert_faults"),
        ("`faults.KILL_POINT_ROLES`", "`fautls.KILL_POINT_ROLES`", "`fautls.KILL_POINT_ROLES` names no module"),
        ("Three files at most", "Two files at most", "says 2 files, its list has 3"),
        ("\n3. `tools/effectively_once_local/chaos/sql_watch.py`", "\n3. The driver's commits", "step 3: names no"),
        ("(`aws/target_plan.py`)", "(`aws/target_plans.py`)", "aws/target_plans.py is not there"),
        ("## A new asynchronous source", "## Asynchronous sources", "no section '## A new asynchronous source'"),
        ("`_LAZY`", "`__all__`", "A new effect adapter: does not name _LAZY"),
    ],
    ids=[
        "file",
        "registry",
        "qualified registry",
        "module",
        "count",
        "step without a file",
        "prose file",
        "section",
        "registry left out",
    ],
)
def test_a_doctored_page_is_reported(old: str, new: str, reported: str) -> None:
    page = _page()
    assert old in page

    found = problems(page.replace(old, new))

    assert any(reported in problem for problem in found), found


def test_a_registry_missing_a_kind_is_reported() -> None:
    """Each check above, fed registries with a kind left out or a kind too many, names it."""
    sql_kind = SimpleNamespace(services=("sql",), driver="pymysql")
    kinesis = SimpleNamespace(trigger="kinesis", inbox_source="kinesis")

    assert adapter_gaps(["dynamodb", "kinesis"], {"put_item": "dynamodb"}) == [
        "effects/kinesis.py: no name of it in effects/__init__._LAZY"
    ]
    assert "'mq'" in " ".join(source_gaps((*events.ASYNC_TRIGGERS, "mq"), SOURCE_KINDS, _bridged_sources(), {"s3"}))
    assert "'kinesis' events" in " ".join(source_gaps((), (*SOURCE_KINDS, kinesis), _bridged_sources(), set()))
    assert store_gaps({"mysql": sql_kind}, ["sql", "kinesis"], {"sqlite3"}) == [
        "write service 'kinesis' is no store kind's (proof/store_kinds.py)",
        "store kind 'mysql': its driver 'pymysql' is not in chaos/sql_watch.SQL_CONNECTIONS",
    ]


def test_a_table_missing_a_kind_is_reported() -> None:
    fault, store = sections(_page())[FAULT], sections(_page())[STORE]
    without_timeout = "\n".join(line for line in fault.splitlines() if not line.startswith("| `timeout`"))
    sdk_kinds = (*SDK_FAULT_KINDS, "slow_answer")

    assert fault_table_gaps(without_timeout, KILL_PHASES, SDK_FAULT_KINDS, FAULT_CLASSES) == [
        "kill phase 'timeout': no row in the kinds' table",
        "--timeouts draws a kill, and the kinds' table does not name it",
    ]
    assert fault_table_gaps(fault, KILL_PHASES, sdk_kinds, FAULT_CLASSES) == [
        "SDK fault kind 'slow_answer': no row in the SDK faults' table"
    ]
    assert fault_table_gaps(
        fault.replace("`--throttle` |", "`--crash-random` |"), KILL_PHASES, SDK_FAULT_KINDS, FAULT_CLASSES
    ) == [
        "SDK fault kind 'throttled': drawn by ['--throttle'], the table says ['--crash-random']",
        "fault class 'throttle': its flag --throttle is not named",
    ]
    assert store_table_gaps(store.replace("| `sqs`, `sns` |", "| `sqs` |"), STORE_KINDS) == [
        "store kind 'queue': its row is not queue:NAME:JMESPATH written through ('sqs', 'sns')"
    ]
