"""No silent flags (issue 43, item 3): once the stack is synthesized, a fault class that cannot strike on it is
refused before the first send when the user gave its flag, naming the flag that would strike instead, and left out of
the draw with a note when it was defaulted. No AWS: templates and assets written here, as ``cdk synth`` writes them.
The end-to-end refusal on ``examples/plain`` is in ``tests/e2e/test_proof_plain.py``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack.inert_faults import InertFlagError, drawn, inert_faults, stack_facts
from effectively_once_local.chaos.fault_model import RANDOM_WINDOW_FLOOR_SECONDS, ChaosConfig, EventLog, InvocationChaos
from effectively_once_local.proof.faults_struck import faults_block, render_faults

from .test_faults_struck import DEFAULTS

PLAIN = "import boto3\n\ndef handler(event, context):\n    boto3.client('dynamodb').batch_write_item(RequestItems={})\n"
ON_RUNTIME = "from effectively_once_runtime import Consumer\n"
#: The CDK's managed policy of every function's role: logging only.
PARTITION, BASIC = {"Ref": "AWS::Partition"}, ":iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
LOGS_ONLY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "logs:*", "Resource": "*"}]}


def _policy(*actions: str) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}]}


def _stack(
    cdk_out: Path,
    *,
    code: str = PLAIN,
    policy: dict[str, Any] | None = None,
    fifo: bool = False,
    asynchronous: bool = False,
    managed: list[Any] | None = None,
) -> Path:
    """``Orders``: one queue (FIFO or not) mapped to function ``Handler`` (or ``Handler`` as an asynchronous target),
    its code an asset holding ``code``, its role allowed ``policy``."""
    asset = cdk_out / "asset.abc123"
    asset.mkdir(parents=True, exist_ok=True)
    (asset / "index.py").write_text(code)
    role = {
        "Type": "AWS::IAM::Role",
        "Properties": {
            "ManagedPolicyArns": managed if managed is not None else [{"Fn::Join": ["", ["arn:", PARTITION, BASIC]]}]
        },
    }
    resources: dict[str, Any] = {
        "HandlerRole": role,
        "HandlerRoleDefaultPolicy": {
            "Type": "AWS::IAM::Policy",
            "Properties": {
                "PolicyDocument": policy or _policy("sqs:ReceiveMessage", "sqs:DeleteMessage"),
                "Roles": [{"Ref": "HandlerRole"}],
            },
        },
        "Handler": {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Role": {"Fn::GetAtt": ["HandlerRole", "Arn"]}, "Timeout": 300},
            "Metadata": {"aws:asset:path": asset.name},
        },
    }
    if asynchronous:
        resources["Config"] = {
            "Type": "AWS::Lambda::EventInvokeConfig",
            "Properties": {"FunctionName": {"Ref": "Handler"}, "Qualifier": "$LATEST"},
        }
    else:
        resources["Queue"] = {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": True} if fifo else {}}
        resources["Mapping"] = {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"FunctionName": {"Ref": "Handler"}, "EventSourceArn": {"Fn::GetAtt": ["Queue", "Arn"]}},
        }
    (cdk_out / "Orders.template.json").write_text(json.dumps({"Resources": resources}))
    return cdk_out


def _inert(cdk_out: Path, chaos: ChaosConfig = DEFAULTS, **facts: Any) -> dict[str, str]:
    return {i.fault.flag: i.why for i in inert_faults(chaos, stack_facts(cdk_out, "Orders", **facts))}


def test_a_plain_handler_writing_dynamodb_leaves_only_the_effect_line_kills_and_async_duplicates_inert(
    tmp_path: Path,
) -> None:
    cdk_out = _stack(tmp_path, policy=_policy("dynamodb:BatchWriteItem", "dynamodb:GetItem"))

    facts = stack_facts(cdk_out, "Orders")

    assert (facts.functions, facts.on_runtime, facts.writing, facts.kinds) == (
        ("Handler",),
        (),
        ("Handler",),
        frozenset({"standard"}),
    )
    assert set(_inert(cdk_out)) == {"--crash-after-effect", "--async-duplicate"}
    # --partial-batch-writes (item 5a) needs a role that may call BatchWriteItem
    partial = ChaosConfig(partial_batch_write=0.5)
    assert _inert(cdk_out, partial) == {}
    puts_only = _inert(_stack(tmp_path / "p", policy=_policy("dynamodb:PutItem")), partial)
    assert (
        set(puts_only) == {"--partial-batch-writes"}
        and "may call DynamoDB BatchWriteItem" in puts_only["--partial-batch-writes"]
    )


def test_a_handler_on_the_runtime_has_its_effect_line(tmp_path: Path) -> None:
    cdk_out = _stack(tmp_path, code=ON_RUNTIME)

    assert set(_inert(cdk_out)) == {"--async-duplicate"}, "the runtime writes its effect line (and may dead-letter)"


def test_a_handler_whose_role_allows_no_watched_write_has_no_place_for_write_kills_or_stalls(tmp_path: Path) -> None:
    cdk_out = _stack(tmp_path, policy=LOGS_ONLY)

    inert = _inert(cdk_out)

    assert set(inert) == {"--crash-after-effect", "--crash-after-write", "--timeouts", "--async-duplicate"}
    assert "may make a write the runner watches" in inert["--crash-after-write"]
    # A wildcard allows the writes, as IAM reads it; so do a SQL driver in the code and a SQL store of the run.
    assert "--crash-after-write" not in _inert(_stack(tmp_path / "w", policy=_policy("dynamodb:*")))
    assert "--crash-after-write" not in _inert(_stack(tmp_path / "s", policy=_policy("s3:PutObject*")))
    assert "--crash-after-write" not in _inert(_stack(tmp_path / "q", policy=LOGS_ONLY, code="import sqlite3\n"))
    assert "--crash-after-write" not in _inert(_stack(tmp_path / "p", policy=LOGS_ONLY), sql_store=True)
    # A managed policy the stack does not spell out might allow anything: never called inert.
    other = ["arn:aws:iam::aws:policy/AmazonDynamoDBFullAccess"]
    assert "--crash-after-write" not in _inert(_stack(tmp_path / "m", policy=LOGS_ONLY, managed=other))


def test_fifo_only_and_async_only_stacks(tmp_path: Path) -> None:
    fifo = _inert(_stack(tmp_path / "f", fifo=True, policy=_policy("dynamodb:PutItem")))
    asynchronous = _inert(_stack(tmp_path / "a", asynchronous=True, policy=_policy("dynamodb:PutItem")))

    assert set(fifo) == {"--crash-after-effect", "--concurrent-duplicates", "--async-duplicate"}
    assert "deduplication id drops the twin" in fifo["--concurrent-duplicates"]
    assert set(asynchronous) == {"--crash-after-effect"}
    assert _inert(_stack(tmp_path / "n", policy=LOGS_ONLY), ChaosConfig()) == {}, "nothing asked, nothing inert"


def test_a_flag_given_that_cannot_strike_is_refused_in_one_line_naming_the_flag_that_would(tmp_path: Path) -> None:
    facts = stack_facts(_stack(tmp_path, policy=_policy("dynamodb:BatchWriteItem")), "Orders")
    chaos = ChaosConfig(crash_after_charge=0.5)

    with pytest.raises(InertFlagError) as raised:
        drawn(chaos, facts, {"--crash-after-effect", "--resend"})

    message = str(raised.value)
    assert "\n" not in message and message.startswith("stack Orders: cannot strike, refused before the first send:")
    assert "--crash-after-effect 0.5: no function the run drives (Handler) is built on effectively_once_runtime" in (
        message
    )
    assert "--crash-after-write kills right after any handler's writes" in message
    # A handler that cannot write either: the refusal names a kill that strikes any handler.
    quiet = stack_facts(_stack(tmp_path / "q", policy=LOGS_ONLY), "Orders")
    with pytest.raises(InertFlagError, match=r"--timeouts 0\.2: .*; --crash-random kills at a moment inside any"):
        drawn(ChaosConfig(timeout=0.2), quiet, {"--timeouts"})


def test_a_defaulted_class_that_cannot_strike_is_left_out_of_the_draw_with_a_note(tmp_path: Path) -> None:
    facts = stack_facts(_stack(tmp_path, policy=_policy("dynamodb:BatchWriteItem")), "Orders")

    chaos, left_out = drawn(DEFAULTS, facts, {"--crash-after-write", "--seed"})

    assert (chaos.crash_after_charge, chaos.async_duplicate) == (0.0, 0.0), "never drawn"
    assert (chaos.crash_after_write, chaos.crash_random, chaos.resend) == (0.05, 0.02, 0.1), "the others kept"
    assert [(r["flag"], r["asked"]) for r in left_out] == [("--crash-after-effect", 0.03), ("--async-duplicate", 0.1)]
    block = faults_block(
        {"total": {"kills": {}, "effect_log_lines": 0}, "sends": {"by_kind": {}}}, chaos, {"standard"}, 3, left_out
    )
    assert block["left_out"] == left_out
    assert {r["fault"] for r in block["could_not_strike"]} == set(), "left out, not reported as missed"
    lines = render_faults(block)
    assert any(
        line.startswith("  left out of the draw: --crash-after-effect 0.03 (default): no function the run drives")
        and line.endswith("--crash-after-write kills right after any handler's writes")
        for line in lines
    ), lines


def test_a_random_moment_is_drawn_within_twice_the_longest_invocation(tmp_path: Path) -> None:
    """``--crash-random`` over a 300 s timeout: drawn in the whole timeout, a kill would almost never fall inside half
    a second of work. The window is twice the environment's longest invocation, at least the floor."""
    chaos = InvocationChaos(ChaosConfig(), EventLog(tmp_path / "chaos.jsonl"), "q")
    assert chaos.random_window() == RANDOM_WINDOW_FLOOR_SECONDS, "no invocation seen yet"

    chaos.begin(deadline=time.monotonic() + 300)
    chaos._started -= 4.0  # an invocation of four seconds
    chaos.end()

    assert 8.0 <= chaos.random_window() < 8.5


def test_review_cases_attached_policies_sql_only_writers_and_unread_templates(tmp_path: Path) -> None:
    """A managed policy or role policy naming the role counts; a handler writing only SQL cannot be throttled (boto3
    calls only) though its commits are kill points; a template whose functions are not read here is never judged."""
    attached = _stack(tmp_path / "m", policy=LOGS_ONLY)
    template = json.loads((attached / "Orders.template.json").read_text())
    template["Resources"]["Writes"] = {
        "Type": "AWS::IAM::ManagedPolicy",
        "Properties": {"Roles": [{"Ref": "HandlerRole"}], "PolicyDocument": _policy("dynamodb:PutItem")},
    }
    (attached / "Orders.template.json").write_text(json.dumps(template))
    assert "--crash-after-write" not in _inert(attached)

    sql_only = _inert(_stack(tmp_path / "q", policy=LOGS_ONLY, code="import sqlite3\n"), ChaosConfig(throttle=0.2))
    assert set(sql_only) == {"--throttle"} and "a SQL commit is never throttled" in sql_only["--throttle"]

    unread = _stack(tmp_path / "u", policy=LOGS_ONLY)
    template = json.loads((unread / "Orders.template.json").read_text())
    template["Resources"]["Mapping"]["Properties"]["FunctionName"] = "orders-fn"  # a literal name
    (unread / "Orders.template.json").write_text(json.dumps(template))
    assert _inert(unread) == {}, "no function read: nothing judged inert (an empty stack is not FIFO-only)"
