"""The 4 KB environment limit of a consumer's function, checked at synth by a validation (so variables added after
the consumer count too); deploy-time values are counted at their upper bounds (limits.py) and only warn.

Lambda measures the variables as one compact JSON object (its refusal quotes it: "String measured: {...}"): the
padding below is computed that way, independently of the library.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Annotations, Match

from effectively_once import ExistingQueue, IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue, limits

from .helpers import inline_function, new_stack

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/idempotency"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:source"
#: The consumer's literal variables when its table and queue are imported by ARN and no DLQ variable is set (4-day
#: retention, a 30 s visibility timeout, 5 receives).
LITERAL_VARIABLES = {
    "IDEMPOTENCY_TABLE_NAME": TABLE_ARN,
    "IDEMPOTENCY_EXPIRY_SECONDS": "345600",
    "SOURCE_QUEUES": json.dumps({QUEUE_ARN: {"maxReceiveCount": 5, "visibilityTimeout": 30}}, separators=(",", ":")),
}
SOURCE = (
    "(source: AWS Lambda Developer Guide, Working with Lambda environment variables and Lambda quotas (4 KB for all "
    "environment variables of a function, measured as their JSON object))"
)


def _json_bytes(variables: dict[str, str]) -> int:
    return len(json.dumps(variables, separators=(",", ":")).encode("utf-8"))


def _padding(total: int, others: dict[str, str]) -> str:
    """A ``PADDING`` value that makes the environment ``{"PADDING": ..., **others}`` exactly ``total`` bytes."""
    return "x" * (total - _json_bytes({"PADDING": "", **others}))


def _literal_consumer(stack: Stack, id: str, total: int) -> lambda_.Function:
    """A consumer whose function's variables are all literal and measure exactly ``total`` bytes."""
    function = inline_function(stack, f"{id}Function", environment={"PADDING": _padding(total, LITERAL_VARIABLES)})
    queue = ExistingQueue(
        queue=sqs.Queue.from_queue_attributes(
            stack, f"{id}Queue", queue_arn=QUEUE_ARN, key_arn="arn:aws:kms:us-east-1:123456789012:key/source"
        ),
        visibility_timeout=Duration.seconds(30),
        dead_letter_queue=sqs.Queue.from_queue_arn(stack, f"{id}Dlq", QUEUE_ARN + "-dlq"),
        max_receive_count=5,
        retention_period=Duration.days(4),
    )
    IdempotentQueueConsumer(
        stack,
        id,
        queue=queue,
        function=function,
        table=IdempotencyTable.from_table_arn(stack, f"{id}Table", TABLE_ARN),
        dead_letter_on_first_sight=False,
    )
    return function


def _token_consumer(stack: Stack, id: str, padding: str) -> None:
    """A consumer of a new table and queue: its table ARN and DLQ URL are deploy-time values."""
    function = inline_function(stack, f"{id}Function", environment={"PADDING": padding})
    IdempotentQueueConsumer(
        stack,
        id,
        queue=ProcessingQueue(stack, f"{id}Queue"),
        function=function,
        table=IdempotencyTable(stack, f"{id}T"),
    )


#: With a new table and queue, the literal part: PADDING, the expiry, the two token variables' keys and quotes, and
#: the source queue's facts around its ARN.
TOKEN_LITERALS = {
    **LITERAL_VARIABLES,
    "IDEMPOTENCY_TABLE_NAME": "",
    "DEAD_LETTER_QUEUE_URL": "",
    "SOURCE_QUEUES": '{"":{"maxReceiveCount":5,"visibilityTimeout":60}}',
}
NEAR_LIMIT = _padding(4000, TOKEN_LITERALS)


@pytest.fixture(scope="module")
def annotations() -> Annotations:
    stack = new_stack(id="Env")
    _literal_consumer(stack, "Exact", 4096)
    _token_consumer(stack, "NearLimit", NEAR_LIMIT)
    _token_consumer(stack, "Small", "x" * 100)
    return Annotations.from_stack(stack)


def _messages_under(annotations: Annotations, path: str) -> list[str]:
    found = annotations.find_warning("*", Match.any_value()) + annotations.find_error("*", Match.any_value())
    return [str(entry.entry.data) for entry in found if entry.id.startswith(path)]


def _synth_error(app: App) -> str:
    with pytest.raises(RuntimeError, match="Validation failed") as raised:
        app.synth()
    return str(raised.value)


def test_environment_of_exactly_4096_bytes_is_clean(annotations: Annotations) -> None:
    assert _messages_under(annotations, "/Env/Exact") == []


def test_environment_that_fits_with_its_deploy_time_values_at_their_bounds_is_clean(annotations: Annotations) -> None:
    assert _messages_under(annotations, "/Env/Small") == []


def test_warns_environment_over_4096_bytes_only_with_deploy_time_values_at_their_bounds(
    annotations: Annotations,
) -> None:
    annotations.has_warning(
        "/Env/NearLimit",
        "environment of function Env/NearLimitFunction should be at most 4096 bytes as Lambda measures it (its "
        "variables as one compact JSON object: keys, values, quotes, colons and commas, in UTF-8; here 5 variables, "
        f"the largest PADDING ({len(NEAR_LIMIT)} bytes), IDEMPOTENCY_EXPIRY_SECONDS (6 bytes)), with each deploy-time "
        "value at its upper bound (DEAD_LETTER_QUEUE_URL: an SQS queue URL, up to 138 bytes; IDEMPOTENCY_TABLE_NAME: "
        "a DynamoDB table ARN, up to 314 bytes; SOURCE_QUEUES: an SQS queue ARN, up to 128 bytes): CreateFunction "
        "refuses it if the deployed values are that long, but up to 4580 bytes (4000 without its deploy-time values) "
        f"was given {SOURCE} "
        "[ack: effectively-once:functionEnvironmentMayExceedLimit]",
    )


def test_fails_environment_over_4096_bytes() -> None:
    stack = new_stack()
    _literal_consumer(stack, "Consumer", 4097)
    padding = len(_padding(4097, LITERAL_VARIABLES))

    assert (
        "[Test/Consumer] environment of function Test/ConsumerFunction must be at most 4096 bytes as Lambda measures "
        "it (its variables as one compact JSON object: keys, values, quotes, colons and commas, in UTF-8; here 4 "
        f"variables, the largest PADDING ({padding} bytes), SOURCE_QUEUES ({len(LITERAL_VARIABLES['SOURCE_QUEUES'])} "
        "bytes), IDEMPOTENCY_TABLE_NAME (57 bytes)): CreateFunction refuses it; move large values out (an SSM "
        f"parameter or a secret read at cold start), but 4097 bytes was given {SOURCE}"
    ) in _synth_error(stack.node.root)  # type: ignore[arg-type]


def test_fails_environment_grown_over_4096_bytes_after_the_consumer() -> None:
    stack = new_stack()
    function = _literal_consumer(stack, "Consumer", 100)
    function.add_environment("LATER", "y" * 4000)

    assert "[Test/Consumer] environment of function Test/ConsumerFunction must be at most 4096 bytes" in _synth_error(
        stack.node.root  # type: ignore[arg-type]
    )


# --- the upper bounds of deploy-time values ------------------------------------------------------------------------
def test_bounds_are_the_longest_table_arn_and_queue_url() -> None:
    region, partition, suffix, account = "us-isof-south-1", "aws-us-gov", "amazonaws.com.cn", "123456789012"

    assert limits.DYNAMODB_TABLE_ARN_MAX_LENGTH == len(f"arn:{partition}:dynamodb:{region}:{account}:table/{'t' * 255}")
    assert limits.SQS_QUEUE_ARN_MAX_LENGTH == len(f"arn:{partition}:sqs:{region}:{account}:{'q' * 80}") == 128
    assert limits.SQS_QUEUE_URL_MAX_LENGTH == len(f"https://sqs.{region}.{suffix}/{account}/{'q' * 80}") == 138


def test_bounds_cover_every_partition_region_and_dns_suffix_the_sdk_knows() -> None:
    import botocore.loaders

    partitions = botocore.loaders.create_loader().load_data("partitions")["partitions"]
    # "aws-global", "aws-us-gov-global", ...: endpoint aliases, not Regions a function or a table lives in
    regions = [region for p in partitions for region in p["regions"] if not region.endswith("-global")]

    assert max(len(p["id"]) for p in partitions) <= limits.AWS_MAX_PARTITION_LENGTH
    assert max(len(region) for region in regions) <= limits.AWS_MAX_REGION_LENGTH
    assert max(len(p["outputs"]["dnsSuffix"]) for p in partitions) <= limits.AWS_MAX_URL_SUFFIX_LENGTH
