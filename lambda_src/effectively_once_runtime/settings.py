"""The environment contract the constructs set and the runtime reads at cold start (names in ``names.py``).
Standard library only.

=============================== ======== ============================================================================
variable                        required meaning
=============================== ======== ============================================================================
``IDEMPOTENCY_TABLE_NAME``      yes      Powertools' ``DynamoDBPersistenceLayer`` table (partition key ``id``, TTL
                                         ``expiration``): its ARN (what the constructs set; any account or Region;
                                         the DynamoDB client is built in the ARN's Region) or a plain name (a table
                                         in ``AWS_REGION`` of the function's account).
``IDEMPOTENCY_EXPIRY_SECONDS``  no       How long a completed record answers duplicates, in seconds. Default 3600
                                         (Powertools' default). The consumer sets the source queue's retention.
``IDEMPOTENCY_KEY_PREFIX``      no       Stable prefix of every stored key. Default: the ``key_prefix`` the
                                         function's ``Consumer`` was built with, never the function name, so a
                                         renamed or replaced function keeps its records. Printable, no whitespace,
                                         at most 2015 UTF-8 bytes (``names.MAX_KEY_PREFIX_BYTES``).
``POWERTOOLS_SERVICE_NAME``     no       Logger/Metrics service. Default ``names.DEFAULT_SERVICE_NAME``.
``POWERTOOLS_METRICS_NAMESPACE`` no      Metrics namespace. Default ``names.DEFAULT_METRICS_NAMESPACE``.
``POWERTOOLS_IDEMPOTENCY_DISABLED`` no   Powertools' own switch; ``true`` turns idempotency off (control runs only).
``DEAD_LETTER_QUEUE_URL``       no       The source queue's DLQ: a permanent failure is sent there on first sight
                                         and reported done (``dead_letter.py``). Unset or empty: it is a batch item
                                         failure, and SQS moves it after ``maxReceiveCount`` receives.
``ON_FAILURE_QUEUE_URL``        no       The function's on-failure queue: an EventBridge, SNS or S3 event refused
                                         for good is recorded there in Lambda's destination-record shape and the
                                         invocation succeeds (``on_failure.py``). Unset or empty: it is raised, and
                                         Lambda retries it.
``ON_FAILURE_DIRECT``           no       ``true``: a refused direct invocation is recorded there too (every caller
                                         invokes asynchronously). Default ``false``: raised to the caller.
``SOURCE_QUEUES``               no       The queues the function consumes, JSON keyed by queue ARN:
                                         ``{"<ARN>": {"maxReceiveCount": 5, "visibilityTimeout": 30}}`` (counts
                                         and seconds, each left out when unknown; ``QueueFacts``). The per-record
                                         backoff (``backoff.py``) acts on these queues only. Unset or empty: none.
=============================== ======== ============================================================================
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import names
from .errors import ConcurrencyModeRefused

#: ``arn:<partition>:dynamodb:<region>:<account>:table/<name>``: DynamoDB's item APIs take it as ``TableName``
#: (Amazon DynamoDB Developer Guide, "DynamoDB API operations supported by resource-based policies"), but a
#: request goes to the client's own Region (botocore's DynamoDB endpoint rule set), hence the region group.
_TABLE_ARN = re.compile(r"arn:[a-z-]+:dynamodb:(?P<region>[a-z0-9-]+):[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}")
_DIGITS = re.compile(r"[0-9]{1,12}")


def runs_one_request_per_process(mode: str | None) -> bool:
    """Whether ``AWS_LAMBDA_CONCURRENCY_MODE`` ``mode`` gives each concurrent request a process of its own: unset,
    empty or ``process`` (any case, spaces around ignored); the one rule of the runtime and the constructs."""
    return mode is None or mode.strip().lower() in ("", names.PROCESS_CONCURRENCY_MODE)


def refuse_shared_process(env: Mapping[str, str] | None = None) -> None:
    """Refuse a concurrency mode where requests share this process.

    On Lambda Managed Instances the production Python runtimes run each concurrent request in a process of its own
    (AWS Lambda Developer Guide, "Python runtime for Lambda Managed Instances",
    https://docs.aws.amazon.com/lambda/latest/dg/lambda-managed-instances-python-runtime.html); Lambda's experimental
    Python 3.14 images add ``AWS_LAMBDA_CONCURRENCY_MODE`` ``thread`` and ``hybrid``, where requests run side by side
    in one process and share its module state (aws/aws-lambda-python-runtime-interface-client#215). The runtime
    holds one Lambda context per process, on the state's one ``IdempotencyConfig``, and one deadline and batch: in
    such a mode the last request's deadline would become every in-flight record's in-progress expiry (a 1 s request
    holding its key for 15 minutes after a kill, a 15-minute request's claim expiring after 1 s). Unset, empty or
    ``process`` (any case) runs; any other value, a mode this runtime does not know included, is refused.

    :raises ConcurrencyModeRefused: ``AWS_LAMBDA_CONCURRENCY_MODE`` names another mode; the message names the value
        and what to set instead.
    """
    env = os.environ if env is None else env
    raw = env.get(names.ENV_CONCURRENCY_MODE)
    if runs_one_request_per_process(raw):
        return
    raise ConcurrencyModeRefused(
        f"{names.ENV_CONCURRENCY_MODE}={raw!r}: effectively_once_runtime runs one request per process only (unset, "
        f"or {names.PROCESS_CONCURRENCY_MODE!r}, the default of Lambda Managed Instances). In this mode requests "
        "share the process, and the runtime holds one Lambda context, deadline and batch per process: the last "
        "request's deadline would become every in-flight record's in-progress expiry. Unset the variable or set it "
        f"to {names.PROCESS_CONCURRENCY_MODE!r}"
    )


def table_region(name: str, table: str) -> str | None:
    """The Region of a table given by ARN; ``None`` for a plain table name (the client's Region applies).

    :param name: the environment variable, for the error message.
    :raises ValueError: ``table`` starts like an ARN but is not a DynamoDB table ARN.
    """
    if not table.startswith("arn:"):
        return None
    match = _TABLE_ARN.fullmatch(table)
    if match is None:
        raise ValueError(
            f"{name} must be a table name or a DynamoDB table ARN "
            f"(arn:<partition>:dynamodb:<region>:<account>:table/<name>), but {table!r} was given"
        )
    return match.group("region")


def parse_key_prefix(name: str, raw: str) -> str:
    """``raw`` if it is a usable key prefix (``name`` is the variable or parameter it came from, for the message).
    Every stored key starts with it: a stray space or newline would orphan
    every record silently, and a prefix too long for a DynamoDB partition key would fail every record's first write.

    :raises ValueError: empty, or not printable characters without whitespace; longer than
        ``names.MAX_KEY_PREFIX_BYTES`` (2015) UTF-8 bytes (the message gives the size, not the value).
    """
    if not names.is_valid_key_prefix(raw):
        raise ValueError(f"{name} must be printable characters without whitespace, but {raw!r} was given")
    if not names.key_prefix_fits(raw):
        raise ValueError(
            f"{name} {names.KEY_PREFIX_LENGTH_RULE}, but a {names.key_prefix_bytes(raw)}-byte value was given "
            f"(source: {names.KEY_PREFIX_LENGTH_SOURCE})"
        )
    return raw


@dataclass(frozen=True)
class QueueFacts:
    """What the constructs know of one source queue (``SOURCE_QUEUES``).

    :ivar max_receive_count: receives before SQS moves a message to the DLQ (its redrive policy), or ``None``.
    :ivar visibility_timeout_seconds: the queue's visibility timeout in seconds, or ``None``.
    """

    max_receive_count: int | None = None
    visibility_timeout_seconds: int | None = None


_FACTS = {"maxReceiveCount": (1, 1000), "visibilityTimeout": (0, 43200)}


def parse_source_queues(raw: str | None) -> dict[str, QueueFacts]:
    """``SOURCE_QUEUES`` as ``{queue ARN: QueueFacts}``; ``{}`` when unset or empty.

    :raises ValueError: not a JSON object of ``arn:...:sqs:...`` keys whose values are objects, or a
        ``maxReceiveCount`` that is not an integer in 1..1000, or a ``visibilityTimeout`` that is not an integer of
        seconds in 0..43200. Other keys of a queue's object are left out (facts a later construct may add).
    """
    if not raw:
        return {}
    rule = (
        f"{names.ENV_SOURCE_QUEUES} must be a JSON object keyed by queue ARN, each value an object of "
        '"maxReceiveCount" (1..1000) and "visibilityTimeout" (seconds, 0..43200)'
    )
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ValueError(f"{rule}, but {raw!r} was given")
    queues: dict[str, QueueFacts] = {}
    for arn, facts in doc.items():
        if not arn.startswith("arn:") or ":sqs:" not in arn or not isinstance(facts, dict):
            raise ValueError(f"{rule}, but {raw!r} was given")
        for name, value in facts.items():
            if name not in _FACTS:
                continue  # a fact a later construct adds: this runtime does not read it
            low, high = _FACTS[name]
            if type(value) is not int or not low <= value <= high:
                raise ValueError(f"{rule}, but {arn!r} has {name!r}: {value!r}")
        queues[arn] = QueueFacts(facts.get("maxReceiveCount"), facts.get("visibilityTimeout"))
    return queues


@dataclass(frozen=True)
class RuntimeSettings:
    """What the runtime reads from the environment (see the module docstring)."""

    table_name: str
    key_prefix: str
    expiry_seconds: int = names.DEFAULT_EXPIRY_SECONDS
    dead_letter_queue_url: str | None = None
    on_failure_queue_url: str | None = None
    on_failure_direct: bool = False
    source_queues: Mapping[str, QueueFacts] = field(default_factory=dict)

    @property
    def table_region(self) -> str | None:
        """Region of the idempotency table when given by ARN, else ``None`` (the function's own Region)."""
        return table_region(names.ENV_TABLE_NAME, self.table_name)

    @classmethod
    def from_env(cls, *, default_key_prefix: str, env: Mapping[str, str] | None = None) -> RuntimeSettings:
        """Read the settings; ``default_key_prefix`` applies when ``IDEMPOTENCY_KEY_PREFIX`` is unset or empty.

        :raises ValueError: ``IDEMPOTENCY_TABLE_NAME`` is missing, or a value is malformed (the message names the
            variable and the value; ``DEAD_LETTER_QUEUE_URL`` and ``ON_FAILURE_QUEUE_URL`` are checked where they are
            used, ``dead_letter.py`` and ``on_failure.py``).
        """
        env = os.environ if env is None else env
        table = env.get(names.ENV_TABLE_NAME)
        if not table:
            raise ValueError(f"missing environment variable(s): {names.ENV_TABLE_NAME}")
        table_region(names.ENV_TABLE_NAME, table)
        raw_expiry = env.get(names.ENV_EXPIRY_SECONDS) or str(names.DEFAULT_EXPIRY_SECONDS)
        # ASCII digits only: int() would also take " 3600\n", "3_600" and non-ASCII digits (and raise on 4,301).
        expiry = int(raw_expiry) if _DIGITS.fullmatch(raw_expiry) else 0
        if expiry <= 0:
            raise ValueError(
                f"{names.ENV_EXPIRY_SECONDS} must be a positive integer of seconds, but {raw_expiry!r} was given"
            )
        prefix = env.get(names.ENV_KEY_PREFIX) or default_key_prefix
        return cls(
            table_name=table,
            key_prefix=parse_key_prefix(names.ENV_KEY_PREFIX, prefix),
            expiry_seconds=expiry,
            dead_letter_queue_url=env.get(names.ENV_DEAD_LETTER_QUEUE_URL) or None,
            on_failure_queue_url=env.get(names.ENV_ON_FAILURE_QUEUE_URL) or None,
            on_failure_direct=_flag(names.ENV_ON_FAILURE_DIRECT, env.get(names.ENV_ON_FAILURE_DIRECT)),
            source_queues=parse_source_queues(env.get(names.ENV_SOURCE_QUEUES)),
        )


def _flag(name: str, raw: str | None) -> bool:
    """A boolean variable: ``true`` or ``false`` in any case; unset or empty is ``false``.

    :raises ValueError: any other value (the message names the variable and the value).
    """
    value = (raw or "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, but {raw!r} was given")
    return value == "true"
