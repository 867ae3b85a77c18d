"""The synth-time checks of the consumer constructs on their function: the function's timeout and one
``IdempotentQueueConsumer`` per function, for both consumers the stack they are created in, and the function's
concurrency mode (docs/validation.md lists every rule with its source)."""

from __future__ import annotations

import jsii
from aws_cdk import Duration, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IValidation

from effectively_once_runtime import names
from effectively_once_runtime.settings import runs_one_request_per_process

from . import limits
from ._environment_size import function_variables
from ._validation import Described, check_duration_range, fail, is_unresolved, message

#: The variables the runtime reads once per function: a second consumer on the function would overwrite them.
SHARED_SETTINGS = (names.ENV_DEAD_LETTER_QUEUE_URL, names.ENV_EXPIRY_SECONDS, names.ENV_KEY_PREFIX)
#: Why a consumer and its function must share a stack: each cross-stack reference makes the consuming stack depend on
#: the producing one, and the consumer's references go both ways.
PLACEMENT_DOC = "AWS CDK Developer Guide, Stacks (cross-stack references and stack dependencies)"


def check_timeout(prop: str, timeout: Duration | None) -> None:
    """:raises ValueError: a resolved timeout outside Lambda's 1..900 seconds (tokens are skipped)."""
    check_duration_range(
        prop, timeout, limits.LAMBDA_MIN_TIMEOUT_SECONDS, limits.LAMBDA_MAX_TIMEOUT_SECONDS, limits.LAMBDA_TIMEOUT_DOC
    )


#: Why a consumer takes the unqualified function: the runtime's variables live on the function (a version freezes
#: them, an alias points at a version), and Lambda keeps an asynchronous invocation config per qualifier.
QUALIFIER_DOC = (
    "AWS Lambda Developer Guide, Lambda function versions and aliases (a version's configuration is fixed when it is "
    "published); AWS Lambda API Reference, PutFunctionEventInvokeConfig (Qualifier)"
)


def check_unqualified(function: lambda_.IFunction, kind: str) -> None:
    """The consumer's function is a function, not an alias or a version of one.

    An alias or a version would pass every other check and be wrong: ``IdempotentEventConsumer`` wrote the event
    invoke config with ``FunctionName <fn>:<alias>`` and ``Qualifier $LATEST``, and neither consumer can set the
    runtime's variables on an alias (they belong to the function, frozen in each published version).

    :raises ValueError: ``function`` is a ``lambda.Alias`` or ``lambda.Version`` (created or imported), or an
        ``IFunction`` imported from a qualified ARN (``...:function:<name>:<qualifier>``); the message names it.
    """
    alias = getattr(function, "alias_name", None)
    version = getattr(function, "version", None) if alias is None else None
    arn = function.function_arn
    qualified_arn = not is_unresolved(arn) and len(arn.split(":")) == 8
    if alias is None and version is None and not qualified_arn:
        return
    if alias is not None:
        shown = f"alias {alias!r} ({function.node.path})"
    elif version is not None:
        shown = f"version {version!r} ({function.node.path})"
    else:
        shown = f"the qualified ARN {arn}"
    raise fail(
        "function",
        Described(shown),
        f"must be the function itself, not an alias or a version: {kind} sets the runtime's variables on the "
        "function (a published version freezes them) and writes its configuration for the unqualified function "
        "($LATEST). Pass the function behind it (alias.version.lambda_, version.lambda_), publish versions after "
        "this construct, and point the alias at the new version",
        QUALIFIER_DOC,
    )


def check_function_timeout(function: lambda_.IFunction) -> None:
    """The timeout of a given ``lambda.Function`` (unset: Lambda's 3 seconds); an imported function's is unknown."""
    if isinstance(function, lambda_.Function):
        check_timeout(f"timeout of function {function.node.path}", function.timeout)


def check_placement(consumer: Construct, function: lambda_.IFunction, kind: str, advice: str) -> None:
    """A consumer (``kind``: its class name, ``IdempotentQueueConsumer`` or ``IdempotentEventConsumer``) must be
    created in its function's stack.

    What it creates in its own stack (an event source mapping, an event invoke config) names the function, and the
    grants and environment it adds to the function (in the function's stack) name the queue and the table: created
    in another stack, each stack would depend on the other and ``app.synth()`` would fail with a bare
    ``DependencyCycle``. An imported function (no resource of its own: ``lambda.Function.from_function_arn``) is not
    checked: nothing of it is deployed, and the consumer only reads its ARN.

    :param advice: what the message tells the user to do (each construct's own text).
    :raises ValueError: the function is a resource of another stack than the consumer's (source:
        :data:`PLACEMENT_DOC`).
    """
    if function.node.default_child is None:
        return
    function_stack, consumer_stack = Stack.of(function), Stack.of(consumer)
    if function_stack is consumer_stack:
        return
    raise fail(
        f"scope of {kind} {consumer.node.path}",
        Described(f"a scope in stack {consumer_stack.node.path}"),
        f"must be in the stack of its function {function.node.path} (stack {function_stack.node.path}): {advice}",
        PLACEMENT_DOC,
    )


def check_one_consumer(consumer: Construct, function: lambda_.IFunction, kind: type) -> None:
    """No other consumer (``kind``: ``IdempotentQueueConsumer``) of the app consumes with ``function``: the runtime
    reads one ``DEAD_LETTER_QUEUE_URL``, one expiry and one key prefix per function, so a second consumer would
    overwrite the first's and the first queue's poison messages would be copied to the second queue's DLQ.

    :raises ValueError: naming the function and the first consumer's path.
    """
    for other in consumer.node.root.node.find_all():
        if other is consumer or not isinstance(other, kind):
            continue
        given = getattr(other, "function", None)
        if given is not None and _same_function(given, function):
            raise fail(
                "function",
                Described(
                    f"function {function.node.path}, already consumed by IdempotentQueueConsumer {other.node.path},"
                ),
                "must not be shared by two IdempotentQueueConsumers: the runtime reads one "
                f"{', '.join(SHARED_SETTINGS)} per function, so this consumer would overwrite the first one's (its "
                "queue's poison messages would be copied to this queue's dead-letter queue); give each queue its own "
                "function (the same code and layers can back several)",
                "this library's contract (effectively_once_runtime.settings: one environment per function)",
            )


def _same_function(a: lambda_.IFunction, b: lambda_.IFunction) -> bool:
    """The same construct, or two imports of one literal function ARN."""
    if a.node.path == b.node.path:
        return True
    arn_a, arn_b = a.function_arn, b.function_arn
    return not is_unresolved(arn_a) and arn_a == arn_b


#: Why a consumer's function runs one request per process: the runtime's docstring of ``refuse_shared_process``.
CONCURRENCY_MODE_DOC = (
    "AWS Lambda Developer Guide, Python runtime for Lambda Managed Instances (one process per concurrent request); "
    "aws/aws-lambda-python-runtime-interface-client#215 (the experimental thread and hybrid modes)"
)


@jsii.implements(IValidation)
class ConcurrencyMode:
    """Validation of a consumer: its function's ``AWS_LAMBDA_CONCURRENCY_MODE``, when set to a literal, is
    ``process`` (the runtime refuses any other at cold start, ``settings.refuse_shared_process``). A validation, so
    a variable set after the consumer counts too; a deploy-time value is left to the runtime."""

    def __init__(self, function: lambda_.Function) -> None:
        self._function = function

    def validate(self) -> list[str]:
        value = function_variables(self._function).get(names.ENV_CONCURRENCY_MODE)
        if not isinstance(value, str) or runs_one_request_per_process(value):
            return []
        return [
            message(
                f"environment variable {names.ENV_CONCURRENCY_MODE} of function {self._function.node.path}",
                value,
                f"must be unset or {names.PROCESS_CONCURRENCY_MODE!r}: in the thread and hybrid modes requests share "
                "one process, and the runtime holds one Lambda context, deadline and batch per process (its handler "
                "refuses to start)",
                CONCURRENCY_MODE_DOC,
            )
        ]


_CONCURRENCY_MODE_CHECKED = "_effectively_once_concurrency_mode"


def check_concurrency_mode(function: lambda_.Function) -> None:
    """Add :class:`ConcurrencyMode` to ``function`` once, however many consumers it has (one error, not one per
    consumer)."""
    if not getattr(function, _CONCURRENCY_MODE_CHECKED, False):
        function.node.add_validation(ConcurrencyMode(function))
        setattr(function, _CONCURRENCY_MODE_CHECKED, True)
