"""What the local AWS says a poller plays: a deployed event source mapping as read back from it
(:class:`MappingConfig`), a function's asynchronous invocation as its template configures it (:class:`AsyncConfig`),
and the SQS limits the pollers follow. Read by the one discovery (``aws/discovery.py``); one poller process's whole
brief, which holds one of them, is the runner's (``runner/poller_spec.py``)."""

from __future__ import annotations

from dataclasses import dataclass

SQS_RECEIVE_MAX = 10  # ReceiveMessage returns at most 10 messages (SQS API reference)
#: A message's visibility timeout is at most 12 hours (Amazon SQS Developer Guide, "Amazon SQS visibility timeout":
#: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html).
SQS_MAX_VISIBILITY_SECONDS = 43_200


@dataclass(frozen=True)
class AsyncConfig:
    """A function's asynchronous invocation, as the synthesized template configures it (moto skips
    ``AWS::Lambda::EventInvokeConfig``): the runner plays Lambda's asynchronous queue from the function's inbox
    (``aws/async_inbox.py``).

    :ivar function_arn: the function's ARN (unqualified).
    :ivar max_retry_attempts: ``MaximumRetryAttempts`` (0..2; Lambda's default 2).
    :ivar max_event_age_seconds: ``MaximumEventAgeInSeconds`` (60..21600; Lambda's default 21600), before scaling.
    :ivar on_failure_queue_url: the on-failure destination (an SQS queue), or ``None`` (records are dropped, as
        Lambda drops them without a destination).
    :ivar time_scale: the factor applied to the retry delays and the maximum event age (``async_inbox.time_scale``).
    """

    function_arn: str
    max_retry_attempts: int = 2
    max_event_age_seconds: int = 21600
    on_failure_queue_url: str | None = None
    time_scale: float = 0.05


@dataclass(frozen=True)
class MappingConfig:
    """One deployed event source mapping, as read back from the local AWS; or, with ``async_config``, a function's
    asynchronous invocation (``queue_url``/``queue_arn``: its inbox, ``async_inbox.inbox_name``; ``batch_size`` 1)."""

    label: str
    queue_url: str
    queue_arn: str
    batch_size: int
    batching_window_seconds: int
    visibility_timeout_seconds: int
    max_receive_count: int
    function_name: str
    function_timeout_seconds: int
    function_memory_mb: int
    function_env: dict[str, str]
    handler: str  # module.attribute, as the function's Handler
    #: Set for an asynchronous target: the poller invokes one event at a time with Lambda's async retry policy.
    async_config: AsyncConfig | None = None
