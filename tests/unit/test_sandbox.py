"""The sandbox stack (app.py) and PaymentProcessor: defaults, least privilege, context flags, snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app import PaymentsSandboxStack
from aws_cdk import App
from aws_cdk.assertions import Match, Template
from syrupy.extensions.json import JSONSnapshotExtension

from effectively_once import PaymentProcessor, payment_processor
from effectively_once.testing import snapshot_template

from .helpers import CONTEXT, ENV, REPO, new_app

KINDS = ("Standard", "Fifo")


@pytest.fixture(scope="module")
def sandbox() -> tuple[PaymentsSandboxStack, Template]:
    stack = PaymentsSandboxStack(new_app(), "PaymentsSandbox", env=ENV)
    return stack, Template.from_stack(stack)


@pytest.fixture(scope="module")
def template(sandbox: tuple[PaymentsSandboxStack, Template]) -> Template:
    return sandbox[1]


def _processor(sandbox: tuple, kind: str) -> PaymentProcessor:
    return sandbox[0].processors[kind]


def _id(sandbox: tuple, token: str) -> str:
    resolved = sandbox[0].resolve(token)
    return resolved.get("Ref") or resolved["Fn::GetAtt"][0]


def _resource(sandbox: tuple, token: str) -> dict:
    return sandbox[1].to_json()["Resources"][_id(sandbox, token)]


def _function(sandbox: tuple, kind: str) -> dict:
    return _resource(sandbox, _processor(sandbox, kind).function.function_name)["Properties"]


# --- documented defaults of PaymentProcessor --------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_function_runs_the_payment_handler_on_python_3_14_arm64(sandbox: tuple, kind: str) -> None:
    props = _function(sandbox, kind)
    assert props["Runtime"] == "python3.14"
    assert props["Handler"] == "payments.handler.lambda_handler"
    assert props["Architectures"] == ["arm64"]


@pytest.mark.parametrize("kind", KINDS)
def test_function_timeout_defaults_to_thirty_seconds_and_memory_to_256(sandbox: tuple, kind: str) -> None:
    props = _function(sandbox, kind)
    assert props["Timeout"] == 30
    assert props["MemorySize"] == 256


@pytest.mark.parametrize("kind", KINDS)
def test_function_gets_the_runtime_from_its_runtime_layer(sandbox: tuple, kind: str) -> None:
    layer = _processor(sandbox, kind).runtime_layer.layer
    assert {"Ref": _id(sandbox, layer.layer_version_arn)} in _function(sandbox, kind)["Layers"]
    content = _resource(sandbox, layer.layer_version_arn)["Properties"]
    assert content["CompatibleRuntimes"][-1] == "python3.14" and content["CompatibleArchitectures"] == [
        "x86_64",
        "arm64",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_powertools_layer_is_the_pinned_release_resolved_at_deploy_time(sandbox: tuple, kind: str) -> None:
    runtime = [{"Ref": id} for id in sandbox[1].find_resources("AWS::Lambda::LayerVersion")]
    (layer,) = [layer for layer in _function(sandbox, kind)["Layers"] if layer not in runtime]
    assert sandbox[1].to_json()["Parameters"][layer["Ref"]] == {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": f"/aws/service/powertools/python/arm64/python3.14/{payment_processor.POWERTOOLS_VERSION}",
    }


def test_powertools_layer_release_matches_the_pinned_library() -> None:
    pins = dict(
        line.split("==")
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert pins["aws-lambda-powertools"] == payment_processor.POWERTOOLS_VERSION


@pytest.mark.parametrize("kind", KINDS)
def test_environment_fulfils_the_handler_contract(sandbox: tuple, kind: str) -> None:
    processor = _processor(sandbox, kind)
    resolve = sandbox[0].resolve
    assert _function(sandbox, kind)["Environment"]["Variables"] == {
        "IDEMPOTENCY_TABLE_NAME": resolve(processor.table.table.table_arn),
        # Standard: the event consumer's expiry (the on-failure queue's 14 days + the 6 h maximum event age), so a
        # late redrive of a failure record finds the first run's record; Fifo: the queue consumer's 4 days.
        "IDEMPOTENCY_EXPIRY_SECONDS": str(14 * 24 * 3600 + 6 * 3600 if kind == "Standard" else 4 * 24 * 3600),
        "LEDGER_TABLE_NAME": resolve(processor.ledger.table_name),
        "POWERTOOLS_SERVICE_NAME": "payments",
        "POWERTOOLS_METRICS_NAMESPACE": "EffectivelyOnce",
        # issue 14: permanent failures go to the queue's DLQ on first sight (read by the runtime, not by settings)
        "DEAD_LETTER_QUEUE_URL": resolve(processor.queue.dead_letter_queue.queue_url),
        # issue 30: an event refused for good is recorded on the event consumer's on-failure queue by the runtime
        **(
            {"ON_FAILURE_QUEUE_URL": resolve(sandbox[0].payment_events.on_failure_queue.queue_url)}
            if kind == "Standard"
            else {}
        ),
        # issue 31: the queue's receive budget and visibility timeout, keyed by its ARN (the records' eventSourceARN)
        "SOURCE_QUEUES": {
            "Fn::Join": [
                "",
                [
                    '{"',
                    resolve(processor.queue.queue.queue_arn),
                    '":{"maxReceiveCount":5,"visibilityTimeout":'
                    f"{int(processor.consumer.visibility_timeout.to_seconds())}}}}}",
                ],
            ]
        },
    }


@pytest.mark.parametrize("kind", KINDS)
def test_log_group_is_stack_created_with_one_month_retention(sandbox: tuple, kind: str) -> None:
    processor = _processor(sandbox, kind)
    log_group = _resource(sandbox, processor.log_group.log_group_name)
    assert log_group["Type"] == "AWS::Logs::LogGroup"
    assert log_group["Properties"]["RetentionInDays"] == 30
    assert log_group["DeletionPolicy"] == "Retain"
    assert _function(sandbox, kind)["LoggingConfig"] == {
        "LogGroup": sandbox[0].resolve(processor.log_group.log_group_name)
    }


@pytest.mark.parametrize("kind", KINDS)
def test_ledger_is_keyed_on_charge_id_encrypted_with_recovery_and_retained(sandbox: tuple, kind: str) -> None:
    ledger = _resource(sandbox, _processor(sandbox, kind).ledger.table_name)
    props = ledger["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "charge_id", "KeyType": "HASH"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert ledger["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("kind", KINDS)
def test_idempotency_table_is_retained_by_default(sandbox: tuple, kind: str) -> None:
    assert _resource(sandbox, _processor(sandbox, kind).table.table.table_name)["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("kind", KINDS)
def test_queue_visibility_timeout_is_filled_in_and_max_receive_count_is_five(sandbox: tuple, kind: str) -> None:
    props = _resource(sandbox, _processor(sandbox, kind).queue.queue.queue_arn)["Properties"]
    assert props["VisibilityTimeout"] == 6 * 30
    assert props["RedrivePolicy"]["maxReceiveCount"] == 5


def test_fifo_processor_has_fifo_source_and_dead_letter_queue(sandbox: tuple) -> None:
    queue = _processor(sandbox, "Fifo").queue
    for q in (queue.queue, queue.dead_letter_queue):
        props = _resource(sandbox, q.queue_arn)["Properties"]
        assert props["FifoQueue"] is True and props["QueueName"].endswith(".fifo")


def test_standard_processor_queues_carry_no_fifo_key(sandbox: tuple) -> None:
    queue = _processor(sandbox, "Standard").queue
    for q in (queue.queue, queue.dead_letter_queue):
        assert "FifoQueue" not in _resource(sandbox, q.queue_arn)["Properties"]


@pytest.mark.parametrize("kind", KINDS)
def test_one_mapping_per_processor_with_report_batch_item_failures(sandbox: tuple, kind: str) -> None:
    sandbox[1].resource_properties_count_is(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": sandbox[0].resolve(_processor(sandbox, kind).queue.queue.queue_arn),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": 10,
        },
        1,
    )


# Least privilege (exact grants, wildcards, managed policies) and KMS: test_iam.py.


# --- app: outputs and context flags (stateful logical ids: test_logical_ids.py) ------------------------------
def test_outputs_name_what_was_deployed(template: Template) -> None:
    outputs = template.to_json()["Outputs"]
    for kind in KINDS:
        for suffix in ("QueueUrl", "DeadLetterQueueUrl", "IdempotencyTableName", "LedgerTableName", "FunctionName"):
            assert f"{kind}{suffix}" in outputs
    assert "StandardOnFailureQueueUrl" in outputs and "FifoOnFailureQueueUrl" not in outputs


# --- observability (issue 7) ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_each_processor_has_five_alarms_three_queries_and_a_dashboard(sandbox: tuple, kind: str) -> None:
    processor = _processor(sandbox, kind)
    consumer = processor.consumer
    alarms = (
        consumer.dlq_depth_alarm,
        consumer.oldest_message_age_alarm,
        consumer.errors_alarm,
        consumer.throttles_alarm,
        consumer.failed_records_alarm,
    )
    assert {_resource(sandbox, a.alarm_arn)["Type"] for a in alarms} == {"AWS::CloudWatch::Alarm"}
    for query in (
        consumer.duplicate_deliveries_query,
        consumer.idempotency_rejections_query,
        consumer.effects_per_key_query,
    ):
        assert _resource(sandbox, query.ref)["Properties"]["LogGroupNames"] == [
            sandbox[0].resolve(processor.log_group.log_group_name)
        ]
    assert _resource(sandbox, processor.dashboard.dashboard_name)["Type"] == "AWS::CloudWatch::Dashboard"


def test_sandbox_totals_of_observability_resources(template: Template) -> None:
    counts = {
        t: len(template.find_resources(t))
        for t in (
            "AWS::CloudWatch::Alarm",
            "AWS::Logs::QueryDefinition",
            "AWS::CloudWatch::Dashboard",
            "AWS::Lambda::EventInvokeConfig",
        )
    }
    assert counts == {
        "AWS::CloudWatch::Alarm": 15,  # 5 per processor, and the event consumer's 5
        "AWS::Logs::QueryDefinition": 6,
        "AWS::CloudWatch::Dashboard": 2,
        "AWS::Lambda::EventInvokeConfig": 1,
    }


def test_only_the_standard_processor_has_the_async_on_failure_destination(sandbox: tuple) -> None:
    standard, events = _processor(sandbox, "Standard").consumer, sandbox[0].payment_events
    (invoke,) = sandbox[1].find_resources("AWS::Lambda::EventInvokeConfig").values()
    assert invoke["Properties"]["FunctionName"] == sandbox[0].resolve(standard.function.function_name)
    assert invoke["Properties"]["DestinationConfig"]["OnFailure"]["Destination"] == sandbox[0].resolve(
        events.on_failure_queue.queue_arn
    )
    assert standard.event_invoke_config is None, "the event consumer owns it, not async_invocation (deprecated)"
    assert _processor(sandbox, "Fifo").consumer.event_invoke_config is None


def test_an_eventbridge_rule_on_a_custom_bus_delivers_payment_events_to_the_standard_function(sandbox: tuple) -> None:
    (rule,) = sandbox[1].find_resources("AWS::Events::Rule").values()
    (target,) = rule["Properties"]["Targets"]
    function = _processor(sandbox, "Standard").function
    assert target["Arn"] == sandbox[0].resolve(function.function_arn)
    assert rule["Properties"]["EventPattern"] == {
        "source": ["effectively-once.sandbox"],
        "detail-type": ["PaymentRequested"],
    }
    assert rule["Properties"]["EventBusName"] == {
        "Ref": _id(sandbox, sandbox[0].node.find_child("PaymentsBus").event_bus_name)
    }
    assert target["DeadLetterConfig"]["Arn"] == sandbox[0].resolve(sandbox[0].undelivered_payment_events.queue_arn)


@pytest.fixture(scope="module")
def flagged() -> Template:
    app = new_app(destroy_on_delete="true", function_timeout_seconds="5", max_receive_count="3")
    return Template.from_stack(PaymentsSandboxStack(app, "PaymentsSandbox", env=ENV))


#: Resource types that hold data a stack deletion would lose: payments waiting or dead-lettered (queues),
#: idempotency records and charges (tables), the audit trail (log groups).
STATEFUL_TYPES = ("AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::Logs::LogGroup")


def _stateful(template: Template) -> dict[str, tuple[str | None, str | None]]:
    """{logical id: (DeletionPolicy, UpdateReplacePolicy)} of every stateful resource in the template."""
    return {
        logical_id: (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy"))
        for logical_id, resource in template.to_json()["Resources"].items()
        if resource["Type"] in STATEFUL_TYPES
    }


def test_every_stateful_resource_is_what_the_walk_covers(sandbox: tuple) -> None:
    stack = sandbox[0]
    expected = {
        _id(sandbox, stack.payment_events.on_failure_queue.queue_arn),
        _id(sandbox, stack.undelivered_payment_events.queue_arn),
    }
    for kind in KINDS:
        processor = _processor(sandbox, kind)
        expected |= {
            _id(sandbox, processor.queue.queue.queue_arn),
            _id(sandbox, processor.queue.dead_letter_queue.queue_arn),
            _id(sandbox, processor.table.table.table_name),
            _id(sandbox, processor.ledger.table_name),
            _id(sandbox, processor.log_group.log_group_name),
        }
    assert set(_stateful(sandbox[1])) == expected and len(expected) == 12


def test_every_stateful_resource_is_retained_by_default(template: Template) -> None:
    assert set(_stateful(template).values()) == {("Retain", "Retain")}


def test_context_destroy_on_delete_destroys_every_stateful_resource(flagged: Template) -> None:
    policies = _stateful(flagged)
    assert len(policies) == 12 and set(policies.values()) == {("Delete", "Delete")}


def test_context_sets_function_timeout_and_max_receive_count(flagged: Template) -> None:
    flagged.all_resources_properties("AWS::Lambda::Function", Match.object_like({"Timeout": 5}))
    flagged.resource_properties_count_is(
        "AWS::SQS::Queue", {"VisibilityTimeout": 30, "RedrivePolicy": Match.object_like({"maxReceiveCount": 3})}, 2
    )


# --- snapshot and compliance ---------------------------------------------------------------------------
def test_snapshot(template: Template, snapshot) -> None:
    assert snapshot_template(template) == snapshot.use_extension(JSONSnapshotExtension)


def test_builtin_cloudformation_validation_passes(tmp_path: Path) -> None:
    # The one synth with the built-in CloudFormation validation on (off elsewhere for speed).
    app = App(context=CONTEXT, outdir=str(tmp_path))
    PaymentsSandboxStack(app, "PaymentsSandbox", env=ENV)
    app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert [v for p in report["pluginReports"] for v in p.get("violations", [])] == []
