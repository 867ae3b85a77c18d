"""One options object per deploy-and-run subcommand, built from its parsed arguments in one place
(``cli.main.chaos_options``, ``cli.main.demo_options``; issue 29, item 2): every argument reaches its field."""

from __future__ import annotations

from pathlib import Path

from effectively_once_local.cli.main import _parser, chaos_options, demo_options
from effectively_once_local.profiles.chaos_run import ChaosOptions
from effectively_once_local.profiles.demo import DemoOptions


def test_chaos_options_carry_every_argument(tmp_path: Path) -> None:
    parser, _ = _parser()
    args = parser.parse_args(
        ["chaos", "--app-dir", str(tmp_path), "--stack", "Orders", "--input", "in.jsonl", "--key", "order_id"]
        + ["--normalize", "strip", "--normalize", "casefold", "--effect", "table:Outbox:order_id"]
        + ["--function-env", "VARIANT=slow", "--context", "stage=chaos", "--no-redrive", "--redrive-rounds", "4"]
        + ["--concurrency", "3", "--crash-after-effect", "0.2", "--crash-after-write", "0.3", "--seed", "9"]
        + ["--report", str(tmp_path / "r.json"), "--run-dir", str(tmp_path / "run"), "--quiet"]
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
    assert all(callable(module.check) and callable(module.run) for module in cli._BY_NAME.values())
