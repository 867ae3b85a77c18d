"""One table of fault classes (issue 56, item 1): both commands' fault flags, the chaos configuration, the draw, the
inert checks and the struck counts are built from ``chaos/fault_classes.FAULT_CLASSES``. A flag a command accepts
and never uses fails here (``demo --no-chaos --async-duplicate 0.5`` was accepted and the fraction dropped), and a
seed draws the fates it drew before the table."""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack import inert_faults
from effectively_once_local.chaos.fault_classes import COMMANDS, DRAWN, FAULT_CLASSES, ChaosConfig, of_command
from effectively_once_local.chaos.fault_model import KILL_PHASES, pick_fate
from effectively_once_local.chaos.sdk_faults import SDK_FAULT_KINDS
from effectively_once_local.cli import fault_flags
from effectively_once_local.cli.arguments import fraction
from effectively_once_local.cli.main import _BY_NAME, _parser
from effectively_once_local.proof import faults_struck
from effectively_once_local.proof.line_states import async_counts
from effectively_once_local.traffic.producer import CONCURRENT_DUPLICATE, LATE_RESEND, RESEND

_DOCS = Path(__file__).resolve().parents[2] / "docs" / "chaos.md"


def _required(command: str, tmp_path: Path) -> list[str]:
    """The arguments ``command`` needs to parse at all."""
    if command == "chaos":
        return ["chaos", "--app-dir", str(tmp_path), "--stack", "S", "--input", "in.jsonl", "--key", "k"]
    return ["demo"]


def _fraction_flags(command: str) -> list[str]:
    """Every fraction flag ``command``'s parser accepts, read from the parser itself, not from the table."""
    _, commands = _parser()
    actions = commands[command]._actions
    return [a.option_strings[0] for a in actions if a.type is fraction]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_commands_fault_flags_are_the_tables(command: str) -> None:
    table = [flag.name for _, flag in of_command(command)]

    assert _fraction_flags(command) == table
    _, commands = _parser()
    defaults = {a.option_strings[0]: (a.default, a.help) for a in commands[command]._actions if a.type is fraction}
    assert defaults == {flag.name: (flag.default, flag.help) for _, flag in of_command(command)}


@pytest.mark.parametrize(
    ("command", "flag"), [(c, f) for c in COMMANDS for f in _fraction_flags(c)], ids=lambda v: str(v)
)
def test_fails_a_flag_accepted_and_never_used(command: str, flag: str, tmp_path: Path) -> None:
    # Every fraction flag reaches the run's ChaosConfig through the command's own options object...
    parser, _ = _parser()
    options = _BY_NAME[command].options

    asked = options(parser.parse_args([*_required(command, tmp_path), flag, "0.5"])).chaos
    off = options(parser.parse_args([*_required(command, tmp_path), flag, "0"])).chaos

    assert asked != off, f"{command} {flag} 0.5 is accepted and never reaches ChaosConfig"
    cls = next(c for c, f in of_command(command) if f.name == flag)
    assert getattr(asked, cls.field) == 0.5


@pytest.mark.parametrize("flag", _fraction_flags("demo"))
def test_fails_a_demo_fault_flag_under_no_chaos(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    # ...and under --no-chaos, which draws nothing, giving one is a usage error, not a fraction silently dropped.
    parser, commands = _parser()
    args = parser.parse_args(["demo", "--no-chaos", flag, "0.5"])

    with pytest.raises(SystemExit) as stopped:
        _BY_NAME["demo"].check(commands["demo"], args)
    assert stopped.value.code == 2
    # The refusal itself, not a later check (the app folder's exits 2 too): it names both flags.
    assert f"error: arguments --no-chaos, {flag}: --no-chaos runs without chaos; {flag} would be ignored" in (
        capsys.readouterr().err
    )


def test_the_chaos_configuration_has_one_field_per_class() -> None:
    assert {f.name for f in fields(ChaosConfig)} == {c.field for c in FAULT_CLASSES} | {"seed"}
    assert len({c.field for c in FAULT_CLASSES}) == len({c.name for c in FAULT_CLASSES}) == len(FAULT_CLASSES)
    assert {c.flag for c in FAULT_CLASSES} == {f.name for _, f in of_command("chaos")}


def test_the_draw_is_the_tables_in_its_turns() -> None:
    assert [c.draw for c in DRAWN] == list(range(1, len(DRAWN) + 1)), "a new fate takes the next turn: drawn last"
    assert list(ChaosConfig().fates()) == [c.fate for c in DRAWN]
    assert set(ChaosConfig().fates()) <= set(KILL_PHASES)


def test_the_draws_sum_check_names_the_commands_fates(capsys: pytest.CaptureFixture[str]) -> None:
    parser, commands = _parser()
    args = parser.parse_args(
        ["demo", "--crash-after-charge", "0.6", "--crash-after-complete", "0.1", "--timeouts", "0.6"]
    )

    with pytest.raises(SystemExit) as stopped:
        fault_flags.check_draw(commands["demo"], args, "demo")

    assert stopped.value.code == 2
    # The demo's flags of the drawn fates, in the draw's order (no --crash-after-write: the demo does not draw it).
    assert (
        "error: arguments --crash-after-charge, --crash-after-complete, --timeouts: one draw per invocation picks"
        " among them, so their sum must not exceed 1, got 1.3 ("
    ) in capsys.readouterr().err


def test_every_place_a_class_needs_has_its_rule_in_both_inert_checks() -> None:
    places = {c.place for c in FAULT_CLASSES if c.place is not None}

    assert set(inert_faults._NO_PLACE) == places, "before the first send (any_stack/inert_faults.py)"
    assert set(faults_struck._NO_PLACE) == places, "after the run (proof/faults_struck.py)"


def test_every_counted_path_names_a_kind_the_run_counts() -> None:
    # The report's counts are keyed by these modules' kinds: a path naming anything else counts nothing, ever.
    real = {
        *(("total", "kills", phase) for phase in KILL_PHASES),
        *(("sends", "by_kind", kind) for kind in (RESEND, LATE_RESEND, CONCURRENT_DUPLICATE)),
        *(("sdk_faults", "by_kind", kind) for kind in SDK_FAULT_KINDS),
        *(("async", key) for key in async_counts([{"async": True, "invoked": True}]) or {}),
    }

    for cls in FAULT_CLASSES:
        assert cls.counted, cls.name
        for path in cls.counted:
            assert path in real, f"{cls.name} is counted at {path}, which no part of the run counts"
    assert {p for c in FAULT_CLASSES for p in c.counted if p[0] == "sends"} == {
        ("sends", "by_kind", kind) for kind in (RESEND, LATE_RESEND, CONCURRENT_DUPLICATE)
    }, "every duplicate the producer sends is counted"


def test_every_class_is_counted_by_its_paths_in_the_report_order() -> None:
    report: dict[str, Any] = {"total": {"effect_log_lines": 1}}
    for cls in FAULT_CLASSES:
        for path in cls.counted:
            node = report
            for step in path[:-1]:
                node = node.setdefault(step, {})
            node[path[-1]] = node.get(path[-1], 0) + 1

    block = faults_struck.faults_block(report, ChaosConfig(), {"standard"}, 1)

    assert list(block["asked"]) == list(block["struck"]) == [c.name for c in FAULT_CLASSES]
    assert block["struck"] == {c.name: len(c.counted) for c in FAULT_CLASSES}


#: ``ChaosConfig.fates()`` before the table (issue 56, item 1), recorded from the old code.
_FATES_BEFORE = ["after_charge", "after_complete", "timeout", "after_write", "random_moment"]
_ALL = ChaosConfig(
    crash_after_charge=0.1,
    crash_after_complete=0.15,
    timeout=0.2,
    crash_after_write=0.25,
    crash_random=0.2,
    seed=3,
    throttle=0.1,
    partial_batch_write=0.2,
)
#: 25 draws of ``_ALL`` per seed, recorded from the old code's loop in ``InvocationChaos.begin``.
_DRAWN_BEFORE = {
    1: "after_complete random_moment random_moment timeout after_write timeout after_write random_moment after_charge"
    " after_charge random_moment timeout random_moment after_charge timeout random_moment after_complete - -"
    " after_charge after_charge after_write - timeout after_complete",
    7: "timeout after_complete after_write after_charge after_write timeout after_charge after_write after_charge"
    " timeout after_charge after_charge timeout random_moment after_complete after_complete after_write - after_write"
    " timeout - after_charge random_moment timeout after_complete",
    42: "after_write after_charge timeout after_complete random_moment after_write random_moment after_charge timeout"
    " after_charge after_complete after_write after_charge after_complete after_write after_write after_complete"
    " after_write random_moment after_charge random_moment after_write timeout after_complete -",
}


def _chaos_defaults(tmp_path: Path) -> ChaosConfig:
    """The ``chaos`` command's ChaosConfig given only its required arguments: parsed and built as the command does."""
    parser, _ = _parser()
    return fault_flags.chaos_config(parser.parse_args(_required("chaos", tmp_path)), "chaos")


def _documented_defaults() -> dict[str, str]:
    """docs/chaos.md's default per fault flag: its option table's rows (``| `--a`, `--b` | ... (defaults x, y ...) |``:
    the flags and the values in turn) and, for a flag the table does not list, the prose's ``--flag F` (default x)``."""
    text = _DOCS.read_text()
    documented: dict[str, str] = {}
    for row in re.finditer(r"^\| (`--[^|]*) \|[^\n]*\(defaults? ([^;)]*)[;)]", text, re.MULTILINE):
        flags = re.findall(r"`(--[a-z-]+)`", row.group(1))
        values = [v.strip() for v in row.group(2).split(",")]
        for flag, value in zip(flags, values, strict=False):
            documented[flag] = value
    for prose in re.finditer(r"`(--[a-z-]+) F` \(default ([0-9.]+)\)", text):
        documented.setdefault(prose.group(1), prose.group(2))
    return documented


def test_the_chaos_commands_defaults_are_the_documented_ones(tmp_path: Path) -> None:
    defaults = _chaos_defaults(tmp_path)
    documented = _documented_defaults()

    assert {flag.name: getattr(defaults, cls.field) for cls, flag in of_command("chaos")} == {
        flag.name: float(documented.get(flag.name, "nan")) for _, flag in of_command("chaos")
    }, "docs/chaos.md's option table (or its prose) gives each fault flag's default"
    assert defaults.seed == int(documented["--seed"]) == 7


def test_the_fates_are_in_the_order_they_were_before(tmp_path: Path) -> None:
    defaults = _chaos_defaults(tmp_path)

    assert list(ChaosConfig().fates().items()) == [(fate, 0.0) for fate in _FATES_BEFORE]
    assert list(defaults.fates().values()) == [0.03, 0.03, 0.02, 0.05, 0.02]
    assert list(_ALL.fates().values()) == [0.1, 0.15, 0.2, 0.25, 0.2]


@pytest.mark.parametrize("seed", sorted(_DRAWN_BEFORE))
def test_a_seed_draws_the_fates_it_drew_before(seed: int) -> None:
    rng = random.Random(seed)

    drawn = [pick_fate(_ALL.fates(), rng.random()) or "-" for _ in range(25)]

    assert " ".join(drawn) == _DRAWN_BEFORE[seed]


def test_a_command_without_a_class_leaves_its_field_at_zero() -> None:
    args = argparse.Namespace(seed=7, **{flag.dest: 0.2 for _, flag in of_command("demo")})

    config = fault_flags.chaos_config(args, "demo")

    assert config.crash_after_write == config.throttle == 0.0 and config.crash_after_charge == 0.2
