"""``ExistingQueue``: a queue the user already has, with the facts an ``IdempotentQueueConsumer`` checks."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs

from . import limits
from ._validation import check_int, check_type, fail


@dataclass(frozen=True)
class ExistingQueue:
    """A source queue this library did not create, for ``IdempotentQueueConsumer(queue=ExistingQueue(...))``.

    Why a value object and not more consumer props: the facts describe the queue, not the consumer. Kept
    together, they are given once and shared by every consumer of the queue, a ``ProcessingQueue`` consumer
    has no props that it must leave unset, and ``queue=`` stays the one place that says where messages come
    from (like ``sqs.DeadLetterQueue(queue=..., max_receive_count=...)`` in CDK itself).

    The consumer checks what the facts allow and warns, once per missing fact, naming the checks it skipped
    (docs/validation.md). It never changes the queue: a visibility timeout cannot be filled in on a queue
    this library does not own, so give the queue one of at least 6 x function timeout + batching window.

    When ``queue`` is an ``sqs.Queue`` defined in this app (in this stack or another), each fact left
    ``None`` is read from it: ``VisibilityTimeout`` and ``MessageRetentionPeriod`` of its CloudFormation
    resource (SQS's 30 seconds and 4 days when unset) and its ``dead_letter_queue``; a given fact that
    differs from the queue's own is a ``ValueError``. An imported queue (``sqs.Queue.from_queue_attributes``,
    ``from_queue_arn``) carries none of them. FIFO-ness is ``queue.fifo``: for an imported queue, CDK derives
    it from the name in the ARN (``.fifo``), or, when the ARN is a deploy-time token, takes the ``fifo``
    given to ``from_queue_attributes`` (``False`` when not given). A customer-managed key is known from
    ``queue.encryption_master_key`` (``key_arn`` of ``from_queue_attributes``); the consumer grants
    ``kms:Decrypt`` on it, and warns for an imported queue without one.

    :param queue: the source queue.
    :param visibility_timeout: the queue's visibility timeout, checked against the function timeout (error
        below it, warning below 6 x function timeout + batching window).
        :default: ``None``: read from an ``sqs.Queue`` of this app; for an imported queue, unknown and not checked
        (a warning).
    :param dead_letter_queue: the queue's dead-letter queue (its redrive policy's target); it must be of the
        same type (FIFO or standard) as ``queue``. It gets the DLQ-depth alarm, and the consumer's permanent
        failures (``sqs:SendMessage`` on it, plus ``kms:GenerateDataKey``/``Decrypt`` on its
        ``encryption_master_key``: import a DLQ encrypted with a customer-managed key with ``key_arn=``).
        :default: ``None``: read from an ``sqs.Queue`` of this app; otherwise the queue has none (a warning: a
        poison message is retried until retention expires, and there is no DLQ-depth alarm).
    :param max_receive_count: receives before SQS moves a message to the DLQ, an ``int`` (1..1000; warning below 5).
        Only with a ``dead_letter_queue``.
        :default: ``None``: read from an ``sqs.Queue`` of this app; otherwise not checked (a warning).
    :param retention_period: how long the queue keeps a message (60 s..14 days); the consumer's default
        ``idempotency_expiry``.
        :default: ``None``: read from an ``sqs.Queue`` of this app; otherwise unknown, and the consumer's
        ``idempotency_expiry`` defaults to 14 days (the SQS maximum retention, so no redelivery outlives the
        record); a shorter given ``idempotency_expiry`` cannot be checked against it (a warning).
    """

    queue: sqs.IQueue
    visibility_timeout: Duration | None = None
    dead_letter_queue: sqs.IQueue | None = None
    max_receive_count: int | None = None
    retention_period: Duration | None = None

    def __post_init__(self) -> None:
        """:raises ValueError: a fact of the wrong type (naming it), before it fails later without a name."""
        for prop, queue, optional in (
            ("queue", self.queue, False),
            ("dead_letter_queue", self.dead_letter_queue, True),
        ):
            if (queue is None and not optional) or (queue is not None and not hasattr(queue, "queue_arn")):
                raise fail(f"ExistingQueue {prop}", queue, "must be an sqs.IQueue" + (" or None" if optional else ""))
        for prop, value in (
            ("visibility_timeout", self.visibility_timeout),
            ("retention_period", self.retention_period),
        ):
            check_type(f"ExistingQueue {prop}", value, Duration, "a Duration", optional=True)
        # A deploy-time token (a float in Python) is accepted: the range is checked when it is resolved.
        check_int("ExistingQueue max_receive_count", self.max_receive_count, limits.SQS_DLQ_DOC)
