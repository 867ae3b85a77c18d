"""The names shared by the runtime and the constructs: environment variables, metric names, log fields and log
messages. Standard library only (nothing is imported at all): the CDK side imports this one module (house rule 4's
single exception), so the alarms, the dashboard and the Logs Insights queries read exactly what the runtime writes.

Renaming a value here renames it on both sides at once; a deployed dashboard or saved query keeps reading the old
name until the stack is deployed again.
"""

from __future__ import annotations

# --- environment variables (set by IdempotentQueueConsumer, read by the runtime at cold start) ---------------------
#: The idempotency table: its ARN (what the constructs set; the DynamoDB client is built in the ARN's Region) or a
#: plain name (a table in ``AWS_REGION``).
ENV_TABLE_NAME = "IDEMPOTENCY_TABLE_NAME"
#: How long a completed record answers duplicates, in seconds (a positive integer).
ENV_EXPIRY_SECONDS = "IDEMPOTENCY_EXPIRY_SECONDS"
#: The stable prefix of every stored idempotency key (never derived from the function name).
ENV_KEY_PREFIX = "IDEMPOTENCY_KEY_PREFIX"
#: Powertools Logger/Metrics service (the ``service`` metric dimension).
ENV_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
#: Powertools Metrics namespace.
ENV_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
#: The source queue's dead-letter queue (its URL): where the runtime sends a permanent failure on first sight. Unset
#: or empty: a permanent failure is a batch item failure like any other.
ENV_DEAD_LETTER_QUEUE_URL = "DEAD_LETTER_QUEUE_URL"
#: The function's on-failure queue (its URL, set by ``IdempotentEventConsumer``): where the runtime records an
#: EventBridge, SNS or S3 event it refused for good (a permanent error), in the shape of Lambda's own destination
#: records, so Lambda's retries never run it again. Unset or empty: the failure is raised, as any other.
ENV_ON_FAILURE_QUEUE_URL = "ON_FAILURE_QUEUE_URL"
#: ``true``: a refused direct invocation is recorded on the on-failure queue too (every caller of the function
#: invokes it asynchronously: a synchronous caller would get a success for a refusal). Unset, empty or ``false``:
#: a direct invocation's failure is raised to its caller.
ENV_ON_FAILURE_DIRECT = "ON_FAILURE_DIRECT"
#: The queues the function consumes, as JSON keyed by queue ARN (the records' ``eventSourceARN``):
#: ``{"<queue ARN>": {"maxReceiveCount": 5, "visibilityTimeout": 30}}``, each fact left out when unknown. Set by
#: ``IdempotentQueueConsumer`` (an ``ExistingQueue``'s given facts included); the runtime's per-record backoff
#: (``backoff.py``) and receive budget read it. Unset or empty: no queue is known.
ENV_SOURCE_QUEUES = "SOURCE_QUEUES"
#: Lambda's longest function timeout, in seconds (AWS Lambda Developer Guide, "Lambda quotas",
#: https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html: function timeout, 900 seconds).
LAMBDA_MAX_TIMEOUT_SECONDS = 900
#: How Lambda Managed Instances runs concurrent requests of a Python function (Lambda's experimental Python 3.14
#: images; unset on the production runtimes, which run one process per concurrent request): ``process``, ``thread``
#: or ``hybrid``. The runtime runs unset or ``process`` only (``settings.refuse_shared_process``).
ENV_CONCURRENCY_MODE = "AWS_LAMBDA_CONCURRENCY_MODE"
#: The one value of ``ENV_CONCURRENCY_MODE`` where each concurrent request has a process of its own.
PROCESS_CONCURRENCY_MODE = "process"

# --- defaults --------------------------------------------------------------------------------------------------------
#: Seconds a completed record answers duplicates when ``IDEMPOTENCY_EXPIRY_SECONDS`` is unset (Powertools' default).
DEFAULT_EXPIRY_SECONDS = 3600
#: Namespace and service when ``POWERTOOLS_METRICS_NAMESPACE`` / ``POWERTOOLS_SERVICE_NAME`` are unset; the
#: consumer's failed-records alarm assumes the same when its ``metrics_namespace`` / ``service_name`` are unset.
DEFAULT_METRICS_NAMESPACE = "EffectivelyOnce"
DEFAULT_SERVICE_NAME = "payments"

# --- metrics (EMF, unit Count, dimension ``service``) ----------------------------------------------------------------
#: Records whose record function ran to completion (not answered from a stored record).
METRIC_RECORDS_PROCESSED = "RecordsProcessed"
#: Declared side effects that returned (one per execution; a provider may still have answered from its key).
METRIC_EFFECTS_EXECUTED = "EffectsExecuted"
#: Deliveries answered from a completed idempotency record: the record function did not run again.
METRIC_DUPLICATES_SUPPRESSED = "DuplicatesSuppressed"
#: Bad input: not JSON, not an object, no idempotency key, or rejected by the record function (PermanentError).
METRIC_INVALID_RECORDS = "InvalidRecords"
#: Records one SQS invocation reported in ``batchItemFailures``, zero included (the failed-records alarm).
METRIC_FAILED_RECORDS = "FailedRecords"
#: Permanent failures the runtime sent to the dead-letter queue, or an event's record to the on-failure queue, on
#: first sight (and reported done).
METRIC_DEAD_LETTERED = "DeadLettered"
#: Records of an SQS batch not started because the invocation's remaining time could not fit them (returned as
#: batch item failures, so SQS redelivers them: each counts a receive). Not in ``FailedRecords``.
METRIC_RECORDS_DEFERRED = "RecordsDeferred"
#: Records whose record function returned but whose idempotency record could not be completed, after retries: the
#: record fails and comes back; the effect's own key stops a second effect.
METRIC_COMPLETION_FAILURES = "CompletionFailures"
#: Records returned to their queue with a shorter visibility timeout than the queue's (per-record backoff). Not in
#: ``EMF_METRICS`` (the dashboard's list).
METRIC_RECORDS_BACKED_OFF = "RecordsBackedOff"
#: Every metric the runtime emits, in dashboard order.
EMF_METRICS = (
    METRIC_EFFECTS_EXECUTED,
    METRIC_DUPLICATES_SUPPRESSED,
    METRIC_INVALID_RECORDS,
    METRIC_FAILED_RECORDS,
    METRIC_DEAD_LETTERED,
    METRIC_RECORDS_DEFERRED,
    METRIC_COMPLETION_FAILURES,
)
#: Un-keyed effects (``effects.unkeyed``), ``delivery="at_most_once"``: a replay found the effect's claim without
#: its completion and skipped the call. An upper bound on the sends that did not happen (a kill after the send and
#: before its completion counts too). Not in ``EMF_METRICS`` (the dashboard's list).
METRIC_EFFECTS_POSSIBLY_LOST = "EffectsPossiblyLost"
#: Un-keyed effects, ``delivery="at_least_once"``: a call made again after an attempt that did not complete. An upper
#: bound on the real repeats (a kill before the call counts too). Not in ``EMF_METRICS``.
METRIC_EFFECTS_REPEATED = "EffectsRepeated"
#: The dimension Powertools Metrics adds to every metric when a service name is set.
EMF_SERVICE_DIMENSION = "service"

# --- the copy in the dead-letter queue -------------------------------------------------------------------------------
#: The one message attribute the runtime adds to a copy it sends to the dead-letter queue: a JSON object with
#: ``error_type``, ``message`` (cut short), ``message_id`` and ``receive_count`` of the original, ``function_name``.
DEAD_LETTER_REASON_ATTRIBUTE = "effectively-once-reason"

# --- the record on the on-failure queue ------------------------------------------------------------------------------
#: The ``requestContext.condition`` of a record the runtime sent for an event it refused for good (Lambda's own
#: records say ``RetriesExhausted`` or ``EventAgeExceeded``); the reason is in ``responsePayload.errorMessage``.
ON_FAILURE_CONDITION = "PermanentError"

# --- log fields (Powertools Logger JSON) ----------------------------------------------------------------------------
FIELD_MESSAGE = "message"
#: The idempotency key of the record being processed (Powertools Logger's correlation id field).
FIELD_CORRELATION_ID = "correlation_id"
#: The idempotency key (the key JMESPath's value) on every line of a record, and on each effect line.
FIELD_IDEMPOTENCY_KEY = "idempotency_key"
FIELD_MESSAGE_ID = "message_id"
#: A number (``ApproximateReceiveCount``), so Logs Insights can aggregate it.
FIELD_RECEIVE_COUNT = "receive_count"
#: Status of the stored record that answered a duplicate (``COMPLETED``), or that refused the record's claim (a log key
#: of the record's later lines: ``idempotency rejected``, ``record failed``, ``claims.py``).
FIELD_IDEMPOTENCY_STATUS = "idempotency_status"
#: Exception class name of an idempotency rejection (``IdempotencyValidationError``, ...).
FIELD_IDEMPOTENCY_ERROR = "idempotency_error"
#: Why a record is bad input (one line, cut short).
FIELD_REASON = "reason"
#: The declared side effect's name (the effect function's ``__name__``).
FIELD_EFFECT = "effect"
#: Exception class name of a permanent failure sent to the dead-letter queue (``InvalidRecord``, ...).
FIELD_ERROR_TYPE = "error_type"
#: Message id of the copy in the dead-letter queue.
FIELD_DEAD_LETTER_MESSAGE_ID = "dead_letter_message_id"
#: Message id of the record on the on-failure queue.
FIELD_ON_FAILURE_MESSAGE_ID = "on_failure_message_id"
#: The key a declared effect was called with (``Consumer(effect_key=...)``: scoped or the idempotency key itself).
FIELD_EFFECT_KEY = "effect_key"
#: The declared effects that had returned when a record function failed (a list of effect names).
FIELD_EFFECTS = "effects"
#: The FIFO message group of a record skipped behind a failure, and the message whose failure held it back.
FIELD_MESSAGE_GROUP_ID = "message_group_id"
FIELD_BLOCKED_BY = "blocked_by_message_id"
#: The records of a batch left for a later delivery (a number), and the time that was left and needed (ms).
FIELD_DEFERRED = "deferred"
FIELD_REMAINING_MS = "remaining_ms"
FIELD_NEEDED_MS = "needed_ms"
#: How many times a completion was tried.
FIELD_ATTEMPTS = "attempts"
#: The trigger of a failed invocation (``sqs``, ``sns``, ``s3``, ``eventbridge``, ``direct``).
FIELD_TRIGGER = "trigger"

# --- log messages -----------------------------------------------------------------------------------------------------
#: One per delivery whose record function ran to completion.
MSG_RECORD_PROCESSED = "record processed"
#: One per delivery answered from a completed record.
MSG_DUPLICATE_SUPPRESSED = "duplicate suppressed"
#: A delivery turned away by the idempotency layer (in progress elsewhere, same key with another payload).
MSG_IDEMPOTENCY_REJECTED = "idempotency rejected"
#: Bad input (field ``reason``).
MSG_INVALID_RECORD = "invalid record"
#: A record written before numbers were canonical (0.4.0) answered through its old key or validation hash (field
#: ``reason``: which); quiet once those records expired (``legacy_hashes``).
MSG_LEGACY_HASH = "legacy hash accepted"
#: The attribute holding the token of the attempt that wrote a claim: Powertools' in-progress record
#: (``claims``) and an un-keyed effect's marker (``effects.unkeyed``). A refused claim whose stored item holds
#: this attempt's token met this attempt's own write, sent again by the SDK after its answer was lost.
ATTEMPT_TOKEN_ATTR = "attempt_token"
#: One WARNING line when an in-progress record without an in-progress expiry, older than the function timeout and a
#: margin, is removed so the key can be claimed (``claims.py``; field ``reason``: the record and its write time).
MSG_STALE_CLAIM_TAKEN_OVER = "stale in-progress record taken over"
#: One INFO line per ``s3:TestEvent`` S3 sent through a queue or a topic when a bucket's notification configuration
#: was written (field ``reason``: the bucket and the time): acknowledged, no record processed, nothing dead-lettered.
MSG_S3_TEST_EVENT = "s3 test event acknowledged"
#: A permanent failure sent to the dead-letter queue on first sight and reported done (fields ``error_type``,
#: ``dead_letter_message_id``; ``idempotency_key`` when the body had one, ``message_id``).
MSG_RECORD_DEAD_LETTERED = "record dead-lettered"
#: A permanent failure that could not be sent to the dead-letter queue (field ``reason``): reported as a batch item
#: failure instead, so SQS moves it after ``maxReceiveCount`` receives.
MSG_DEAD_LETTER_FAILED = "dead-letter send failed"
#: An event refused for good (EventBridge, SNS, S3; a direct invocation with ``ON_FAILURE_DIRECT``) recorded on the
#: on-failure queue, and the invocation reported done (fields ``error_type``, ``on_failure_message_id``,
#: ``trigger``).
MSG_RECORD_SENT_ON_FAILURE = "record sent to on-failure queue"
#: A refused event whose record could not be sent to the on-failure queue (field ``reason``): the failure is raised
#: instead, so Lambda retries it and then sends its own record.
MSG_ON_FAILURE_SEND_FAILED = "on-failure send failed"
#: One WARNING line per record that fails: each record of ``batchItemFailures`` (a FIFO record skipped behind a
#: failure too, with ``message_group_id`` and ``blocked_by_message_id``; deferred records are not failures) and each
#: direct invocation that raises; fields ``message_id``, ``idempotency_key``, ``error_type``, ``reason``.
MSG_RECORD_FAILED = "record failed"
#: One INFO line per SQS batch some of whose records were deferred (fields ``deferred``, ``remaining_ms``,
#: ``needed_ms``).
MSG_RECORDS_DEFERRED = "records deferred"
#: INFO, one per batch whose returned records got a backoff: ``backed_off`` (how many) and ``delay_seconds`` (the
#: shortest and the longest delay, ``[min, max]``).
MSG_RECORDS_BACKED_OFF = "records backed off"
#: WARNING: a backoff call failed (``reason``); the records it named keep the queue's visibility timeout.
MSG_BACKOFF_FAILED = "backoff failed"
#: WARNING: the original of a record whose copy is in the DLQ could not be deleted at once (``reason``); the event
#: source mapping deletes it at the batch's end.
MSG_ORIGINAL_NOT_DELETED = "original not deleted"
FIELD_BACKED_OFF = "backed_off"
#: The message ids a ``backoff failed`` line is about (a list).
FIELD_MESSAGE_IDS = "message_ids"
FIELD_DELAY_SECONDS = "delay_seconds"
#: The record function returned but the idempotency record could not be completed after retries (fields
#: ``error_type``, ``reason``, ``attempts``): the record fails, and its effect's own key must stop a second effect.
MSG_COMPLETION_FAILED = "completion failed"
#: A record function failed after declared effects had returned whose results were not kept (field ``effects``):
#: Powertools deletes the in-progress record, so the record's next delivery (a retry or a redrive) runs those effects
#: again; only an effect that takes its key makes that repeat harmless. An effect whose result was kept
#: (``effect_results.py``: released with the record) is answered from it instead, and not listed.
MSG_EFFECT_REPEATED_AFTER_FAILURE = "effect repeated after failure"
#: A declared effect answered from the result an earlier run of the same record kept (``effect_results.py``: the
#: idempotency record released with its results): not called again (fields ``effect``, ``effect_key``,
#: ``effect_call``). The record's earlier run failed after it.
MSG_EFFECT_ANSWERED_FROM_MARKER = "effect answered from marker"
#: A declared effect returned but its result will not answer a later run of the record (WARNING; fields ``effect``
#: and ``effect_call``, or ``effects``, and ``reason``: a result that is not JSON of at most 64 KB, no room left on
#: the record, a failed write of the released record): a later run of the record calls it again.
MSG_EFFECT_RESULT_NOT_KEPT = "effect result not kept"
#: Which call of a declared effect a kept result answers: ``<effect>#<n>``, the n-th call of the effect in one run
#: of the record function (1, 2, ...).
FIELD_EFFECT_CALL = "effect_call"
#: The attribute of an idempotency record released after a failure that holds the results of its declared effects
#: (a map ``<effect>#<n>`` -> the result's JSON text; ``effect_results.py``).
EFFECT_RESULTS_ATTR = "effect_results"
#: A result too large for the idempotency record was not stored (field ``reason``); duplicates are answered with
#: ``RESULT_NOT_STORED``.
MSG_RESULT_NOT_STORED = "result not stored"
#: One per executed side effect, with ``idempotency_key`` and ``effect``, flushed before the effect's caller
#: continues: production's effects-per-key query and the local chaos checker count this line.
EFFECT_EXECUTED = "effect executed"
#: An un-keyed ``at_most_once`` effect skipped on a replay that found its claim pending (WARNING; fields
#: ``idempotency_key``, ``effect``, ``effect_key``, ``effect_marker``, ``delivery``): it may never have happened.
MSG_EFFECT_POSSIBLY_LOST = "effect possibly lost"
#: An un-keyed ``at_least_once`` effect called again after an attempt that did not complete (WARNING; the fields of
#: ``effect possibly lost`` and ``attempts``): it may have happened twice.
MSG_EFFECT_REPEATED = "effect repeated"
#: An un-keyed effect returned but its marker could not be set done (WARNING; fields ``effect_marker``,
#: ``error_type``, ``reason``): a replay treats it as not completed (``effect possibly lost`` or ``effect repeated``).
MSG_EFFECT_MARKER_NOT_UPDATED = "effect marker not updated"
#: The id of an un-keyed effect's marker in the idempotency table (``<key prefix>#effect-marker#...``).
FIELD_EFFECT_MARKER = "effect_marker"
#: An un-keyed effect's delivery mode (``at_most_once``, ``at_least_once``).
FIELD_DELIVERY = "delivery"
#: The fields of the effect line.
EFFECT_FIELDS = (FIELD_IDEMPOTENCY_KEY, FIELD_EFFECT)

#: Outcome lines: exactly one per delivery that reached the idempotency layer and was not turned away.
OUTCOME_MESSAGES = (MSG_RECORD_PROCESSED, MSG_DUPLICATE_SUPPRESSED)
#: Lines the idempotency layer causes when it turns a delivery away or answers it from its record.
REJECTION_MESSAGES = (MSG_DUPLICATE_SUPPRESSED, MSG_IDEMPOTENCY_REJECTED)


# --- the stored result ------------------------------------------------------------------------------------------------
#: What a duplicate is answered with when the first execution's result was too large to store in the idempotency
#: record: ``{RESULT_NOT_STORED_FIELD: RESULT_NOT_STORED, "bytes": <the result's JSON size>}``.
RESULT_NOT_STORED_FIELD = "effectively_once"
RESULT_NOT_STORED = "result not stored"
#: DynamoDB's item size limit, attribute names and values included (Amazon DynamoDB Developer Guide, "Service,
#: account, and table quotas in Amazon DynamoDB": "The maximum item size in DynamoDB is 400 KB").
DYNAMODB_MAX_ITEM_BYTES = 400 * 1024
#: What the idempotency record holds beside its ``data`` and its key: attribute names, ``status``, ``expiration``,
#: ``in_progress_expiration``, the ``validation`` hash (an upper bound).
IDEMPOTENCY_RECORD_OVERHEAD_BYTES = 512


# --- rules of the environment contract ------------------------------------------------------------------------------
#: A DynamoDB partition key value holds 1 to 2,048 bytes. Source: Amazon DynamoDB Developer Guide, "Service, account,
#: and table quotas in Amazon DynamoDB" (partition key value length).
DYNAMODB_MAX_PARTITION_KEY_BYTES = 2048
#: What Powertools appends to the key prefix to make the stored key ``<key_prefix>#<hash>``: ``#`` and the hex digest
#: of the key, MD5 (32 hex characters) unless ``IdempotencyConfig(hash_function=...)`` says otherwise, which the
#: runtime never does. Source: Powertools for AWS Lambda (Python), ``BasePersistenceLayer._get_hashed_idempotency_key``
#: and ``IdempotencyConfig`` (``hash_function="md5"``).
KEY_HASH_SUFFIX_BYTES = 1 + 32
#: The longest key prefix, in UTF-8 bytes, whose stored keys still fit a partition key: 2048 - 33 = 2015. Longer, it
#: passes synth and cold start and then every record fails at its first DynamoDB write.
MAX_KEY_PREFIX_BYTES = DYNAMODB_MAX_PARTITION_KEY_BYTES - KEY_HASH_SUFFIX_BYTES
#: The byte rule as both sides word it (``<prop> <rule>, but ... was given``) and its source.
KEY_PREFIX_LENGTH_RULE = (
    f"must be at most {MAX_KEY_PREFIX_BYTES} bytes in UTF-8: every stored idempotency key is "
    f"<key_prefix>#<32 hex characters of MD5>, and a DynamoDB partition key holds at most "
    f"{DYNAMODB_MAX_PARTITION_KEY_BYTES} bytes"
)
KEY_PREFIX_LENGTH_SOURCE = (
    "Amazon DynamoDB Developer Guide, Service, account, and table quotas in Amazon DynamoDB (partition key value "
    "length: 1 to 2048 bytes); Powertools for AWS Lambda (Python), Idempotency (key_prefix#hash)"
)


#: What the name of a FIFO queue or topic ends with (Amazon SQS Developer Guide, "Amazon SQS FIFO queues"; Amazon SNS
#: Developer Guide, "FIFO topics").
FIFO_SUFFIX = ".fifo"


def is_fifo_address(address: object) -> bool:
    """Whether ``address`` (a queue URL, a queue ARN or a topic ARN) names a FIFO queue or topic: a string whose name
    ends in :data:`FIFO_SUFFIX` (a trailing ``/`` ignored). The one rule for whether a send may carry a
    ``MessageDeduplicationId``: SQS refuses one on a standard queue, fair queues (a ``MessageGroupId`` on a standard
    queue, since July 2025) included."""
    return isinstance(address, str) and address.rstrip("/").endswith(FIFO_SUFFIX)


def is_valid_key_prefix(value: str) -> bool:
    """The character rule for ``IDEMPOTENCY_KEY_PREFIX``, checked by the runtime at cold start and by the consumer at
    synth: non-empty printable characters without whitespace (every stored key starts with it: a stray space or
    newline would orphan every record silently). The length rule is :func:`key_prefix_fits`."""
    return bool(value) and value.isprintable() and not any(c.isspace() for c in value)


def key_prefix_bytes(value: str) -> int:
    """The UTF-8 size of a key prefix (:func:`is_valid_key_prefix` first: it refuses lone surrogates)."""
    return len(value.encode("utf-8"))


def key_prefix_fits(value: str) -> bool:
    """The length rule for ``IDEMPOTENCY_KEY_PREFIX``, checked on both sides as :func:`is_valid_key_prefix`: at most
    ``MAX_KEY_PREFIX_BYTES`` UTF-8 bytes, so ``<prefix>#<md5 hex>`` fits a DynamoDB partition key."""
    return key_prefix_bytes(value) <= MAX_KEY_PREFIX_BYTES
