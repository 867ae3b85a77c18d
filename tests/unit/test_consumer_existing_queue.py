"""IdempotentQueueConsumer on a queue the user already has (ExistingQueue): an imported queue, a queue from another
stack of the app and a plain sqs.Queue, standard and FIFO; what is checked, what is warned about, and the errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import CfnParameter, Duration, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Annotations, Match, Template

from effectively_once import ExistingQueue, IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue
from effectively_once.limits import IDEMPOTENCY_TABLE_ACTIONS, SQS_MAX_RETENTION_SECONDS

from .helpers import ENV, actions_by_resource, function_role, inline_function, new_app, new_stack, role_statements

ARN = "arn:aws:sqs:us-east-1:123456789012:"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}
UNCHECKED_IDS = (
    "existingQueueNoDeadLetterQueue",
    "existingQueueVisibilityTimeoutUnknown",
    "existingQueueMaxReceiveCountUnknown",
    "existingQueueRetentionUnknown",
    "existingQueueKeyUnknown",
)


def _imported(stack: Stack, id: str, name: str, **attributes: Any) -> sqs.IQueue:
    return sqs.Queue.from_queue_attributes(stack, id, queue_arn=ARN + name, **attributes)


@pytest.fixture(scope="module")
def synth() -> dict:
    app = new_app()
    shared = Stack(app, "Shared", env=ENV)
    shared_dlq = sqs.Queue(shared, "OrdersDlq", retention_period=Duration.days(14))
    shared_queue = sqs.Queue(
        shared,
        "Orders",
        visibility_timeout=Duration.seconds(180),
        dead_letter_queue=sqs.DeadLetterQueue(queue=shared_dlq, max_receive_count=5),
    )
    shared_key = kms.Key(shared, "Key")
    shared_fifo_dlq = sqs.Queue(shared, "OrdersFifoDlq", fifo=True, encryption_master_key=shared_key)
    shared_fifo = sqs.Queue(
        shared,
        "OrdersFifo",
        fifo=True,
        encryption_master_key=shared_key,
        visibility_timeout=Duration.minutes(2),
        dead_letter_queue=sqs.DeadLetterQueue(queue=shared_fifo_dlq, max_receive_count=5),
    )
    stack = Stack(app, "Test", env=ENV)
    table = IdempotencyTable(stack, "Table")
    wired = {}
    # imported standard queue with every fact and its customer-managed key
    wired["imported"] = IdempotentQueueConsumer(
        stack,
        "Imported",
        table=table,
        function=inline_function(stack, "ImportedFunction", timeout=Duration.seconds(30)),
        queue=ExistingQueue(
            queue=_imported(stack, "ImportedQueue", "orders", key_arn=KEY_ARN),
            visibility_timeout=Duration.seconds(180),
            dead_letter_queue=_imported(stack, "ImportedDlq", "orders-dlq"),
            max_receive_count=5,
            retention_period=Duration.days(4),
        ),
    )
    # imported FIFO queue, no facts at all
    wired["bare_fifo"] = IdempotentQueueConsumer(
        stack,
        "BareFifo",
        table=table,
        function=inline_function(stack, "BareFifoFunction"),
        queue=ExistingQueue(queue=sqs.Queue.from_queue_arn(stack, "BareFifoQueue", ARN + "orders.fifo")),
    )
    # a queue of another stack: its facts are read from it
    wired["cross_stack"] = IdempotentQueueConsumer(
        stack,
        "CrossStack",
        table=table,
        function=inline_function(stack, "CrossStackFunction", timeout=Duration.seconds(30)),
        queue=ExistingQueue(queue=shared_queue),
    )
    # a FIFO queue of another stack, encrypted with that stack's key; the function timeout leaves the 2-minute
    # visibility timeout below the 6x guidance, and the warning must not suggest it could be filled in
    wired["cross_stack_fifo"] = IdempotentQueueConsumer(
        stack,
        "CrossStackFifo",
        table=table,
        function=inline_function(stack, "CrossStackFifoFunction", timeout=Duration.seconds(30)),
        queue=ExistingQueue(queue=shared_fifo),
    )
    # the user's own FIFO sqs.Queue with a customer-managed key, SQS's 30-second visibility timeout
    key = kms.Key(stack, "Key")
    fifo_dlq = sqs.Queue(stack, "PlainFifoDlq", fifo=True, encryption_master_key=key)
    plain_fifo = sqs.Queue(
        stack,
        "PlainFifo",
        fifo=True,
        encryption_master_key=key,
        retention_period=Duration.days(2),
        dead_letter_queue=sqs.DeadLetterQueue(queue=fifo_dlq, max_receive_count=3),
    )
    wired["plain_fifo"] = IdempotentQueueConsumer(
        stack,
        "PlainFifoConsumer",
        table=table,
        function=inline_function(stack, "PlainFifoFunction", timeout=Duration.seconds(10)),
        queue=ExistingQueue(queue=plain_fifo),
        idempotency_expiry=Duration.hours(1),
    )
    # the user's own standard sqs.Queue without a dead-letter queue, visibility timeout exactly 6 x Lambda's 3 s
    wired["plain_standard"] = IdempotentQueueConsumer(
        stack,
        "PlainStandardConsumer",
        table=table,
        function=inline_function(stack, "PlainStandardFunction"),
        queue=ExistingQueue(queue=sqs.Queue(stack, "PlainStandard", visibility_timeout=Duration.seconds(18))),
    )
    # an imported function on an existing queue without a visibility timeout: nothing to fill in, accepted
    wired["imported_function"] = IdempotentQueueConsumer(
        stack,
        "ImportedFunctionConsumer",
        table=table,
        function=lambda_.Function.from_function_arn(stack, "F", "arn:aws:lambda:us-east-1:123456789012:function:f"),
        queue=ExistingQueue(
            queue=_imported(stack, "Q5", "five", key_arn=KEY_ARN),
            dead_letter_queue=_imported(stack, "D5", "five-dlq"),
            max_receive_count=5,
            retention_period=Duration.days(4),
        ),
        idempotency_expiry=Duration.days(1),
    )
    # a ProcessingQueue, for the uniform attributes
    wired["processing"] = IdempotentQueueConsumer(
        stack,
        "Processing",
        table=table,
        function=inline_function(stack, "ProcessingFunction"),
        queue=ProcessingQueue(stack, "ProcessingQueue"),
    )
    return {
        "stack": stack,
        "template": Template.from_stack(stack),
        "wired": wired,
        "table": table,
        "key": key,
        "annotations": Annotations.from_stack(stack),
        "shared_queue": shared_queue,
        "shared_dlq": shared_dlq,
        "plain_fifo": plain_fifo,
        "fifo_dlq": fifo_dlq,
        "shared_fifo_dlq": shared_fifo_dlq,
    }


def _mapping(synth: dict, name: str) -> dict:
    stack: Stack = synth["stack"]
    consumer = synth["wired"][name]
    found = synth["template"].find_resources("AWS::Lambda::EventSourceMapping")
    props = [
        m["Properties"]
        for m in found.values()
        if m["Properties"]["EventSourceArn"] == stack.resolve(consumer.queue.queue_arn)
    ]
    assert len(props) == 1
    return props[0]


def _logical_id(stack: Stack, token: str) -> str:
    resolved = stack.resolve(token)
    return resolved.get("Ref") or resolved["Fn::GetAtt"][0]


def _granted(synth: dict, name: str) -> dict:
    stack: Stack = synth["stack"]
    role = function_role(synth["template"], _logical_id(stack, synth["wired"][name].function.function_name))
    return actions_by_resource(role_statements(synth["template"], role))


def _environment(synth: dict, name: str) -> dict:
    stack: Stack = synth["stack"]
    function_id = _logical_id(stack, synth["wired"][name].function.function_name)
    return synth["template"].to_json()["Resources"][function_id]["Properties"]["Environment"]["Variables"]


def _warnings(synth: dict, name: str) -> list[str]:
    """The warnings on the consumer (texts, ids included)."""
    path = "/Test/" + synth["wired"][name].node.id
    return [str(w.entry.data) for w in synth["annotations"].find_warning(path, Match.any_value())]


def _ids(synth: dict, name: str) -> list[str]:
    return sorted(id for text in _warnings(synth, name) for id in UNCHECKED_IDS if f"effectively-once:{id}" in text)


# --- the mapping ------------------------------------------------------------------------------------
def test_imported_queue_is_mapped_by_its_arn(synth: dict) -> None:
    props = _mapping(synth, "imported")
    assert props["EventSourceArn"] == ARN + "orders"
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_queue_of_another_stack_is_mapped_through_a_reference_to_that_stack(synth: dict) -> None:
    # cdk.json's feature flags make cross-stack references Fn::GetStackOutput (not Fn::ImportValue)
    arn = _mapping(synth, "cross_stack")["EventSourceArn"]
    assert arn["Fn::GetStackOutput"]["StackName"] == "Shared"


def test_existing_fifo_queue_is_fifo(synth: dict) -> None:
    assert synth["wired"]["bare_fifo"].queue.fifo
    assert _mapping(synth, "bare_fifo")["BatchSize"] == 10


# --- grants -----------------------------------------------------------------------------------------
def test_imported_queue_with_its_key_grants_consume_and_decrypt(synth: dict) -> None:
    stack: Stack = synth["stack"]
    assert _granted(synth, "imported") == {
        ARN + "orders": CONSUME,
        KEY_ARN: {"kms:Decrypt"},
        ARN + "orders-dlq": {"sqs:SendMessage"},  # its DLQ, imported without a key: no KMS action for it
        _logical_id(stack, synth["table"].table.table_arn): set(IDEMPOTENCY_TABLE_ACTIONS),
    }


def test_imported_queue_without_a_key_grants_no_decrypt(synth: dict) -> None:
    granted = _granted(synth, "bare_fifo")
    assert granted[ARN + "orders.fifo"] == CONSUME
    assert not any("kms:Decrypt" in actions for actions in granted.values())


def test_no_dead_letter_queue_means_no_send_grant_and_no_dead_letter_queue_url(synth: dict) -> None:
    assert not any("sqs:SendMessage" in actions for actions in _granted(synth, "bare_fifo").values())
    assert "DEAD_LETTER_QUEUE_URL" not in _environment(synth, "bare_fifo")
    assert "DEAD_LETTER_QUEUE_URL" not in _environment(synth, "plain_standard")


def test_given_dead_letter_queue_is_where_permanent_failures_go(synth: dict) -> None:
    stack: Stack = synth["stack"]
    dlq = synth["wired"]["imported"].dead_letter_queue
    assert _environment(synth, "imported")["DEAD_LETTER_QUEUE_URL"] == stack.resolve(dlq.queue_url)


def test_plain_queue_with_a_customer_managed_key_grants_decrypt_on_it(synth: dict) -> None:
    stack: Stack = synth["stack"]
    granted = _granted(synth, "plain_fifo")
    assert granted[_logical_id(stack, synth["plain_fifo"].queue_arn)] == CONSUME
    assert granted[_logical_id(stack, synth["key"].key_arn)] == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert granted[_logical_id(stack, synth["fifo_dlq"].queue_arn)] == {"sqs:SendMessage"}


def test_queue_of_another_stack_grants_consume(synth: dict) -> None:
    granted = _granted(synth, "cross_stack")
    arn = _mapping(synth, "cross_stack")["EventSourceArn"]
    assert granted[json.dumps(arn, sort_keys=True)] == CONSUME


def test_fifo_queue_of_another_stack_grants_consume_and_decrypt_on_that_stacks_key(synth: dict) -> None:
    granted = _granted(synth, "cross_stack_fifo")
    outputs = {
        json.loads(resource)["Fn::GetStackOutput"]["OutputName"]: actions
        for resource, actions in granted.items()
        if "Fn::GetStackOutput" in resource
    }
    # consume on the queue, send on its DLQ, and on that stack's key Decrypt (receive) and GenerateDataKey (send)
    assert sorted(outputs.values(), key=len) == [{"sqs:SendMessage"}, {"kms:Decrypt", "kms:GenerateDataKey"}, CONSUME]
    assert next(name for name, actions in outputs.items() if actions == CONSUME) in json.dumps(
        _mapping(synth, "cross_stack_fifo")["EventSourceArn"]
    )


# --- environment ------------------------------------------------------------------------------------
def test_expiry_defaults_to_the_given_retention(synth: dict) -> None:
    assert _environment(synth, "imported")["IDEMPOTENCY_EXPIRY_SECONDS"] == str(4 * 24 * 3600)


def test_expiry_defaults_to_the_retention_of_a_queue_of_this_app(synth: dict) -> None:
    # sqs.Queue without retention_period: SQS's 4 days
    assert _environment(synth, "cross_stack")["IDEMPOTENCY_EXPIRY_SECONDS"] == str(4 * 24 * 3600)


def test_expiry_defaults_to_the_sqs_maximum_when_retention_is_unknown(synth: dict) -> None:
    assert _environment(synth, "bare_fifo")["IDEMPOTENCY_EXPIRY_SECONDS"] == str(SQS_MAX_RETENTION_SECONDS)
    assert synth["wired"]["bare_fifo"].idempotency_expiry.to_seconds() == SQS_MAX_RETENTION_SECONDS


def test_environment_carries_the_table_arn(synth: dict) -> None:
    stack: Stack = synth["stack"]
    assert _environment(synth, "imported")["IDEMPOTENCY_TABLE_NAME"] == stack.resolve(synth["table"].table.table_arn)


def test_visibility_timeout_of_a_queue_it_does_not_own_is_never_written(synth: dict) -> None:
    resources = synth["template"].to_json()["Resources"]
    assert (
        "VisibilityTimeout" not in resources[_logical_id(synth["stack"], synth["plain_fifo"].queue_arn)]["Properties"]
    )
    assert synth["wired"]["plain_fifo"].visibility_timeout.to_seconds() == 30  # SQS's default, read as a fact


# --- attributes -------------------------------------------------------------------------------------
def test_queue_and_dead_letter_queue_attributes_are_uniform(synth: dict) -> None:
    wired = synth["wired"]
    assert wired["cross_stack"].queue is synth["shared_queue"]
    assert wired["cross_stack"].dead_letter_queue is synth["shared_dlq"]
    assert wired["cross_stack_fifo"].dead_letter_queue is synth["shared_fifo_dlq"]
    assert wired["cross_stack_fifo"].queue.fifo
    assert wired["plain_fifo"].dead_letter_queue is synth["fifo_dlq"]
    assert wired["bare_fifo"].dead_letter_queue is None
    processing = wired["processing"]
    assert processing.queue is processing.node.scope.node.find_child("ProcessingQueue").queue
    assert processing.dead_letter_queue is processing.node.scope.node.find_child("ProcessingQueue").dead_letter_queue


# --- alarms -----------------------------------------------------------------------------------------
def _alarm_metric(synth: dict, alarm: Any) -> dict:
    props = synth["template"].to_json()["Resources"][_logical_id(synth["stack"], alarm.alarm_arn)]["Properties"]
    return props


def test_dlq_depth_alarm_watches_the_given_dead_letter_queue(synth: dict) -> None:
    props = _alarm_metric(synth, synth["wired"]["imported"].dlq_depth_alarm)
    assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
    assert props["Dimensions"] == [{"Name": "QueueName", "Value": "orders-dlq"}]


def test_no_dead_letter_queue_means_no_dlq_depth_alarm(synth: dict) -> None:
    consumer = synth["wired"]["bare_fifo"]
    assert consumer.dlq_depth_alarm is None
    assert consumer.oldest_message_age_alarm is not None
    props = _alarm_metric(synth, consumer.oldest_message_age_alarm)
    assert props["Dimensions"] == [{"Name": "QueueName", "Value": "orders.fifo"}]


# --- warnings ---------------------------------------------------------------------------------------
def test_queue_with_every_fact_warns_nothing(synth: dict) -> None:
    assert _warnings(synth, "imported") == []
    assert _warnings(synth, "cross_stack") == []


def test_each_missing_fact_warns_once_naming_what_was_not_checked(synth: dict) -> None:
    assert _ids(synth, "bare_fifo") == sorted(
        ["existingQueueNoDeadLetterQueue", "existingQueueVisibilityTimeoutUnknown", "existingQueueKeyUnknown"]
    )
    texts = _warnings(synth, "bare_fifo")
    assert len(texts) == 3
    dlq = next(t for t in texts if "NoDeadLetterQueue" in t)
    assert "a poison message is retried until retention expires" in dlq
    assert "no DLQ-depth alarm" in dlq and "max_receive_count" in dlq
    visibility = next(t for t in texts if "VisibilityTimeoutUnknown" in t)
    assert "not checked against the function timeout" in visibility and "cannot fill it in" in visibility
    key = next(t for t in texts if "KeyUnknown" in t)
    assert "kms:Decrypt" in key and "key_arn" in key


def test_plain_queue_without_a_dead_letter_queue_warns_only_about_that(synth: dict) -> None:
    assert _ids(synth, "plain_standard") == ["existingQueueNoDeadLetterQueue"]
    assert len(_warnings(synth, "plain_standard")) == 1
    consumer = synth["wired"]["plain_standard"]
    assert consumer.dead_letter_queue is None and consumer.dlq_depth_alarm is None
    assert not consumer.queue.fifo
    stack: Stack = synth["stack"]
    granted = _granted(synth, "plain_standard")
    assert granted == {
        _logical_id(stack, consumer.queue.queue_arn): CONSUME,
        _logical_id(stack, synth["table"].table.table_arn): set(IDEMPOTENCY_TABLE_ACTIONS),
    }


def test_plain_queue_is_checked_on_its_own_facts(synth: dict) -> None:
    texts = _warnings(synth, "plain_fifo")
    assert _ids(synth, "plain_fifo") == []
    joined = "\n".join(texts)
    assert "visibilityTimeoutBelowGuidance" in joined  # 30 s against 6 x 10 s
    assert "maxReceiveCountBelowGuidance" in joined  # 3 receives
    assert "idempotencyExpiryBelowRetention" in joined  # 1 hour against 2 days
    assert len(texts) == 3


def test_visibility_timeout_below_guidance_on_a_queue_it_does_not_own_says_raise_it(synth: dict) -> None:
    (text,) = _warnings(synth, "cross_stack_fifo")
    assert "effectively-once:visibilityTimeoutBelowGuidance" in text
    assert "= 180 seconds" in text and "but 2 minutes was given" in text
    assert "filled in" not in text.replace("cannot be filled in", "")
    assert "raise the queue's own" in text


def test_expiry_without_retention_warns_that_it_was_not_checked(synth: dict) -> None:
    # retention unknown, expiry 1 day: below what a queue may keep
    stack = new_stack()
    consumer = IdempotentQueueConsumer(
        stack,
        "C",
        table=IdempotencyTable(stack, "T"),
        function=inline_function(stack, "F"),
        queue=ExistingQueue(
            queue=_imported(stack, "Q", "q", key_arn=KEY_ARN),
            visibility_timeout=Duration.minutes(1),
            dead_letter_queue=_imported(stack, "D", "q-dlq"),
            max_receive_count=5,
        ),
        idempotency_expiry=Duration.days(1),
    )
    warnings = Annotations.from_stack(stack).find_warning("/Test/C", Match.any_value())
    (text,) = [str(w.entry.data) for w in warnings]
    assert "effectively-once:existingQueueRetentionUnknown" in text
    assert "idempotency_expiry (1 day) is not checked against it" in text
    assert consumer.idempotency_expiry.to_seconds() == 24 * 3600


def test_imported_function_is_accepted_on_an_existing_queue(synth: dict) -> None:
    props = _mapping(synth, "imported_function")
    assert props["FunctionName"] == "f"


# --- errors -----------------------------------------------------------------------------------------
def _consumer(
    queue: Any = None, *, stack: Stack | None = None, timeout: int = 30, **props: Any
) -> IdempotentQueueConsumer:
    stack = stack or new_stack()
    return IdempotentQueueConsumer(
        stack,
        "C",
        table=IdempotencyTable(stack, "T"),
        function=inline_function(stack, "F", timeout=Duration.seconds(timeout)),
        queue=queue(stack) if callable(queue) else queue,
        **props,
    )


def test_fails_fifo_queue_with_a_standard_dead_letter_queue() -> None:
    with pytest.raises(
        ValueError,
        match=r"^queue dead_letter_queue must be a FIFO queue like the source queue, but "
        r"'Test/D' was given \(source: Amazon SQS Developer Guide, Using dead-letter queues\)\Z",
    ):
        _consumer(
            lambda s: ExistingQueue(
                queue=_imported(s, "Q", "q.fifo"), dead_letter_queue=_imported(s, "D", "d"), max_receive_count=5
            )
        )


def test_fails_standard_queue_with_a_fifo_dead_letter_queue() -> None:
    with pytest.raises(ValueError, match=r"^queue dead_letter_queue must be a standard queue like the source queue"):
        _consumer(lambda s: ExistingQueue(queue=_imported(s, "Q", "q"), dead_letter_queue=_imported(s, "D", "d.fifo")))


def test_fails_visibility_timeout_below_the_function_timeout() -> None:
    with pytest.raises(
        ValueError,
        match=r"^queue visibility_timeout must be at least the function timeout \(2 minutes\)"
        r".*but 30 seconds was given \(source: AWS Lambda Developer Guide",
    ):
        _consumer(
            lambda s: ExistingQueue(queue=_imported(s, "Q", "q"), visibility_timeout=Duration.seconds(30)), timeout=120
        )


def test_fails_plain_queue_whose_default_visibility_timeout_is_below_the_function_timeout() -> None:
    with pytest.raises(
        ValueError,
        match=r"^queue visibility_timeout must be at least the function timeout \(1 minute\)"
        r".*but 30 seconds was given",
    ):
        _consumer(lambda s: ExistingQueue(queue=sqs.Queue(s, "Q")), timeout=60)


def test_fails_fact_that_contradicts_the_queue() -> None:
    with pytest.raises(
        ValueError,
        match=r"^queue visibility_timeout must be the queue's own \(3 minutes, from its "
        r"VisibilityTimeout\): leave it None to have it read from the sqs\.Queue, but 5 minutes was given",
    ):
        _consumer(
            lambda s: ExistingQueue(
                queue=sqs.Queue(s, "Q", visibility_timeout=Duration.minutes(3)), visibility_timeout=Duration.minutes(5)
            )
        )


def test_fails_max_receive_count_without_a_dead_letter_queue() -> None:
    with pytest.raises(
        ValueError, match=r"^queue max_receive_count is only meaningful with a dead_letter_queue .*, but 5 was given"
    ):
        _consumer(lambda s: ExistingQueue(queue=_imported(s, "Q", "q"), max_receive_count=5))


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ({"max_receive_count": 0}, r"^queue max_receive_count must be between 1 and 1000, but 0 was given"),
        ({"retention_period": Duration.days(15)}, r"^queue retention_period must be between 60 and 1209600 seconds"),
        ({"visibility_timeout": Duration.hours(13)}, r"^queue visibility_timeout must be between 0 and 43200 seconds"),
    ],
)
def test_fails_fact_out_of_range(facts: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _consumer(
            lambda s: ExistingQueue(queue=_imported(s, "Q", "q"), dead_letter_queue=_imported(s, "D", "d"), **facts)
        )


def test_fails_batching_window_on_an_existing_fifo_queue() -> None:
    with pytest.raises(ValueError, match=r"^max_batching_window is not allowed on a FIFO source queue"):
        _consumer(lambda s: ExistingQueue(queue=_imported(s, "Q", "q.fifo")), max_batching_window=Duration.seconds(5))


def test_queue_imported_by_a_token_arn_is_fifo_when_imported_with_fifo() -> None:
    # CDK cannot read the name from a deploy-time ARN: FIFO-ness is then from_queue_attributes(fifo=...)
    stack = new_stack()
    arn = CfnParameter(stack, "QueueArn").value_as_string
    with pytest.raises(ValueError, match=r"^batch_size must be between 1 and 10"):
        _consumer(
            ExistingQueue(queue=sqs.Queue.from_queue_attributes(stack, "Q", queue_arn=arn, fifo=True)),
            stack=stack,
            batch_size=11,
        )


# --- issue 31: what the runtime's backoff and receive budget read ------------------------------------------------
def _source_queues(synth: dict, name: str) -> tuple[Any, dict]:
    """``SOURCE_QUEUES`` of a consumer's function: (the ARN part as the template holds it, the facts)."""
    joined = _environment(synth, name)["SOURCE_QUEUES"]
    if isinstance(joined, str):  # every part literal: CDK joined it at synth
        ((arn, facts),) = json.loads(joined).items()
        return arn, facts
    opening, arn, rest = joined["Fn::Join"][1]
    assert opening == '{"' and rest.startswith('":')
    return arn, json.loads(rest[2:-1])


@pytest.mark.parametrize(
    ("name", "arn", "facts"),
    [
        ("imported", ARN + "orders", {"maxReceiveCount": 5, "visibilityTimeout": 180}),
        # an imported queue of which nothing is known: the runtime keeps SQS's own timing for its records
        ("bare_fifo", ARN + "orders.fifo", {}),
        ("plain_fifo", None, {"maxReceiveCount": 3, "visibilityTimeout": 30}),
    ],
)
def test_source_queues_names_the_queue_with_what_is_known(synth: dict, name: str, arn: Any, facts: dict) -> None:
    found_arn, found_facts = _source_queues(synth, name)
    assert found_facts == facts
    stack = synth["stack"] if "stack" in synth else synth["wired"][name].stack
    assert found_arn == (arn if arn is not None else stack.resolve(synth["wired"][name].queue.queue_arn))


def test_every_consumer_function_of_the_stack_names_its_source_queue(synth: dict) -> None:
    functions = synth["template"].find_resources("AWS::Lambda::Function")
    environments = [f["Properties"].get("Environment", {}).get("Variables", {}) for f in functions.values()]
    consumers = [env for env in environments if "IDEMPOTENCY_TABLE_NAME" in env]
    assert consumers and all("SOURCE_QUEUES" in env for env in consumers)


def test_a_deploy_time_max_receive_count_is_left_out_of_source_queues() -> None:
    # A number parameter's token would be written as its placeholder (about -1.9e289), which the runtime refuses at
    # cold start: the fact is unknown at synth, so it is left out (the runtime then treats the count as unknown).
    stack = new_stack()
    consumer = _consumer(
        ExistingQueue(
            queue=_imported(stack, "Q", "q"),
            dead_letter_queue=_imported(stack, "D", "d"),
            max_receive_count=CfnParameter(stack, "Receives", type="Number").value_as_number,
            visibility_timeout=Duration.seconds(180),
        ),
        stack=stack,
    )
    variables = Template.from_stack(stack).to_json()["Resources"][
        stack.get_logical_id(consumer.function.node.default_child)  # type: ignore[arg-type]
    ]["Properties"]["Environment"]["Variables"]
    assert json.loads(variables["SOURCE_QUEUES"]) == {ARN + "q": {"visibilityTimeout": 180}}
