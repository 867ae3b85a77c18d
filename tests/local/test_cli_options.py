"""One options object per subcommand, built from its parsed arguments in one place, each subcommand's module's
``options`` (``cli/*_command.py``; issue 29, item 2): every argument reaches its field, and the run hands the
object to the profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effectively_once_local.any_stack.chaos_context import ChaosOptions
from effectively_once_local.cli.main import _parser, chaos_options, demo_options
from effectively_once_local.payments.demo import DemoOptions
from effectively_once_local.payments.payments_input import SampleOptions
from effectively_once_local.payments.remote import ProduceOptions, ReportOptions
from effectively_once_local.redrive.dlq_redrive import RedriveOptions


def test_chaos_options_carry_every_argument(tmp_path: Path) -> None:
    parser, _ = _parser()
    args = parser.parse_args(
        ["chaos", "--app-dir", str(tmp_path), "--stack", "Orders", "--input", "in.jsonl", "--key", "order_id"]
        + ["--normalize", "strip", "--normalize", "casefold", "--effect", "table:Outbox:order_id"]
        + ["--function-env", "VARIANT=slow", "--context", "stage=chaos", "--no-redrive", "--redrive-rounds", "4"]
        + ["--concurrency", "3", "--crash-after-effect", "0.2", "--crash-after-write", "0.3", "--seed", "9"]
        + ["--report", str(tmp_path / "r.json"), "--run-dir", str(tmp_path / "run"), "--quiet", "--require-faults"]
    )

    opts = chaos_options(args)

    assert isinstance(opts, ChaosOptions)
    assert (opts.app_dir, opts.stack, opts.input, opts.key) == (
        tmp_path.resolve(),
        "Orders",
        Path("in.jsonl"),
        "order_id",
    )
    assert opts.normalize == ("strip", "casefold") and [str(e) for e in opts.effects] == ["table:Outbox:order_id"]
    assert (opts.function_env, opts.context) == ({"VARIANT": "slow"}, {"stage": "chaos"})
    assert (opts.redrive, opts.redrive_rounds, opts.concurrency, opts.quiet) == (False, 4, 3, True)
    assert (opts.chaos.crash_after_charge, opts.chaos.crash_after_write, opts.chaos.seed) == (0.2, 0.3, 9)
    assert (opts.report_path, opts.run_dir) == (tmp_path / "r.json", tmp_path / "run")
    assert opts.require_faults is True
    # Issue 43, item 3: the flags given, for the refusal of one that cannot strike on the stack.
    assert opts.given_flags == {
        "--redrive-rounds",
        "--crash-after-effect",
        "--crash-after-write",
        "--seed",
    }, "only the chaos flags given"
    assert (
        chaos_options(
            parser.parse_args(["chaos", "--app-dir", str(tmp_path), "--stack", "S", "--input", "i", "--key", "k"])
        ).require_faults
        is False
    ), "opt-in"


def test_demo_options_carry_every_argument_and_no_chaos_keeps_only_the_seed(tmp_path: Path) -> None:
    parser, _ = _parser()
    base = ["demo", "--app-dir", str(tmp_path), "--function-timeout", "4", "--max-receive-count", "3"]
    args = parser.parse_args(base + ["--crash-after-charge", "0.2", "--seed", "5", "--redrive-backlog", "2"])

    opts = demo_options(args)

    assert isinstance(opts, DemoOptions)
    assert (opts.app_dir, opts.function_timeout_seconds, opts.max_receive_count) == (tmp_path.resolve(), 4, 3)
    assert (opts.chaos.crash_after_charge, opts.chaos.seed, opts.redrive_backlog) == (0.2, 5, 2)
    calm = demo_options(parser.parse_args(base + ["--no-chaos", "--seed", "5"]))
    assert calm.chaos.enabled is False and calm.chaos.seed == 5


def test_each_subcommand_has_its_module() -> None:
    """One module per subcommand (``cli/*_command.py``; ``produce`` and ``report`` share one): every subcommand the
    parser knows is one module's, and each module's checks and run are the ones ``main`` calls."""
    from effectively_once_local.cli import main as cli

    _, commands = _parser()
    owners = {name: module.__name__.rsplit(".", 1)[-1] for name, module in cli._BY_NAME.items()}

    assert sorted(owners) == sorted(commands)
    assert owners == {
        "demo": "demo_command",
        "chaos": "chaos_command",
        "sample": "sample_command",
        "produce": "remote_commands",
        "report": "remote_commands",
        "redrive": "redrive_command",
    }
    assert all(callable(m.check) and callable(m.options) and callable(m.run) for m in cli._BY_NAME.values())


def _options(argv: list[str]) -> object:
    from effectively_once_local.cli import main as cli

    parser, _ = _parser()
    args = parser.parse_args(argv)
    return cli._BY_NAME[args.command].options(args)


def test_sample_options_carry_every_argument_and_the_run_writes_them(tmp_path: Path) -> None:
    from effectively_once_local.cli.main import main
    from effectively_once_local.payments.payments_input import generate_sample

    out = tmp_path / "deep" / "p.jsonl"
    argv = ["sample", "--count", "3", "--accounts", "2", "--seed", "4", "--out", str(out)]

    assert _options(argv) == SampleOptions(count=3, accounts=2, seed=4, out=out)
    assert main(argv) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == generate_sample(3, 2, 4)


def test_redrive_options_carry_every_argument(tmp_path: Path) -> None:
    moved = _options(["redrive", "--stack", "S", "--queue", "fifo", "--max-per-second", "7"])
    on_failure = _options(["redrive", "--stack", "S", "--on-failure", "--cdk-out", str(tmp_path)])

    assert moved == RedriveOptions(stack="S", queue="fifo", max_per_second=7, on_failure=False, cdk_out=None)
    assert on_failure == RedriveOptions(stack="S", on_failure=True, cdk_out=tmp_path)


def test_produce_and_report_options_carry_every_argument(tmp_path: Path) -> None:
    produce = _options(["produce", "--stack", "S", "--payments", "p.jsonl", "--resend", "0.3", "--seed", "2"])
    report = _options(
        ["report", "--stack", "S", "--payments", "p.jsonl", "--handler-root", str(tmp_path)]
        + ["--wait", "30", "--settle", "5", "--report", str(tmp_path / "r.json")]
    )

    assert isinstance(produce, ProduceOptions) and (produce.stack, produce.payments) == ("S", Path("p.jsonl"))
    assert (produce.chaos.resend, produce.chaos.concurrent_duplicates, produce.chaos.seed) == (0.3, 0.05, 2)
    assert report == ReportOptions(
        stack="S",
        payments=Path("p.jsonl"),
        handler_root=tmp_path,
        wait_seconds=30,
        report_path=tmp_path / "r.json",
        settle_seconds=5,
    )


@pytest.mark.parametrize("command", ["produce", "report", "redrive"])
def test_the_run_hands_the_options_object_to_the_profile(
    command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What each subcommand's run calls its profile with is its options object, no field copied on the way."""
    from effectively_once_local.cli.main import _run
    from effectively_once_local.payments import remote
    from effectively_once_local.redrive import dlq_redrive

    seen: list[object] = []
    monkeypatch.setattr(remote, "produce", lambda opts: seen.append(opts) or 0)
    monkeypatch.setattr(remote, "report", lambda opts: seen.append(opts) or 0)
    monkeypatch.setattr(dlq_redrive, "run_redrive", lambda opts: seen.append(opts) or 0)
    argv = [command, "--stack", "S"] + (["--handler-root", str(tmp_path)] if command == "report" else [])
    parser, _ = _parser()

    assert _run(parser.parse_args(argv)) == 0
    assert seen == [_options(argv)]
