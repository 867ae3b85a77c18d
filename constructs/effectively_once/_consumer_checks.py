"""The synth-time checks of ``IdempotentQueueConsumer``: errors (``ValueError``) and warnings on its props and on
the queue and function it wires together (docs/validation.md lists every rule with its source)."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from effectively_once_runtime import names

from . import limits
from ._validation import Described, check_range, check_type, fail, is_unresolved, seconds, shown, warn


def check_mapping(
    fifo: bool,
    batch_size: int,
    max_batching_window: Duration | None,
    max_concurrency: int | None,
) -> None:
    """The event source mapping's own limits (issue 5 adds the cross-resource invariants)."""
    high = limits.ESM_MAX_BATCH_SIZE_FIFO if fifo else limits.ESM_MAX_BATCH_SIZE_STANDARD
    check_range("batch_size", batch_size, limits.ESM_MIN_BATCH_SIZE, high, f"{limits.ESM_DOC} BatchSize")
    check_range(
        "max_concurrency",
        max_concurrency,
        limits.ESM_MIN_MAX_CONCURRENCY,
        limits.ESM_MAX_MAX_CONCURRENCY,
        f"{limits.ESM_DOC} ScalingConfig",
    )
    if max_batching_window is not None and not is_unresolved(max_batching_window):
        if fifo and max_batching_window.to_seconds() > 0:
            raise fail(
                "max_batching_window",
                max_batching_window,
                "is not allowed on a FIFO source queue",
                f"{limits.ESM_DOC} MaximumBatchingWindowInSeconds",
            )
        check_range(
            "max_batching_window",
            max_batching_window.to_seconds(),
            0,
            limits.ESM_MAX_BATCHING_WINDOW_SECONDS,
            f"{limits.ESM_DOC} MaximumBatchingWindowInSeconds",
            integer=False,
        )
    has_window = max_batching_window is not None and (
        is_unresolved(max_batching_window) or max_batching_window.to_seconds() > 0
    )
    if (
        not fifo
        and not is_unresolved(batch_size)
        and batch_size > limits.ESM_MAX_BATCH_SIZE_WITHOUT_WINDOW
        and not has_window
    ):
        raise fail(
            "batch_size",
            batch_size,
            "above 10 needs a max_batching_window on a standard queue",
            f"{limits.ESM_DOC} BatchSize",
        )


def check_provisioned_pollers(config: lambda_.ProvisionedPollerConfig | None, max_concurrency: int | None) -> None:
    """Provisioned mode on an SQS mapping, checked as aws-cdk-lib's ``SqsEventSource`` does (the generic
    ``EventSourceMapping`` the consumer creates checks only the Kafka ranges). Tokens are skipped.

    :raises ValueError: ``max_concurrency`` given as well (the two are exclusive); minimum pollers outside 2..200 or
        maximum pollers outside 2..2000; minimum above maximum; a ``poller_group_name`` (Kafka only).
    """
    if config is None:
        return
    source = limits.ESM_PROVISIONED_DOC
    if max_concurrency is not None:
        raise fail(
            "max_concurrency",
            max_concurrency,
            "must not be given with provisioned_poller_config: on an SQS mapping the two are exclusive (in "
            "provisioned mode maximum_pollers bounds the concurrency, up to "
            f"{limits.LAMBDA_SQS_INVOKES_PER_POLLER} concurrent invokes per poller)",
            f"{limits.LAMBDA_SQS_MAX_CONCURRENCY_DOC}; {source}",
        )
    minimum, maximum = config.minimum_pollers, config.maximum_pollers
    prop = "provisioned_poller_config"
    check_range(
        f"{prop}.minimum_pollers",
        minimum,
        limits.ESM_SQS_MIN_MINIMUM_POLLERS,
        limits.ESM_SQS_MAX_MINIMUM_POLLERS,
        source,
    )
    check_range(
        f"{prop}.maximum_pollers",
        maximum,
        limits.ESM_SQS_MIN_MAXIMUM_POLLERS,
        limits.ESM_SQS_MAX_MAXIMUM_POLLERS,
        source,
    )
    # Unset, the maximum is 200, the top of the minimum's own range.
    if None not in (minimum, maximum) and not is_unresolved(minimum) and not is_unresolved(maximum):
        assert minimum is not None and maximum is not None
        if minimum > maximum:
            raise fail(f"{prop}.minimum_pollers", minimum, f"must be at most maximum_pollers ({maximum:g})", source)
    if config.poller_group_name is not None:
        raise fail(
            f"{prop}.poller_group_name",
            config.poller_group_name,
            "must not be given on an SQS mapping: poller groups share Event Poller Units between Amazon MSK and "
            "self-managed Apache Kafka mappings only",
            limits.ESM_POLLER_GROUP_DOC,
        )


def check_key_prefix(key_prefix: str | None) -> None:
    """The runtime's rules for ``IDEMPOTENCY_KEY_PREFIX`` at synth (``names.is_valid_key_prefix`` and
    ``names.key_prefix_fits``): otherwise every invocation fails at cold start.

    :raises ValueError: ``key_prefix`` is not a string, or is empty or has whitespace or control characters, or is
        longer than 2015 UTF-8 bytes (``<key_prefix>#<md5 hex>`` must fit DynamoDB's 2,048-byte partition key).
    """
    if key_prefix is None or is_unresolved(key_prefix):
        return
    if not isinstance(key_prefix, str) or not names.is_valid_key_prefix(key_prefix):
        raise fail(
            "key_prefix",
            key_prefix,
            "must be printable characters without whitespace (every stored idempotency key starts with it; the "
            "runtime rejects any other value at cold start)",
            limits.IDEMPOTENCY_DOC,
        )
    if not names.key_prefix_fits(key_prefix):
        raise fail(
            "key_prefix",
            Described(f"a {names.key_prefix_bytes(key_prefix)}-byte value"),
            names.KEY_PREFIX_LENGTH_RULE,
            names.KEY_PREFIX_LENGTH_SOURCE,
        )


def check_idempotency_expiry(idempotency_expiry: Duration | None) -> None:
    """:raises ValueError: a resolved expiry under 1 second."""
    expiry_seconds = seconds(idempotency_expiry)
    if expiry_seconds is not None and expiry_seconds < 1:
        raise fail("idempotency_expiry", idempotency_expiry, "must be at least 1 second", limits.IDEMPOTENCY_DOC)


def check_given_visibility_timeout(
    scope: Construct,
    visibility_timeout: Duration | None,
    function: lambda_.IFunction,
    max_batching_window: Duration | None,
    *,
    owned: bool = True,
) -> None:
    """A visibility timeout given to the queue against this function: error below its timeout, warning
    below the 6x guidance. Skipped for an imported function (timeout unknown) and for tokens.

    :param owned: the queue is a ``ProcessingQueue`` (its timeout can be left unset to be filled in); ``False``
        for an ``ExistingQueue``, whose timeout only its owner can raise.
    """
    if not isinstance(function, lambda_.Function):
        return
    timeout = function.timeout or Duration.seconds(limits.LAMBDA_DEFAULT_TIMEOUT_SECONDS)
    visibility, timeout_s, window_s = (
        seconds(visibility_timeout),
        seconds(timeout),
        seconds(max_batching_window or Duration.seconds(0)),
    )
    if visibility is None or timeout_s is None or window_s is None:
        return
    if visibility < timeout_s:
        raise fail(
            "queue visibility_timeout",
            visibility_timeout,
            f"must be at least the function timeout ({timeout.to_human_string()}), or a message becomes "
            "visible again while it is still being processed",
            limits.LAMBDA_SQS_VISIBILITY_DOC,
        )
    guidance = limits.visibility_timeout_guidance_seconds(timeout_s, window_s)
    if visibility < guidance:
        warn(
            scope,
            "visibilityTimeoutBelowGuidance",
            "queue visibility_timeout",
            visibility_timeout,
            f"should be at least {limits.LAMBDA_SQS_VISIBILITY_TIMEOUT_FACTOR} x function timeout "
            f"({timeout.to_human_string()}) + max_batching_window ({window_s:g} seconds) = {guidance} seconds, "
            "so Lambda can retry a throttled batch before the message is received again "
            + (
                "(leave it unset to have it filled in)"
                if owned
                else "(raise the queue's own: it cannot be filled in on a queue this consumer does not own)"
            ),
            limits.LAMBDA_SQS_VISIBILITY_DOC,
        )


def advise(
    scope: Construct,
    idempotency_expiry: Duration,
    retention_period: Duration | None,
    max_receive_count: int | None,
) -> None:
    """Warnings that depend on the queue and this consumer together."""
    expiry, retention = seconds(idempotency_expiry), seconds(retention_period)
    if expiry is not None and retention is not None and expiry < retention:
        assert retention_period is not None
        warn(
            scope,
            "idempotencyExpiryBelowRetention",
            "idempotency_expiry",
            idempotency_expiry,
            f"should be at least the queue's retention_period ({retention_period.to_human_string()}): "
            "a resend or redelivery after the record expires is processed, and charged, twice (leave it "
            "unset to use the retention period)",
            limits.IDEMPOTENCY_EXPIRY_DOC,
        )
    count = max_receive_count
    if count is not None and not is_unresolved(count) and count < limits.LAMBDA_SQS_RECOMMENDED_MIN_MAX_RECEIVE_COUNT:
        warn(
            scope,
            "maxReceiveCountBelowGuidance",
            "queue max_receive_count",
            count,
            f"should be at least {limits.LAMBDA_SQS_RECOMMENDED_MIN_MAX_RECEIVE_COUNT} on a queue consumed by "
            "Lambda: throttling alone can move a valid message to the dead-letter queue after too few receives",
            limits.LAMBDA_SQS_DLQ_DOC,
        )


def check_reserved_concurrency(
    scope: Construct,
    function: lambda_.IFunction,
    max_concurrency: int | None,
    provisioned: lambda_.ProvisionedPollerConfig | None = None,
) -> None:
    """Warn when the function's reserved concurrency is below the total concurrency the SQS event source mappings
    that invoke it can drive (this one included, counted when this consumer is created): ``MaximumConcurrency``
    of an on-demand mapping, 10 concurrent invokes per poller x ``MaximumPollers`` (200 when unset) of a
    provisioned one. Skipped for an imported function (its reserved concurrency is unknown), when this mapping sets
    neither, and for tokens."""
    if max_concurrency is None and provisioned is None:
        return
    if not isinstance(function, lambda_.Function):
        return
    # lambda.Function has no getter for its reserved concurrency: read the L1 property.
    reserved = getattr(function.node.default_child, "reserved_concurrent_executions", None)
    if reserved is None or is_unresolved(reserved):
        return
    ceilings = _mapping_ceilings(function)
    if any(is_unresolved(ceiling) for ceiling in ceilings):
        return
    total = sum(ceilings)
    if reserved < total:
        mappings = f"{len(ceilings)} mapping" + ("s" if len(ceilings) > 1 else "")
        if provisioned is None:
            here = f"max_concurrency {max_concurrency} here"
            source = limits.LAMBDA_SQS_MAX_CONCURRENCY_DOC
        else:
            maximum = provisioned.maximum_pollers
            shown_max = (
                f"{limits.ESM_SQS_DEFAULT_MAXIMUM_POLLERS} (unset: the default)" if maximum is None else f"{maximum}"
            )
            here = (
                f"provisioned mode: {limits.LAMBDA_SQS_INVOKES_PER_POLLER} concurrent invokes per poller x "
                f"maximum_pollers {shown_max} = {_ceiling(None, maximum)} here"
            )
            source = limits.LAMBDA_SQS_PROVISIONED_CONCURRENCY_DOC
        warn(
            scope,
            "reservedConcurrencyBelowMaxConcurrency",
            "function reserved_concurrent_executions",
            reserved,
            "should be at least the maximum concurrency of the SQS event source mappings that invoke it "
            f"({here}; {total:g} in total over {mappings}): otherwise Lambda "
            "throttles the invocations above the reserved concurrency, the throttled batches return to the queue "
            "and their receive counts climb toward the dead-letter queue",
            source,
        )


def _ceiling(max_concurrency: float | None, maximum_pollers: float | None) -> float:
    """The most concurrent invocations one mapping drives: its maximum concurrency, or in provisioned mode 10 per
    poller x its maximum pollers (200 when unset)."""
    if max_concurrency is not None:
        return max_concurrency
    pollers = limits.ESM_SQS_DEFAULT_MAXIMUM_POLLERS if maximum_pollers is None else maximum_pollers
    if is_unresolved(pollers):
        return pollers
    return limits.LAMBDA_SQS_INVOKES_PER_POLLER * pollers


def _mapping_ceilings(function: lambda_.Function) -> list[float]:
    """The concurrency ceiling of every event source mapping in the function's stack that invokes it and sets one
    (``MaximumConcurrency``, or ``ProvisionedPollerConfig``)."""
    stack = Stack.of(function)
    target = stack.resolve(function.function_name)
    ceilings = []
    for construct in stack.node.find_all():
        if (
            isinstance(construct, lambda_.CfnEventSourceMapping)
            and Stack.of(construct) is stack
            and stack.resolve(construct.function_name) == target
        ):
            maximum = getattr(construct.scaling_config, "maximum_concurrency", None)
            pollers = construct.provisioned_poller_config
            if maximum is not None:
                ceilings.append(maximum)
            elif pollers is not None:
                ceilings.append(_ceiling(None, getattr(pollers, "maximum_pollers", None)))
    return ceilings


def visibility_timeout_needed(timeout: Duration, window: Duration) -> ValueError:
    """The error for a queue whose visibility timeout cannot be filled in: a token timeout or batching window."""
    token = (
        f"function timeout ({shown(timeout)})" if is_unresolved(timeout) else (f"max_batching_window ({shown(window)})")
    )
    return fail(
        "visibility_timeout",
        None,
        f"must be given when the {token} is a deploy-time token: it would be filled in as "
        f"{limits.LAMBDA_SQS_VISIBILITY_TIMEOUT_FACTOR} x function timeout + max_batching_window, and CloudFormation "
        "has no arithmetic to compute that from a token; left unset, SQS keeps its 30-second default, and Lambda "
        "refuses the event source mapping at deploy time when that is below the function timeout. Give the "
        "ProcessingQueue (or PaymentProcessor) an explicit visibility_timeout of at least "
        f"{limits.LAMBDA_SQS_VISIBILITY_TIMEOUT_FACTOR} x the largest function timeout + max_batching_window",
        f"{limits.LAMBDA_SQS_VISIBILITY_DOC}; {limits.CFN_TOKEN_DOC}",
    )


#: Why two consumers must not share a key prefix on one table: the runtime's ``operations.py`` docstring.
SHARED_PREFIX_DOC = (
    "Powertools for AWS Lambda (Python), Idempotency (the record's id is the key prefix and the hash of the key); "
    "docs/runtime.md, 'Two operations, one table'"
)
#: The attribute each consumer construct sets to what it claims: ``(key_prefix, table, function, shared_prefix)``.
PREFIX_CLAIM_ATTR = "_effectively_once_prefix_claim"


def _same(a: object, b: object, attribute: str) -> bool:
    """Whether two constructs are one resource: the same object, or equal literal values of ``attribute`` (an ARN:
    one resource imported twice)."""
    if a is b:
        return True
    first, second = getattr(a, attribute, None), getattr(b, attribute, None)
    return isinstance(first, str) and not is_unresolved(first) and first == second


def check_shared_prefix(
    consumer: Construct, function: lambda_.IFunction, table: Construct, key_prefix: str | None, shared_prefix: bool
) -> None:
    """No two consumers of one app on one table with the same ``key_prefix`` prop and different functions, unless
    both say ``shared_prefix=True`` (each consumer records its claim with :func:`claim_prefix` once built). A prefix
    left to the handler's ``Consumer`` (``None``) or a deploy-time value is not seen here (the runtime's
    ``Consumer(operation=...)`` guards it).

    :raises ValueError: another consumer holds the prefix on the table with another function; the message names both
        consumers, both functions and the prefix.
    """
    check_type("shared_prefix", shared_prefix, bool, "a bool")
    if key_prefix is None or is_unresolved(key_prefix):
        return
    for other in consumer.node.root.node.find_all():
        claim = getattr(other, PREFIX_CLAIM_ATTR, None)
        if other is consumer or claim is None:
            continue
        prefix, other_table, other_function, other_shared = claim
        if prefix != key_prefix or not _same(table, other_table, "table_arn"):
            continue
        if _same(function, other_function, "function_arn") or (shared_prefix and other_shared):
            continue
        raise fail(
            f"key_prefix of {consumer.node.path} (function {function.node.path})",
            key_prefix,
            f"must not be the key_prefix of {other.node.path} (function {other_function.node.path}) on the same "
            "idempotency table: their records share ids, so one consumer's record answers the other's message as a "
            "duplicate (a refund acknowledged by the charge's record, never run). Give each its own key_prefix, or "
            "pass shared_prefix=True on both when they run one operation",
            SHARED_PREFIX_DOC,
        )


def claim_prefix(
    consumer: Construct, function: lambda_.IFunction, table: Construct, key_prefix: str | None, shared_prefix: bool
) -> None:
    """Record what ``consumer`` holds, for :func:`check_shared_prefix` of the consumers created after it: at the end
    of its construction, so a constructor that raised holds nothing."""
    if key_prefix is not None and not is_unresolved(key_prefix):
        setattr(consumer, PREFIX_CLAIM_ATTR, (key_prefix, table, function, shared_prefix))
