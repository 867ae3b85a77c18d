"""Security gates: cdk-nag 3.x (AwsSolutions + Serverless packs), cfn-lint, data-safety defaults.

One synthesis for the whole module: the sandbox app's stack and the ``Constructs`` stack (each construct on its
own) in one app with both rule packs registered as validation plugins. cdk-nag findings surface as a
``RuntimeError`` naming ``validation-report.json``; rule ids are read from that report. The built-in
CloudFormation validation stays off here (test_sandbox.py runs it once).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cfnlint.api
import pytest
from app import PaymentsSandboxStack
from aws_cdk import App, Stack, Validations
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from .helpers import CONTEXT, ENV, acknowledged_rules, acknowledgement_reasons, constructs_stack

#: cfn-lint findings accepted on CDK output: W3005 (redundant DependsOn that CDK generates).
CFN_LINT_ACCEPTED = {"W3005"}
DLQ_RETENTION_SECONDS = 14 * 24 * 3600


def _library_acknowledgements(prefix: str) -> set[tuple[str, str]]:
    """What the library acknowledges per PaymentProcessor (or per construct set) under ``prefix``."""
    return {
        (f"{prefix}/Queue/DeadLetterQueue/Resource", "Serverless-SQSRedrivePolicy"),
        (f"{prefix}/Consumer/EventSourceMapping/Resource", "Serverless-LambdaEventSourceMappingDestination"),
        (f"{prefix}/Function/Resource", "Serverless-LambdaDLQ"),
        (f"{prefix}/Function/Resource", "Serverless-LambdaTracing"),
    }


#: Every acknowledged finding, exact: a new acknowledgement must be added here, with review.
ACKNOWLEDGED = (
    _library_acknowledgements("PaymentsSandbox/Standard")
    | _library_acknowledgements("PaymentsSandbox/Fifo")
    | _library_acknowledgements("Constructs/Processor")
    | {
        # the sandbox's asynchronous entry: the event consumer's on-failure queue, and the rule target's DLQ (app.py)
        ("PaymentsSandbox/PaymentEvents/OnFailureQueue/Resource", "AwsSolutions-SQS3"),
        ("PaymentsSandbox/PaymentEvents/OnFailureQueue/Resource", "Serverless-SQSRedrivePolicy"),
        ("PaymentsSandbox/PaymentEventsUndelivered/Resource", "AwsSolutions-SQS3"),
        ("PaymentsSandbox/PaymentEventsUndelivered/Resource", "Serverless-SQSRedrivePolicy"),
        ("Constructs/Queue/DeadLetterQueue/Resource", "Serverless-SQSRedrivePolicy"),
        ("Constructs/FifoQueue/DeadLetterQueue/Resource", "Serverless-SQSRedrivePolicy"),
        ("Constructs/Consumer/EventSourceMapping/Resource", "Serverless-LambdaEventSourceMappingDestination"),
        # the test's user function: the user's own acknowledgements (helpers.user_function)
        ("Constructs/Function/Resource", "Serverless-LambdaDLQ"),
        ("Constructs/Function/Resource", "Serverless-LambdaTracing"),
    }
)


@pytest.fixture(scope="module")
def nagged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    outdir = tmp_path_factory.mktemp("nag")
    app = App(context=CONTEXT, outdir=str(outdir), builtin_cloud_formation_validation=False)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    PaymentsSandboxStack(app, "PaymentsSandbox", env=ENV)
    constructs_stack(app)
    # Canary: a bare queue that both packs must flag, so a gate that silently stopped running fails here.
    sqs.Queue(Stack(app, "Canary", env=ENV), "BareQueue")
    error = None
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings: "ValidationFailed ... validation-report.json"
        error = str(exc)
    report_file = outdir / "validation-report.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {"pluginReports": []}
    return {"app": app, "outdir": outdir, "error": error, "report": report}


def _findings(report: dict[str, Any]) -> list[str]:
    return sorted(
        f"{violation['ruleName']} at {resource['constructPath']}"
        for plugin in report["pluginReports"]
        for violation in plugin.get("violations", [])
        for resource in violation["violatingConstructs"]
    )


def _templates(outdir: Path) -> dict[str, dict[str, Any]]:
    """The gated templates (the canary's excluded)."""
    return {
        path.name: json.loads(path.read_text())
        for path in sorted(outdir.glob("*.template.json"))
        if not path.name.startswith("Canary")
    }


# --- cdk-nag -------------------------------------------------------------------------------------------
def test_both_rule_packs_ran_and_failed_the_synth_on_the_canary(nagged: dict) -> None:
    assert "validation-report.json" in nagged["error"]
    canary = {finding.split(" at ")[0] for finding in _findings(nagged["report"]) if " at Canary/" in finding}
    assert canary == {"AwsSolutions-SQS3", "AwsSolutions-SQS4", "Serverless-SQSRedrivePolicy"}


def test_no_unacknowledged_nag_findings(nagged: dict) -> None:
    assert [finding for finding in _findings(nagged["report"]) if " at Canary/" not in finding] == []


def test_acknowledged_rules_are_exactly_the_reviewed_set(nagged: dict) -> None:
    assert acknowledged_rules(nagged["app"]) == ACKNOWLEDGED


def test_every_acknowledgement_gives_a_reason(nagged: dict) -> None:
    reasons = acknowledgement_reasons(nagged["app"])
    assert reasons and all(len(reason) >= 40 for reason in reasons), reasons


# --- cfn-lint ------------------------------------------------------------------------------------------
def test_both_templates_were_synthesized(nagged: dict) -> None:
    assert sorted(_templates(nagged["outdir"])) == ["Constructs.template.json", "PaymentsSandbox.template.json"]


def test_cfn_lint_finds_nothing_but_w3005(nagged: dict) -> None:
    findings = []
    for name, template in _templates(nagged["outdir"]).items():
        for match in cfnlint.api.lint(json.dumps(template), regions=[ENV.region]):
            if match.rule.id not in CFN_LINT_ACCEPTED:
                findings.append(f"{name}: {match}")
    assert findings == []


# --- data safety defaults ------------------------------------------------------------------------------
def _resources(nagged: dict, type_: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{name}:{logical_id}", resource)
        for name, template in _templates(nagged["outdir"]).items()
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == type_
    ]


def test_every_table_is_encrypted_recoverable_and_retained(nagged: dict) -> None:
    tables = _resources(nagged, "AWS::DynamoDB::Table")
    assert len(tables) == 7  # sandbox 2 x (idempotency + ledger), Constructs: table + processor's two
    for name, table in tables:
        props = table["Properties"]
        assert props["SSESpecification"]["SSEEnabled"] is True, name
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}, name
        assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain", name


def test_every_dead_letter_queue_keeps_messages_fourteen_days(nagged: dict) -> None:
    queues = dict(_resources(nagged, "AWS::SQS::Queue"))
    targets = {
        name.split(":")[0] + ":" + queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        for name, queue in queues.items()
        if "RedrivePolicy" in queue["Properties"]
    }
    assert len(targets) == 5
    for name in targets:
        assert queues[name]["Properties"]["MessageRetentionPeriod"] == DLQ_RETENTION_SECONDS, name


def test_every_queue_is_encrypted(nagged: dict) -> None:
    for name, queue in _resources(nagged, "AWS::SQS::Queue"):
        props = queue["Properties"]
        assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props, name


def test_every_queue_denies_requests_without_tls(nagged: dict) -> None:
    queues = {name for name, _ in _resources(nagged, "AWS::SQS::Queue")}
    denied = set()
    for name, policy in _resources(nagged, "AWS::SQS::QueuePolicy"):
        template = name.split(":")[0]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if statement["Effect"] == "Deny" and statement.get("Condition") == {
                "Bool": {"aws:SecureTransport": "false"}
            }:
                denied.update(f"{template}:{queue['Ref']}" for queue in policy["Properties"]["Queues"])
    assert denied == queues
