"""What a chaos run will drive, read from the synthesized template before the deploy (``aws/target_plan.py``; issue
30, item 1): the same labels discovery gives after the deploy, and a stack with nothing to drive refused in one line
naming its functions."""

from __future__ import annotations

from typing import Any

import pytest

from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.aws.target_plan import planned_targets
from effectively_once_local.traffic.chaos_input import InputFileError, resolve_queue


def _fn(name: str) -> dict[str, Any]:
    return {name: {"Type": "AWS::Lambda::Function", "Properties": {}}}


def _config(function: str) -> dict[str, Any]:
    return {
        f"{function}Config": {
            "Type": "AWS::Lambda::EventInvokeConfig",
            "Properties": {"FunctionName": {"Ref": function}, "Qualifier": "$LATEST"},
        }
    }


QUEUED = {
    **_fn("Worker"),
    "Orders": {"Type": "AWS::SQS::Queue", "Properties": {}},
    "Named": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "named-orders"}},
    "Kinesis": {"Type": "AWS::Kinesis::Stream", "Properties": {}},
    **{
        f"Esm{source}": {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {"EventSourceArn": {"Fn::GetAtt": [source, "Arn"]}, "FunctionName": {"Ref": "Worker"}},
        }
        for source in ("Orders", "Named", "Kinesis")
    },
}
RULED = {
    **_fn("Handler"),
    **_config("Handler"),
    "Rule": {"Type": "AWS::Events::Rule", "Properties": {"Targets": [{"Arn": {"Fn::GetAtt": ["Handler", "Arn"]}}]}},
}
TOPICAL = {
    **_fn("Handler"),
    **_config("Handler"),
    "Sub": {
        "Type": "AWS::SNS::Subscription",
        "Properties": {"Protocol": "lambda", "Endpoint": {"Fn::GetAtt": ["Handler", "Arn"]}},
    },
}


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (QUEUED, {"Orders": "S-Orders", "Named": "named-orders"}),
        (RULED, {"async-Handler": "async-Handler"}),
        (TOPICAL, {"async-Handler": "async-Handler"}),
        ({**QUEUED, **RULED}, {"Orders": "S-Orders", "Named": "named-orders", "async-Handler": "async-Handler"}),
    ],
    ids=["sqs-mappings", "eventbridge-only", "sns-only", "both"],
)
def test_the_targets_are_read_from_the_template(resources: dict[str, Any], expected: dict[str, str]) -> None:
    assert planned_targets({"Resources": resources}, "S") == expected


def test_a_stack_with_nothing_to_drive_is_refused_naming_its_functions() -> None:
    with pytest.raises(DeployError) as refused:
        planned_targets({"Resources": {**_fn("Worker"), **_fn("Handler")}}, "Idle")
    assert str(refused.value).startswith("stack Idle has nothing to drive: no SQS event source mapping")
    assert str(refused.value).endswith("its functions: Handler, Worker")


def test_a_function_nothing_in_the_stack_invokes_is_driven_by_direct_invocations() -> None:
    """Issue 30, item 1: an ``IdempotentEventConsumer``'s function with no rule or topic is a target (its callers
    ``Invoke`` it with ``InvocationType="Event"``), no longer refused."""
    resources = {**_fn("Worker"), **_fn("Handler"), **_config("Handler")}

    assert planned_targets({"Resources": resources}, "Direct") == {"async-Handler": "async-Handler"}


def test_input_lines_are_checked_against_the_planned_targets() -> None:
    """The chaos run resolves every line's ``queue`` against these labels before the deploy (``_check_plan``)."""
    both = planned_targets({"Resources": {**QUEUED, **RULED}}, "S")

    assert resolve_queue("async", both) == "async-Handler"
    assert resolve_queue("Orders", both) == "Orders"
    assert resolve_queue("NAMED", both) == "Named"  # a part of a label or name, case-insensitive
    assert resolve_queue(None, planned_targets({"Resources": RULED}, "S")) == "async-Handler"  # one target
    with pytest.raises(InputFileError, match="each line must name its queue"):
        resolve_queue(None, both)
    with pytest.raises(InputFileError, match=r"queue 'payments' matches no queue of the stack"):
        resolve_queue("payments", both)


@pytest.mark.parametrize(
    "notification",
    [
        {
            "Type": "Custom::S3BucketNotifications",
            "Properties": {
                "BucketName": {"Ref": "Docs"},
                "NotificationConfiguration": {
                    "LambdaFunctionConfigurations": [{"LambdaFunctionArn": {"Fn::GetAtt": ["Handler", "Arn"]}}]
                },
            },
        },
        {
            "Type": "AWS::S3::Bucket",
            "Properties": {
                "NotificationConfiguration": {
                    "LambdaConfigurations": [{"Function": {"Fn::GetAtt": ["Handler", "Arn"]}}],
                },
            },
        },
    ],
    ids=["cdk-custom-resource", "bucket-property"],
)
def test_an_s3_notified_function_is_refused_before_the_deploy_saying_why(notification: dict[str, Any]) -> None:
    """The local AWS cannot deliver S3 notifications (docs/moto-bugs.md, "Not bridged"): refused, even beside
    targets it can drive, naming the bucket and the function."""
    resources = {**QUEUED, **_fn("Handler"), **_config("Handler"), "Docs": notification}
    if notification["Type"] == "Custom::S3BucketNotifications":
        resources["DocsBucket"] = {"Type": "AWS::S3::Bucket", "Properties": {}}
        resources["Docs"]["Properties"]["BucketName"] = {"Ref": "DocsBucket"}

    with pytest.raises(DeployError, match=r"^stack S: S3 notifications \(Docs(Bucket)? -> Handler\) cannot be driven"):
        planned_targets({"Resources": resources}, "S")
