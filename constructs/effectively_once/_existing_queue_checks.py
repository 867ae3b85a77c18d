"""The facts of an :class:`ExistingQueue`: completed from an ``sqs.Queue`` of this app, checked, and a warning for
each fact that is unknown, naming the checks it leaves undone (docs/validation.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from . import limits
from ._validation import check_duration_range, check_range, fail, is_unresolved, seconds, shown, warn
from .existing_queue import ExistingQueue

#: The CloudFormation property each fact is read from, as messages name it.
_SOURCES = {
    "visibility_timeout": "VisibilityTimeout",
    "retention_period": "MessageRetentionPeriod",
    "dead_letter_queue": "dead_letter_queue",
    "max_receive_count": "dead_letter_queue",
}


def resolve(existing: ExistingQueue) -> ExistingQueue:
    """The facts as given, completed from the queue's own definition when it is an ``sqs.Queue`` of this app.

    :raises ValueError: a given fact that differs from the queue's own; ``max_receive_count`` without a
        ``dead_letter_queue``; ``max_receive_count`` outside 1..1000, ``retention_period`` outside 60 s..14 days,
        ``visibility_timeout`` above 12 hours; a dead-letter queue of the other type (FIFO or standard).
    """
    own = _own_facts(existing.queue)
    for name, value in own.items():
        given = getattr(existing, name)
        if given is not None and _differ(given, value):
            raise fail(
                f"queue {name}",
                _identity(given),
                f"must be the queue's own ({_shown(value)}, from its {_SOURCES[name]}): leave it None to have it "
                "read from the sqs.Queue",
                limits.SQS_QUEUE_DOC,
            )
    facts = dataclasses.replace(existing, **{n: v for n, v in own.items() if getattr(existing, n) is None})
    _check(facts)
    return facts


def _own_facts(queue: sqs.IQueue) -> dict[str, Any]:
    """The facts of an ``sqs.Queue`` defined in this app (its L1 properties, SQS's defaults where unset); none for
    an imported queue."""
    if not isinstance(queue, sqs.Queue):
        return {}
    cfn: sqs.CfnQueue = queue.node.default_child  # type: ignore[assignment]
    visibility, retention = cfn.visibility_timeout, cfn.message_retention_period
    dlq = queue.dead_letter_queue
    return {
        "visibility_timeout": Duration.seconds(
            limits.SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS if visibility is None else visibility
        ),
        "retention_period": Duration.seconds(limits.SQS_DEFAULT_RETENTION_SECONDS if retention is None else retention),
        "dead_letter_queue": dlq.queue if dlq else None,
        "max_receive_count": dlq.max_receive_count if dlq else None,
    }


def _identity(value: Any) -> Any:
    """A queue as messages show it (its construct path); any other value as is."""
    return value.node.path if isinstance(value, Construct) else value


def _shown(value: Any) -> str:
    return "none" if value is None else shown(_identity(value))


def _differ(given: Any, own: Any) -> bool:
    if own is None:
        return True
    if isinstance(given, Duration):
        given_s, own_s = seconds(given), seconds(own)
        return given_s is not None and own_s is not None and given_s != own_s
    if isinstance(given, Construct):
        return bool(given.node.path != own.node.path)
    return not is_unresolved(given) and not is_unresolved(own) and bool(given != own)


def _check(facts: ExistingQueue) -> None:
    if facts.max_receive_count is not None and facts.dead_letter_queue is None:
        raise fail(
            "queue max_receive_count",
            facts.max_receive_count,
            "is only meaningful with a dead_letter_queue (SQS moves a message there after that many receives)",
            limits.SQS_DLQ_DOC,
        )
    check_range(
        "queue max_receive_count",
        facts.max_receive_count,
        limits.SQS_MIN_MAX_RECEIVE_COUNT,
        limits.SQS_MAX_MAX_RECEIVE_COUNT,
        limits.SQS_DLQ_DOC,
    )
    check_duration_range(
        "queue retention_period",
        facts.retention_period,
        limits.SQS_MIN_RETENTION_SECONDS,
        limits.SQS_MAX_RETENTION_SECONDS,
        f"{limits.SQS_QUEUE_DOC} MessageRetentionPeriod",
    )
    check_duration_range(
        "queue visibility_timeout",
        facts.visibility_timeout,
        0,
        limits.SQS_MAX_VISIBILITY_TIMEOUT_SECONDS,
        f"{limits.SQS_QUEUE_DOC} VisibilityTimeout",
    )
    dlq = facts.dead_letter_queue
    if dlq is not None and bool(dlq.fifo) != bool(facts.queue.fifo):
        kind = "a FIFO queue" if facts.queue.fifo else "a standard queue"
        raise fail(
            "queue dead_letter_queue", dlq.node.path, f"must be {kind} like the source queue", limits.SQS_DLQ_DOC
        )


def warn_unknown(
    scope: Construct,
    facts: ExistingQueue,
    function: lambda_.IFunction,
    max_batching_window: Duration | None,
    idempotency_expiry: Duration | None,
) -> None:
    """One warning on ``scope`` per unknown fact, naming every check it leaves undone.

    :param facts: as completed by :func:`resolve`.
    :param idempotency_expiry: the consumer's prop as given (``None``: it defaults to the retention period, or
        to 14 days when that is unknown, which no retention can exceed).
    """
    _warn_unknown_dead_letter(scope, facts)
    _warn_unknown_visibility_timeout(scope, facts, function, max_batching_window)
    _warn_unknown_retention(scope, facts, idempotency_expiry)
    _warn_unknown_key(scope, facts, function)


def _warn_unknown_dead_letter(scope: Construct, facts: ExistingQueue) -> None:
    """No dead-letter queue, or one without its ``max_receive_count``."""
    if facts.dead_letter_queue is None:
        warn(
            scope,
            "existingQueueNoDeadLetterQueue",
            "queue dead_letter_queue",
            None,
            "should be given: without a dead-letter queue, a poison message is retried until retention expires "
            "(and is then lost). Not checked: the dead-letter queue's type against the queue's, and "
            "max_receive_count against the guidance of at least "
            f"{limits.LAMBDA_SQS_RECOMMENDED_MIN_MAX_RECEIVE_COUNT}; and there is no DLQ-depth alarm",
            limits.LAMBDA_SQS_DLQ_DOC,
        )
    elif facts.max_receive_count is None:
        warn(
            scope,
            "existingQueueMaxReceiveCountUnknown",
            "queue max_receive_count",
            None,
            "should be given with the dead_letter_queue: it is not checked against the guidance of at least "
            f"{limits.LAMBDA_SQS_RECOMMENDED_MIN_MAX_RECEIVE_COUNT} receives (throttling alone can move a valid "
            "message to the dead-letter queue after too few)",
            limits.LAMBDA_SQS_DLQ_DOC,
        )


def _warn_unknown_visibility_timeout(
    scope: Construct, facts: ExistingQueue, function: lambda_.IFunction, max_batching_window: Duration | None
) -> None:
    """No visibility timeout: neither checked against the function timeout nor filled in."""
    if facts.visibility_timeout is None:
        warn(
            scope,
            "existingQueueVisibilityTimeoutUnknown",
            "queue visibility_timeout",
            None,
            "should be given: it is not checked against the function timeout (an error below it: a message becomes "
            "visible again while it is still being processed) nor against "
            f"{limits.LAMBDA_SQS_VISIBILITY_TIMEOUT_FACTOR} x function timeout + max_batching_window"
            f"{_guidance(function, max_batching_window)} (a warning below it), and this consumer cannot fill it in on "
            "a queue it does not own: make sure the queue's own is at least that",
            limits.LAMBDA_SQS_VISIBILITY_DOC,
        )


def _warn_unknown_retention(scope: Construct, facts: ExistingQueue, idempotency_expiry: Duration | None) -> None:
    """No retention period, with a given expiry that a retention could exceed."""
    expiry = seconds(idempotency_expiry)
    if (
        facts.retention_period is None
        and idempotency_expiry is not None
        and (expiry is None or expiry < limits.SQS_MAX_RETENTION_SECONDS)
    ):
        warn(
            scope,
            "existingQueueRetentionUnknown",
            "queue retention_period",
            None,
            f"should be given: idempotency_expiry ({shown(idempotency_expiry)}) is not checked against it (a resend "
            "or redelivery after the record expires is processed, and charged, twice); leave idempotency_expiry "
            "unset for 14 days, the longest retention SQS allows",
            limits.IDEMPOTENCY_EXPIRY_DOC,
        )


def _warn_unknown_key(scope: Construct, facts: ExistingQueue, function: lambda_.IFunction) -> None:
    """An imported queue without its KMS key, for a function whose role gets the grants."""
    if not isinstance(facts.queue, sqs.Queue) and facts.queue.encryption_master_key is None and function.role:
        warn(
            scope,
            "existingQueueKeyUnknown",
            "queue encryption_master_key",
            None,
            "is not known for an imported queue, so kms:Decrypt is not granted: if the queue is encrypted with a "
            "customer-managed KMS key, import it with sqs.Queue.from_queue_attributes(..., key_arn=...) (SSE-SQS and "
            "the AWS managed key alias/aws/sqs need no grant)",
            limits.SQS_KMS_DOC,
        )


def _guidance(function: lambda_.IFunction, max_batching_window: Duration | None) -> str:
    """`` (= N seconds)`` when the function timeout and window are known, else nothing."""
    if not isinstance(function, lambda_.Function):
        return ""
    timeout = seconds(function.timeout or Duration.seconds(limits.LAMBDA_DEFAULT_TIMEOUT_SECONDS))
    window = seconds(max_batching_window or Duration.seconds(0))
    if timeout is None or window is None:
        return ""
    return f" (= {limits.visibility_timeout_guidance_seconds(timeout, window)} seconds)"
