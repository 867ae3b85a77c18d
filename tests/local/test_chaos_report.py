"""The chaos command's own rules (no AWS): the input file, routing to a stack's queues, the plan, the effect tap,
the per-key report and its verdict, and the command-line checks."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.cli.main import main
from effectively_once_local.proof import key_check as effects
from effectively_once_local.runner.mapping_runner import EffectTap
from effectively_once_local.traffic.chaos_input import InputFileError, load_input, resolve_queue
from effectively_once_local.traffic.producer import plan

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, *rows: Any) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_input_lines_are_bodies_or_wrappers_and_the_key_comes_from_the_body(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"order_id": "o1", "total": 1},
        {"body": {"order": {"id": 7}}, "queue": "fifo", "group": "g"},
        {"body": "not json", "queue": "standard"},
        {"body": {"total": 3}},
    )

    lines = load_input(path, "order_id || order.id")

    assert [ln.key for ln in lines] == ["o1", "7", None, None]
    assert lines[0].body == '{"order_id":"o1","total":1}'
    assert (lines[1].queue, lines[1].group) == ("fifo", "g")
    assert lines[2].body == "not json"


def test_a_body_with_a_repeated_key_is_sent_as_written_and_has_no_valid_key(tmp_path: Path) -> None:
    # Re-encoding would keep the last value only; the runtime rejects the repetition (strict JSON), so the report
    # must not expect an effect for it.
    row = '{"order_id": "o1", "total": 1, "total": 100000}'
    path = write(tmp_path, row, '{"order_id": "o2", "total": NaN}')

    lines = load_input(path, "order_id")

    assert [ln.body for ln in lines] == [row, '{"order_id":"o2","total":NaN}']
    assert [ln.key for ln in lines] == [None, None]


def test_a_wrapper_line_with_a_repeated_key_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"in.jsonl:1: a wrapper line repeats the key 'total'"):
        load_input(write(tmp_path, '{"body": {"order_id": "o1", "total": 1, "total": 2}}'), "order_id")


@pytest.mark.parametrize(
    "row, reason",
    [
        ("[1]", "must be a JSON object"),
        ("{nope", "not valid JSON"),
        ('{"body": 5}', "body must be a JSON object or a string"),
        ('{"body": {}, "queue": 3}', "queue must be a string"),
    ],
)
def test_fails_bad_input_line_naming_it(tmp_path: Path, row: str, reason: str) -> None:
    with pytest.raises(InputFileError, match=rf"in.jsonl:2: .*{reason}"):
        load_input(write(tmp_path, {"order_id": "o1"}, row), "order_id")


def test_queue_is_named_by_logical_id_queue_name_or_a_unique_part() -> None:
    labels = {"StandardOrdersQueueF81B90C9": "Orders-Standard-1", "FifoOrdersQueueBD3BF8DA": "Orders-Fifo.fifo"}

    assert resolve_queue("FifoOrdersQueueBD3BF8DA", labels) == "FifoOrdersQueueBD3BF8DA"
    assert resolve_queue("Orders-Standard-1", labels) == "StandardOrdersQueueF81B90C9"
    assert resolve_queue("fifo", labels) == "FifoOrdersQueueBD3BF8DA"
    assert resolve_queue(None, {"OnlyQueue": "q"}) == "OnlyQueue"
    with pytest.raises(InputFileError, match="matches 2 queues"):
        resolve_queue("orders", labels)
    with pytest.raises(InputFileError, match="each line must name its queue"):
        resolve_queue(None, labels)


def test_plan_sends_each_line_once_plus_duplicates_and_resends(tmp_path: Path) -> None:
    lines = load_input(
        write(
            tmp_path,
            *({"body": {"k": f"{i}"}, "queue": q} for i in range(200) for q in ["s", "f"][i % 2 : i % 2 + 1]),
            {"body": "x", "queue": "s"},
        ),
        "k",
    )
    routes = {ln.number: ln.queue or "" for ln in lines}

    out = plan(
        lines,
        lambda line: routes[line.number],
        {"s": False, "f": True},
        ChaosConfig(resend=0.3, concurrent_duplicates=0.2),
    )

    kinds = {q: Counter(o.kind for o in msgs) for q, msgs in out.items()}
    assert kinds["s"]["original"] == 101 and kinds["f"]["original"] == 100
    assert kinds["f"]["concurrent_duplicate"] == 0, "a FIFO group is processed one at a time"
    assert kinds["s"]["concurrent_duplicate"] > 0 and kinds["s"]["resend"] > 0 and kinds["f"]["resend"] > 0
    assert all(o.line.key is not None for msgs in out.values() for o in msgs if o.kind != "original")
    assert [o.kind for o in out["s"]][-kinds["s"]["resend"] :] == ["resend"] * kinds["s"]["resend"]


def test_effect_tap_passes_everything_through_and_reports_only_effect_lines() -> None:
    sink, seen = io.StringIO(), []
    tap = EffectTap(sink, lambda key, effect: seen.append((key, effect)))
    effect_line = json.dumps({"message": "effect executed", "idempotency_key": "o1", "effect": "confirm"})

    tap.write('{"message": "record processed", "note": "effect executed"}\n' + effect_line[:20])
    assert seen == []
    tap.write(effect_line[20:] + "\nplain text effect executed\n")

    assert seen == [("o1", "confirm")]
    assert sink.getvalue().endswith("plain text effect executed\n")


def _build(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = dict(
        sent=Counter({"a": 2, "b": 1, "c": 1}),
        invalid_lines=0,
        messages_sent=4,
        dlq_keys=set(),
        dead_lettered=0,
        log_counts=Counter({"a": 1, "b": 1, "c": 1}),
        store_counts=Counter({"a": 1, "b": 1, "c": 1}),
        kill_records=[],
        effect_takes_key=False,
    )
    args.update(overrides)
    return effects.build(**args)


def _kill(key: str, phase: str = "after_effect") -> dict[str, Any]:
    return {"event": "kill", "phase": phase, "key": key}


@pytest.mark.parametrize(
    "overrides, problem",
    [
        ({}, None),
        ({"store_counts": Counter({"a": 1, "b": 1})}, "lost"),
        ({"store_counts": Counter({"a": 1, "b": 1}), "dlq_keys": {"c"}}, None),
        ({"store_counts": Counter({"a": 2, "b": 1, "c": 1})}, "duplicated"),
        ({"store_counts": Counter({"a": 2, "b": 1, "c": 1}), "kill_records": [_kill("a")]}, "duplicated"),
        ({"store_counts": Counter({"a": 1, "b": 1, "c": 1, "z": 1})}, "unexpected"),
        ({"log_counts": Counter({"a": 2, "b": 1, "c": 1})}, "unexplained_replays"),
        ({"log_counts": Counter({"a": 2, "b": 1, "c": 1}), "kill_records": [_kill("a")]}, None),
        ({"log_counts": Counter({"a": 3, "b": 1, "c": 1}), "kill_records": [_kill("a")]}, "unexplained_replays"),
        ({"log_counts": Counter({"a": 2, "b": 1, "c": 1}), "kill_records": [_kill("b")]}, "unexplained_replays"),
        ({"log_counts": Counter({"a": 2, "b": 1, "c": 1}), "kill_records": [_kill("a", "deadline")]}, None),
        # No store: the log lines are the effects; a replay is allowed only when the effect takes the key.
        (
            {"store_counts": None, "log_counts": Counter({"a": 2, "b": 1, "c": 1}), "kill_records": [_kill("a")]},
            "duplicated",
        ),
        (
            {
                "store_counts": None,
                "log_counts": Counter({"a": 2, "b": 1, "c": 1}),
                "kill_records": [_kill("a")],
                "effect_takes_key": True,
            },
            None,
        ),
        (
            {"store_counts": None, "log_counts": Counter({"a": 2, "b": 1, "c": 1}), "effect_takes_key": True},
            "unexplained_replays",
        ),
        ({"store_counts": None, "log_counts": Counter({"a": 1, "b": 1, "c": 1, "m-1": 1})}, "unexpected"),
    ],
)
def test_report_classes_and_verdict(overrides: dict[str, Any], problem: str | None) -> None:
    report = _build(**overrides)
    code, reasons = effects.verdict(report)

    flagged = [k for k in ("lost", "duplicated", "unexpected", "unexplained_replays") if report["total"][k]]
    assert flagged == ([problem] if problem else [])
    assert code == (1 if problem else 0) and len(reasons) == len(flagged)


def test_replay_after_a_kill_is_reported_with_why_it_is_safe() -> None:
    report = _build(log_counts=Counter({"a": 2, "b": 1, "c": 1}), kill_records=[_kill("a")])

    assert report["keys"]["replayed_after_kill"] == ["a"]
    assert "conditional put" in report["replayed_after_kill_safe_because"]
    assert "replayed after a kill" in effects.render(report)
    assert report["cross_check"]["log_keys_without_store_item"] == 0


def test_a_replay_after_an_error_after_the_effect_is_explained_by_the_runtimes_line_not_by_a_kill() -> None:
    """The record failed after its effect returned (``effect repeated after failure``): its retry runs the effect
    again. That replay is explained by the line (the effect took the key: one store item), never booked to a kill;
    without the line it is unexplained."""
    logs = Counter({"a": 2, "b": 2})
    store = Counter({"a": 1, "b": 1})
    report = _build(log_counts=logs, store_counts=store, failed_after_effect=Counter({"a": 1}))

    assert report["keys"]["replayed_after_error"] == ["a"]
    assert report["keys"]["replayed_after_kill"] == []
    assert report["keys"]["unexplained_replays"] == ["b"], "a replay with neither a kill nor the line"
    assert "replayed after an error" in effects.render(report)
    assert effects.verdict(report)[0] == 1


@pytest.mark.parametrize(
    "overrides, lower_bound",
    [
        ({"store_counts": None}, False),
        ({"store_counts": None, "kill_records": [_kill("a")]}, False),
        ({"store_counts": None, "kill_records": [_kill("a", "deadline")]}, True),
        ({"store_counts": None, "kill_records": [_kill("b", "timeout")]}, True),
        ({"kill_records": [_kill("a", "deadline")]}, False),  # a store counts the effects themselves
    ],
)
def test_effect_lines_are_a_lower_bound_after_stalls_or_deadline_kills(
    overrides: dict[str, Any], lower_bound: bool
) -> None:
    report = _build(**overrides)

    assert report["effects_lower_bound"] is lower_bound
    assert ("a lower bound" in effects.render(report)) is lower_bound


def test_handler_keyed_on_the_message_id_shows_as_duplicates_and_unexpected_keys() -> None:
    """Effects counted per business key in the store; the log lines carry the handler's key (message ids)."""
    report = _build(
        store_counts=Counter({"a": 2, "b": 1, "c": 1}), log_counts=Counter({"m-1": 1, "m-2": 1, "m-3": 1, "m-4": 1})
    )

    assert report["total"]["duplicated"] == 1 and report["total"]["unexpected"] == 4
    assert report["cross_check"]["log_keys_without_store_item"] == 4


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--effect-table", "Outbox"], "arguments --effect-table, --effect-key: give both"),
        (
            ["--key", "order_id[", "--effect-table", "T", "--effect-key", "k"],
            "argument --key: 'order_id[' is not a JMESPath",
        ),
        (["--key", "missing"], "argument --key: 'missing' finds no key in any line"),
        (["--crash-after-effect", "0.6", "--timeouts", "0.6"], "must not exceed 1"),
        (
            ["--effect", "bucket:Invoices:invoices/{key}-*.json"],
            "argument --effect: the object-name template 'invoices/{key}-*.json' can match one name two ways",
        ),
    ],
)
def test_chaos_command_fails_bad_arguments_in_one_line_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    path = write(tmp_path, {"order_id": "o1"}, {"order_id": "o1-2"})  # one key starts another
    argv = [
        "chaos",
        "--app-dir",
        str(REPO / "examples" / "orders"),
        "--stack",
        "OrdersExample",
        "--input",
        str(path),
        "--key",
        "order_id",
        *extra,
    ]
    # argparse keeps the last --key given
    with pytest.raises(SystemExit) as exit_info:
        main(argv)

    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert message in err and len(err.strip().splitlines()) == 1
