"""moto's server with two small fixes for its SQS backend's cost, three for its SQS, DynamoDB and S3 backends under
concurrent calls, two for FIFO deduplication (SQS and SNS), and one bridge for Powertools' public parameters, for
the local tooling only. Written for and tested on moto :data:`REQUIRED_MOTO_VERSION` (the ``[local]`` extra's pin):
any other release is refused at start. Each patch is a function below naming the moto behaviour it changes, its
report in docs/moto-bugs.md (an upstream-style report with a plain boto3 + moto reproduction) and the test that
shows it.

Bridged (moto 5.2.x): ``Queue.attributes`` computes every attribute, the three ``ApproximateNumberOf*`` counts
each scanning all messages, and moto reads it (a) once per message returned by ``ReceiveMessage`` (to check the
retention period) and (b) several times per message sent to a FIFO queue (to read
``ContentBasedDeduplication``). With a thousand messages queued that is quadratic, and sends and receives slow
to seconds. Fix (a) reads the retention period directly; fix (b) makes ``attributes`` a mapping that computes
each value when it is read. What the API answers is unchanged.

Bridged (moto 5.2.x): Powertools' public SSM parameters. ``PaymentProcessor`` resolves its layer at deploy time
from ``/aws/service/powertools/python/<arch>/python3.<minor>/<release>`` (an ``AWS::SSM::Parameter::Value``
template parameter); moto's CloudFormation looks that name up in its own store and answers a 500 when it is
missing, and moto refuses ``PutParameter`` under ``/aws/`` as AWS does. moto already serves some AWS-owned
public parameters (``/aws/service/global-infrastructure``, AMI ids) by loading them on first read; the bridge
adds Powertools' the same way: on the first read under ``/aws/service/powertools`` in an account and region, it
publishes one local layer version per architecture and Python version (a stand-in: the local runner runs
handlers in process with the installed Powertools) and writes the ``<release>`` and ``latest`` parameters
pointing at it, for the one release installed here (``aws-lambda-powertools``, which requirements.txt pins to
the constructs' ``POWERTOOLS_VERSION``; a test checks). Any other release stays missing, as on AWS for a release
that was never published, so a wrong pin fails the local deploy too.

Fixed (moto 5.2.x): lost messages under concurrent SQS calls. moto's server answers each request on its own
thread, and its SQS backend changes a queue's message list without a lock: ``DeleteMessage`` rebuilds the list and
assigns it back, so a message that ``SendMessage`` appended in between is dropped (SQS answered it with a message
id, and no receive ever returns it), and a message that ``ReceiveMessage`` moved to the DLQ after maxReceiveCount
receives is put back. It is the one mechanism found that fits the soak's lost FIFO payment (10,000 payments, 8
pollers deleting while the producer sends; accepted, never delivered, not in the DLQ). Fix: the calls that change
messages (send, receive, delete, change visibility, purge) run one at a time under one lock for all queues
(:data:`SQS_LOCK`), and a long poll waits with the lock released (moto's own wait would hold it: with visible
messages whose FIFO group is in flight its loop spins until the wait time ends, and a delete would wait as long).
What the API answers is unchanged; a long poll looks again at least every :data:`RECEIVE_RECHECK_SECONDS`.

Fixed (moto 5.2.x), the same kind of fault in DynamoDB: a conditional write is a read, a check and a write with no
lock (``Table.put_item``: ``get_item``, the condition, then the assignment), so two concurrent ``PutItem`` calls with
``attribute_not_exists`` on one key can both pass. DynamoDB makes a conditional write atomic, and the idempotency
layer's first step (Powertools' INPROGRESS record) relies on it: the chaos's concurrent duplicates are exactly two
such calls. Fix: the item calls (``PutItem``, ``GetItem``, ``UpdateItem``, ``DeleteItem``,
``TransactWriteItems``) run one at a time.

Fixed (moto 5.2.x): FIFO deduplication that forgets. moto compares a FIFO message's deduplication id only with
the messages still in the queue: once the first copy is received and deleted, a resend with the same id is queued
again, where SQS keeps the id for the 5-minute deduplication interval ("Amazon SQS continues tracking the
deduplication ID even after the message has been received and deleted": Amazon SQS FIFO queue key terms); and it
ignores ``DeduplicationScope=messageGroup`` (the same id in two groups is one message, where SQS queues two). Fix:
each FIFO queue remembers each deduplication id it accepted (per message group with that scope) with the time it
was first accepted, for moto's ``DEDUPLICATION_TIME_IN_SECONDS`` (read on every send, so a test can shorten it); a
send within that window with a known id is answered as before (a message id) and not queued. SNS FIFO topics get
it too: moto hands a publish's deduplication id on to each SQS FIFO subscription's ``SendMessage``. A FIFO topic
with ``ContentBasedDeduplication`` makes no id at all in moto; the second fix gives such a publish the SHA-256 of
its body, as SNS does.

Fixed (moto 5.2.5), the same kind of fault in S3: ``PutObject`` with ``If-None-Match: *`` looks the key up and
writes the object later, with no lock, so two concurrent conditional puts on one key can both succeed (S3 lets one
through and answers the other 412 or 409). The S3 effect adapter (``effectively_once_runtime.effects.s3``) relies on
it when two executions of one effect overlap (a redelivery while the first still runs). Fix: every ``PutObject`` on
a bucket and key runs under that key's lock (:data:`S3_PUT_LOCKS`); puts on other keys are not held up.

Bridged (moto 5.2.5): Lambda's asynchronous invocation from EventBridge and SNS (issue 23). moto raises
``NotImplementedError`` for an EventBridge rule whose target is a Lambda function, and hands an SNS ``lambda``
subscription's message to its Docker-backed Lambda (no Docker here: the message is lost with a log line). The local
AWS plays Lambda's asynchronous queue as an SQS queue per function, its *inbox* (``runner/async_inbox.py``), which the
local runner drains with Lambda's retry policy: the bridges put each event there exactly as the function receives it,
with the message attribute ``async_queue.SOURCE_ATTRIBUTE`` naming its source. Rules on custom buses too.

Run as ``python -m effectively_once_local.aws.moto_patches -H 127.0.0.1 -p PORT`` (the arguments of ``moto_server``).
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import io
import json
import threading
import time
import zipfile
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial, wraps
from importlib.metadata import version
from typing import Any

from ..runner.async_inbox import EVENTBRIDGE, SNS, SOURCE_ATTRIBUTE, inbox_name
from .fifo_order import fifo_groups_keep_their_order

#: The one moto release the patches below are written for and tested on (they wrap moto's internals): the
#: ``[local]`` extra and requirements-dev.txt pin it, and the local AWS refuses any other (:func:`check_moto_version`).
REQUIRED_MOTO_VERSION = "5.2.5"


class MotoVersionError(RuntimeError):
    """The installed moto is not :data:`REQUIRED_MOTO_VERSION`; the message is one line."""


def check_moto_version(found: str | None = None) -> None:
    """Refuse any moto but :data:`REQUIRED_MOTO_VERSION` (``found``: the installed one by default).

    :raises MotoVersionError: naming the found and the required versions.
    """
    found = found or version("moto")
    if found != REQUIRED_MOTO_VERSION:
        raise MotoVersionError(
            f"the local AWS needs moto {REQUIRED_MOTO_VERSION} (its patches are tested on that release only), "
            f'found moto {found}: pip install "effectively-once[local]"'
        )


#: Powertools' public parameters (see the module docstring) and the layers they name, as Powertools publishes
#: them (source: Powertools for AWS Lambda (Python) docs, Installation, Lambda Layer).
POWERTOOLS_PARAMETER_ROOT = "/aws/service/powertools"
POWERTOOLS_ARCHITECTURES = ("x86_64", "arm64")
POWERTOOLS_PYTHON_VERSIONS = ("3.10", "3.11", "3.12", "3.13", "3.14")


class _LazyAttributes(Mapping[str, Any]):
    def __init__(self, queue: Any) -> None:
        self._queue = queue
        names = list(queue.BASE_ATTRIBUTES)
        if queue.fifo_queue:
            names += queue.FIFO_ATTRIBUTES
        if queue.kms_master_key_id:
            names += queue.KMS_ATTRIBUTES
        self._getters: dict[str, Callable[[], Any]] = {}
        from moto.core.utils import camelcase_to_underscores

        for name in names:
            self._getters[name] = partial(getattr, queue, camelcase_to_underscores(name))
        if queue.policy:
            self._getters["Policy"] = lambda: queue.policy
        if queue.redrive_policy:
            import json

            self._getters["RedrivePolicy"] = lambda: json.dumps(queue.redrive_policy)

    def __getitem__(self, key: str) -> Any:
        value = self._getters[key]()
        return str(value).lower() if isinstance(value, bool) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._getters)

    def __len__(self) -> int:
        return len(self._getters)


def powertools_release() -> str:
    """The Powertools release the local AWS publishes: the one installed with the local tooling."""
    return version("aws-lambda-powertools")


def _stand_in_layer_zip(release: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "python/EFFECTIVELY_ONCE_LOCAL_STAND_IN.txt",
            f"Local stand-in for the Powertools for AWS Lambda (Python) {release} layer: the local runner runs "
            "handlers in process with the installed aws-lambda-powertools.\n",
        )
    return buffer.getvalue()


def _load_powertools_parameters(parameters: Any) -> None:
    """Publish the stand-in layers in ``parameters``' account and region and write Powertools' parameters."""
    from collections import defaultdict

    from moto.awslambda.models import lambda_backends
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter

    release = powertools_release()
    content = {"ZipFile": base64.b64encode(_stand_in_layer_zip(release))}
    lambda_backend = lambda_backends[parameters.account_id][parameters.region_name]
    for arch in POWERTOOLS_ARCHITECTURES:
        for python in POWERTOOLS_PYTHON_VERSIONS:
            layer = lambda_backend.publish_layer_version(
                {
                    "LayerName": f"AWSLambdaPowertoolsPythonV3-python{python.replace('.', '')}-{arch}",
                    "Description": f"Powertools for AWS Lambda (Python) {release} (local stand-in)",
                    "Content": content,
                    "CompatibleRuntimes": [f"python{python}"],
                    "CompatibleArchitectures": [arch],
                }
            )
            for leaf in (release, "latest"):
                name = f"{POWERTOOLS_PARAMETER_ROOT}/python/{arch}/python{python}/{leaf}"
                # defaultdict's own __getitem__: ParameterDict's would trigger this loader again.
                defaultdict.__getitem__(parameters, name).append(
                    Parameter(  # type: ignore[abstract]  # moto's own loaders build it the same way
                        account_id=parameters.account_id,
                        name=name,
                        value=layer.arn,
                        parameter_type="String",
                        description=None,
                        allowed_pattern=None,
                        keyid=None,
                        last_modified_date=utcnow(),
                        version=1,
                        data_type="text",
                    )
                )


#: The SQS backend calls that change messages (see the module docstring), run one at a time under
#: :data:`SQS_LOCK`. ``Queue.add_message`` and ``Queue.delete_message`` too: moto calls them from other places (a
#: message moved to a DLQ, its own event source mappings). ``receive_message`` is wrapped apart: a long poll waits
#: with the lock released.
SQS_BACKEND_MUTATIONS = ("send_message", "delete_message", "change_message_visibility", "purge_queue")
SQS_QUEUE_MUTATIONS = ("add_message", "delete_message")
#: One lock for every queue: a receive that moves a message to a DLQ changes two queues, and one lock cannot be
#: taken in two orders (two queues that are each other's DLQ would deadlock with a lock per queue).
SQS_LOCK = threading.Condition(threading.RLock())
#: How often a waiting long poll looks again when nothing was sent, deleted or changed meanwhile: a message whose
#: visibility timeout or delay ends, or whose FIFO group is released by a timeout, wakes nobody.
RECEIVE_RECHECK_SECONDS = 0.1
#: The DynamoDB backend's item calls (see the module docstring), run one at a time under :data:`DYNAMODB_ITEM_LOCK`.
DYNAMODB_ITEM_CALLS = ("put_item", "get_item", "update_item", "delete_item", "transact_write_items")
DYNAMODB_ITEM_LOCK = threading.RLock()
#: The attribute of a moto FIFO ``Queue`` that holds the deduplication ids its sends were accepted with
#: (:func:`remember_deduplication_ids`): key (the id; ``(group, id)`` with ``DeduplicationScope=messageGroup``) ->
#: ``sent_timestamp`` (ms) of the message first accepted with it, oldest first. Read and changed under
#: :data:`SQS_LOCK`.
DEDUPLICATION_IDS_ATTRIBUTE = "_effectively_once_deduplication_ids"


class _KeyLocks:
    """One lock per key, made on first use and dropped when no thread holds it or waits for it (a lock per S3 object
    ever written would otherwise stay for the server's life)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, tuple[threading.Lock, list[int]]] = {}  # key -> (lock, [holders and waiters])

    @contextmanager
    def holding(self, key: Hashable) -> Iterator[None]:
        """Hold ``key``'s lock for the block (another thread holding it: wait until it is released)."""
        with self._guard:
            if key not in self._locks:
                self._locks[key] = (threading.Lock(), [0])
            lock, users = self._locks[key]
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if not users[0]:
                    del self._locks[key]

    def __len__(self) -> int:
        """How many keys have a lock now (held or waited for)."""
        with self._guard:
            return len(self._locks)


#: The S3 backend's ``PutObject`` (see the module docstring) runs under the lock of its ``(bucket, key)``.
S3_PUT_LOCKS = _KeyLocks()

_held = threading.local()  # how deep this thread is in SQS_LOCK's wrapped calls


def _holding(lock: Any, method: Callable[..., Any], notify: bool = False) -> Callable[..., Any]:
    @wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with lock:
            _held.depth = getattr(_held, "depth", 0) + 1
            try:
                return method(*args, **kwargs)
            finally:
                _held.depth -= 1
                if notify:
                    lock.notify_all()  # a long poll may now find a message

    locked.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    return locked


def _long_poll_outside_the_lock(method: Callable[..., Any]) -> Callable[..., Any]:
    """``receive_message`` that takes :data:`SQS_LOCK` for moto's receive without its wait (``wait_seconds_timeout``
    0) and waits, for what is left of the long poll, with the lock released until a wrapped call changes messages
    or :data:`RECEIVE_RECHECK_SECONDS` pass. Called inside another wrapped call (moto's own event source mappings),
    it does not wait: waiting would release the caller's hold."""
    signature = inspect.signature(method)

    @wraps(method)
    def receive(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        wait = float(bound.arguments.get("wait_seconds_timeout") or 0)
        bound.arguments["wait_seconds_timeout"] = 0
        deadline = time.monotonic() + wait
        with SQS_LOCK:
            nested = getattr(_held, "depth", 0) > 0
            while True:
                result = method(*bound.args, **bound.kwargs)
                remaining = deadline - time.monotonic()
                if result or remaining <= 0 or nested:
                    return result
                SQS_LOCK.wait(timeout=min(remaining, RECEIVE_RECHECK_SECONDS))

    receive.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    return receive


def serialize_queue_mutations() -> None:
    """Run the SQS backend's message-changing calls one at a time under :data:`SQS_LOCK`, a long poll waiting
    outside it; a second call changes nothing.

    moto 5.2.5: ``Queue.delete_message`` rebuilds the message list and assigns it back without a lock, so a message
    sent meanwhile vanishes (and one a receive moved to the DLQ meanwhile is put back); its long poll spins through
    the whole wait while the only visible messages are in FIFO groups in flight, and misses a group released during
    the wait. The patch serializes the mutations and waits outside the lock (:func:`_long_poll_outside_the_lock`).
    docs/moto-bugs.md, reports 2 and 3; tests: ``test_a_message_sent_during_a_delete_is_kept``,
    ``test_a_message_moved_to_the_dlq_during_a_delete_stays_moved``,
    ``test_a_long_poll_waits_without_holding_up_a_delete``,
    ``test_two_queues_that_are_each_others_dlq_do_not_deadlock``.
    """
    from moto.sqs import models

    wrapped: list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]
    wrapped = [(models.SQSBackend, n, partial(_holding, SQS_LOCK, notify=True)) for n in SQS_BACKEND_MUTATIONS]
    wrapped += [(models.Queue, n, partial(_holding, SQS_LOCK, notify=True)) for n in SQS_QUEUE_MUTATIONS]
    wrapped.append((models.SQSBackend, "receive_message", _long_poll_outside_the_lock))
    for cls, name, wrap in wrapped:
        method = getattr(cls, name)
        if not getattr(method, "__effectively_once_locked__", False):
            setattr(cls, name, wrap(method))


def serialize_dynamodb_item_calls() -> None:
    """Make the DynamoDB backend's item calls atomic towards each other; a second call changes nothing.

    moto 5.2.5: ``Table.put_item`` reads the item, checks the condition and writes without a lock, so two concurrent
    ``attribute_not_exists`` puts on one key both succeed (DynamoDB lets one through). The patch runs the item calls
    one at a time under :data:`DYNAMODB_ITEM_LOCK`. docs/moto-bugs.md, report 4; test:
    ``test_two_concurrent_conditional_puts_on_one_key_let_one_through``."""
    from moto.dynamodb.models import DynamoDBBackend

    for name in DYNAMODB_ITEM_CALLS:
        method = getattr(DynamoDBBackend, name)
        if not getattr(method, "__effectively_once_locked__", False):
            setattr(DynamoDBBackend, name, _holding(DYNAMODB_ITEM_LOCK, method))


def serialize_s3_puts_per_key() -> None:
    """Make ``PutObject``'s ``If-None-Match: *`` check and its write atomic on each key; a second call changes
    nothing.

    moto 5.2.5: ``S3Response.put_object`` (s3/responses.py) checks that the key has no object, then builds the object
    and only then stores it (``S3Backend.put_object``), with no lock: two concurrent conditional puts on one key both
    pass the check and both succeed, the later write replacing the earlier (S3 lets exactly one through: "If an
    identical key name is found in the bucket, the operation fails", Amazon S3 User Guide, How to prevent object
    overwrites with conditional writes, https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
    The patch runs every ``PutObject`` (the conditional ones and the plain ones, which could otherwise land between a
    conditional put's check and its write) under the lock of its ``(bucket, key)`` (:data:`S3_PUT_LOCKS`): the check,
    the write, and the metadata, ACL and tags moto sets afterwards. Puts on other keys run alongside.
    ``CompleteMultipartUpload`` with ``If-None-Match`` has the same shape and is not patched (nothing here uses it).
    docs/moto-bugs.md, report 7; tests: ``test_two_concurrent_conditional_s3_puts_on_one_key_let_one_through``,
    ``test_conditional_s3_puts_on_other_keys_are_not_held_up``."""
    from moto.s3.responses import S3Response

    put_object = S3Response.put_object
    if getattr(put_object, "__effectively_once_locked__", False):
        return

    @wraps(put_object)
    def put_object_holding_the_key(self: Any) -> Any:
        with S3_PUT_LOCKS.holding((self.bucket_name, self.parse_key_name())):
            return put_object(self)

    put_object_holding_the_key.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object_holding_the_key  # type: ignore[method-assign]


class _WithoutMotosDeduplication:
    """A FIFO queue as moto's own ``Queue.add_message`` sees it for a send :func:`remember_deduplication_ids` already
    accepted: not FIFO, so that it skips its deduplication (against the queued messages only, and ignoring the
    scope); every other attribute read is the queue's (the append, the lock, the event source mappings)."""

    fifo_queue = False

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def _deduplication_key(queue: Any, message: Any) -> Any:
    if queue.deduplication_scope == "messageGroup":
        return (message.group_id, message.deduplication_id)
    return message.deduplication_id


def remember_deduplication_ids() -> None:
    """moto 5.2.5: ``Queue.add_message`` compares a FIFO message's deduplication id (explicit, or the body's SHA-256
    with ``ContentBasedDeduplication``) only with the messages still in the queue, so a resend after the first copy
    was received and deleted is queued again (SQS drops it for the 5-minute deduplication interval, deleted or not),
    and it ignores ``DeduplicationScope=messageGroup`` (the same id in two groups is dropped once; SQS queues both).
    The patch keeps, per FIFO queue (:data:`DEDUPLICATION_IDS_ATTRIBUTE`), each id accepted by a send (per group
    with that scope) and the ``sent_timestamp`` of its first message, for moto's ``DEDUPLICATION_TIME_IN_SECONDS``
    read at each send; a send within that window with a known id returns without queueing (``SendMessage``
    answers with a message id, as SQS does), any other is queued by moto's own ``add_message`` with its check
    skipped (:class:`_WithoutMotosDeduplication`). A message moved to a dead-letter queue (received before: a send
    never was) and a standard queue keep moto's behaviour. Check, record and append run under :data:`SQS_LOCK`; a
    second call changes nothing. SNS FIFO topics deduplicate through this too: moto passes a publish's id on to
    each SQS FIFO subscription's ``send_message``. docs/moto-bugs.md, report 5; tests:
    ``test_a_resend_after_the_delete_is_dropped``, ``test_a_resend_after_the_deduplication_window_is_queued``,
    ``test_a_content_based_resend_after_the_delete_is_dropped``,
    ``test_an_sns_fifo_publish_after_the_delete_is_dropped``,
    ``test_message_group_scope_deduplicates_within_a_group_only``."""
    from moto.sqs import models

    add_message: Callable[..., None] = models.Queue.add_message
    if getattr(add_message, "__effectively_once_deduplication__", False):
        return

    @wraps(add_message)
    def add_message_remembering_ids(self: Any, message: Any) -> None:
        if not (self.fifo_queue and message.deduplication_id and message.approximate_receive_count == 0):
            add_message(self, message)  # a standard queue, or a message moved to a DLQ: moto's own
            return
        with SQS_LOCK:
            window_ms = models.DEDUPLICATION_TIME_IN_SECONDS * 1000
            now = message.sent_timestamp
            accepted: dict[Any, int] = self.__dict__.setdefault(DEDUPLICATION_IDS_ATTRIBUTE, {})
            while accepted:  # forget what left the window (oldest first): a send costs O(1), not O(ids kept)
                oldest, since = next(iter(accepted.items()))
                if now - since < window_ms:
                    break
                del accepted[oldest]
            key = _deduplication_key(self, message)
            first = accepted.get(key)
            if first is not None and now - first < window_ms:
                return  # a duplicate within the window: accepted, not queued
            accepted.pop(key, None)  # a key back after its window goes last: the dict stays oldest first
            accepted[key] = now
            add_message(_WithoutMotosDeduplication(self), message)

    add_message_remembering_ids.__effectively_once_deduplication__ = True  # type: ignore[attr-defined]
    models.Queue.add_message = add_message_remembering_ids  # type: ignore[method-assign]


def sns_content_based_deduplication_ids() -> None:
    """moto 5.2.5: a FIFO topic with ``ContentBasedDeduplication`` accepts a publish without a deduplication id and
    makes none, so its SQS FIFO subscriptions get none: the delivery fails unless the queue deduplicates on content
    itself, and then it hashes what it receives (without raw delivery, the envelope, which has a new ``MessageId``
    on every publish: no two are ever duplicates). SNS makes the id from the SHA-256 of the message body and
    includes it in what it delivers to SQS FIFO queues. The patch gives such a publish that id (``Topic.publish``),
    which moto passes on to each SQS subscription; an explicit id is kept. A second call changes nothing.
    docs/moto-bugs.md, report 6; test: ``test_an_sns_content_based_publish_after_the_delete_is_dropped``."""
    from moto.sns import models as sns_models

    publish = sns_models.Topic.publish
    if getattr(publish, "__effectively_once_deduplication__", False):
        return
    signature = inspect.signature(publish)

    @wraps(publish)
    def publish_with_content_based_id(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)
        topic = bound.arguments["self"]
        if topic.fifo_topic and topic.content_based_deduplication and not bound.arguments.get("deduplication_id"):
            body = str(bound.arguments["message"])
            bound.arguments["deduplication_id"] = hashlib.sha256(body.encode("utf-8")).hexdigest()
        return publish(*bound.args, **bound.kwargs)

    publish_with_content_based_id.__effectively_once_deduplication__ = True  # type: ignore[attr-defined]
    sns_models.Topic.publish = publish_with_content_based_id  # type: ignore[method-assign]


def event_bus_ref_is_its_name() -> None:
    """moto 5.2.5: an ``AWS::Events::EventBus`` has no ``physical_resource_id``, so ``{"Ref": <bus>}`` resolves to
    the Python object, and a rule on it (``EventBusName``: what CDK emits for a custom bus) fails CreateStack with a
    500 (``'EventBus' object has no attribute 'split'``). CloudFormation's Ref of an event bus is its name. The patch
    gives the bus that id. docs/moto-bugs.md, report 8; test: ``test_a_rule_on_a_custom_bus_deploys``."""
    from moto.events import models as events_models

    if not hasattr(events_models.EventBus, "physical_resource_id"):
        events_models.EventBus.physical_resource_id = property(lambda self: self.name)  # type: ignore[attr-defined]


#: Lambda's default function timeout, in seconds (AWS Lambda Developer Guide, "Configure Lambda function
#: timeout": 3 seconds by default): an inbox a bridge creates for a function moto does not know.
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3
#: What an inbox's visibility timeout adds to its function's timeout, in seconds: an attempt still running is not
#: received again (the runner makes a failed attempt's message visible at its retry delay itself).
INBOX_VISIBILITY_MARGIN_SECONDS = 5
#: The marker of this module's bridges on the moto methods they wrap (a second call wraps nothing twice).
_BRIDGED = "__effectively_once_bridge__"


def inbox_visibility_timeout(function_timeout_seconds: int) -> int:
    """The visibility timeout (seconds) of the inbox of a function that times out after ``function_timeout_seconds``:
    that timeout plus :data:`INBOX_VISIBILITY_MARGIN_SECONDS`."""
    return int(function_timeout_seconds) + INBOX_VISIBILITY_MARGIN_SECONDS


def _function_of(function_arn: str) -> tuple[str, str, str]:
    """``(account, region, function name)`` of a Lambda function ARN, qualified or not.

    :raises ValueError: not a Lambda function ARN (``arn:<partition>:lambda:<region>:<account>:function:<name>``).
    """
    parts = function_arn.split(":")
    if len(parts) not in (7, 8) or parts[2] != "lambda" or parts[5] != "function" or not parts[6]:
        raise ValueError(f"not a Lambda function ARN: {function_arn!r}")
    return parts[4], parts[3], parts[6]


def _is_function_arn(arn: str) -> bool:
    try:
        _function_of(arn)
    except ValueError:
        return False
    return True


def put_in_inbox(function_arn: str, body: str, source: str) -> None:
    """Queue ``body`` (the event, as the function receives it) in the inbox of the function ``function_arn`` names
    (``async_queue.inbox_name`` of its name; a qualifier is dropped), in the SQS backend of that ARN's account and
    Region, with the message attribute ``SOURCE_ATTRIBUTE`` = ``source``. A missing inbox is created first, with the
    visibility timeout :func:`inbox_visibility_timeout` of the function's timeout
    (:data:`LAMBDA_DEFAULT_TIMEOUT_SECONDS` when moto does not know the function: the event is queued anyway, for a
    runner to find).

    :raises ValueError: ``function_arn`` is not a Lambda function ARN.
    """
    from moto.awslambda.models import lambda_backends
    from moto.sqs.models import sqs_backends

    account, region, name = _function_of(function_arn)
    sqs = sqs_backends[account][region]
    queue = inbox_name(name)
    with SQS_LOCK:
        if queue not in sqs.queues:
            try:
                timeout = int(lambda_backends[account][region].get_function(name).timeout)
            except Exception:  # moto's UnknownFunctionException, or a function without a timeout
                timeout = LAMBDA_DEFAULT_TIMEOUT_SECONDS
            sqs.create_queue(queue, VisibilityTimeout=inbox_visibility_timeout(timeout))
    attributes = {SOURCE_ATTRIBUTE: {"DataType": "String", "StringValue": source}}
    sqs.send_message(queue, body, message_attributes=attributes)


class _RuleWithTargets:
    """A moto ``Rule`` as its own ``send_to_targets`` sees it for the targets moto delivers itself: every attribute
    is the rule's but ``targets``."""

    def __init__(self, rule: Any, targets: list[dict[str, Any]]) -> None:
        self._rule = rule
        self.targets = targets

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rule, name)


def _event_time(value: Any) -> Any:
    """An event's ``time`` as EventBridge delivers it (``2026-12-01T10:00:00Z``); moto keeps epoch seconds."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.replace(".", "", 1).isdigit()):
        from moto.core.utils import iso_8601_datetime_without_milliseconds, utcfromtimestamp

        return iso_8601_datetime_without_milliseconds(utcfromtimestamp(float(value)))  # type: ignore[arg-type]
    return value


#: The fields of an event as a Lambda target receives it (Amazon EventBridge User Guide, "Amazon EventBridge
#: events", https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events.html), in that order; moto's event
#: also holds its ``ingestion-time``.
EVENT_FIELDS = ("version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail")


def eventbridge_event_for_lambda(rule: Any, target: dict[str, Any], event: dict[str, Any], transform: bool) -> Any:
    """What the Lambda ``target`` of ``rule`` receives for moto's ``event``: the whole event (:data:`EVENT_FIELDS`,
    ``time`` in ISO 8601), or, with an ``InputTransformer`` and ``transform``, what moto's own transformation
    (``EventTemplateParser``, the one it applies for SQS targets) makes of it; its template must give JSON (a plain
    text template is AWS's too, not moto's).

    :raises NotImplementedError: the target has ``Input`` or ``InputPath`` (moto has no transformation for either:
        only the whole event and an ``InputTransformer`` are delivered; docs/moto-bugs.md, report 9).
    """
    import copy

    whole = {name: copy.deepcopy(event.get(name)) for name in EVENT_FIELDS}
    whole["version"] = whole["version"] or "0"
    whole["resources"] = whole["resources"] or []
    whole["time"] = _event_time(whole["time"])
    if not transform:
        return whole
    for unsupported in ("Input", "InputPath"):
        if target.get(unsupported) is not None:
            raise NotImplementedError(
                f"the local AWS delivers the whole event or an InputTransformer's output to a Lambda target, but "
                f"target {target.get('Id')} of rule {rule.name} has {unsupported}"
            )
    transformer = target.get("InputTransformer")
    if not transformer:
        return whole
    from moto.events.utils import EventTemplateParser

    return EventTemplateParser.parse(
        input_template=transformer.get("InputTemplate"),
        input_paths_map=transformer.get("InputPathsMap", {}),
        # moto's template reads the ingestion time too (``<aws.events.event.ingestion-time>``).
        event={**whole, "ingestion-time": event.get("ingestion-time", event.get("time"))},  # type: ignore[typeddict-item]
    )


def eventbridge_lambda_targets() -> None:
    """moto 5.2.5: ``Rule.send_to_targets`` (events/models.py) delivers to log groups, archives, SQS queues, event
    buses and API destinations, and raises ``NotImplementedError`` ("Expr not defined") for any other target: a
    ``PutEvents`` matching a rule with a Lambda target fails (a 500 from the server), and the rule's other targets
    after it get nothing. EventBridge invokes the function asynchronously with the event. The patch delivers each
    matching rule's Lambda targets to the function's inbox (:func:`put_in_inbox`, source ``eventbridge``) as the
    function receives the event (:func:`eventbridge_event_for_lambda`), on any bus, and leaves the other targets to
    moto. A second call changes nothing. docs/moto-bugs.md, report 9; tests:
    ``test_put_events_on_a_custom_bus_reaches_the_inbox``, ``test_an_event_the_pattern_does_not_match_is_not_queued``,
    ``test_an_input_transformer_is_applied``, ``test_the_local_aws_server_bridges_eventbridge_and_sns``
    (tests/local/test_async_bridges.py)."""
    from moto.events import models as events_models

    send_to_targets: Callable[..., None] = events_models.Rule.send_to_targets
    if getattr(send_to_targets, _BRIDGED, False):
        return

    @wraps(send_to_targets)
    def send_to_targets_and_inboxes(self: Any, original_event: Any, transform_input: bool = True) -> None:
        functions = [t for t in self.targets if _is_function_arn(t["Arn"])]
        if not functions:
            send_to_targets(self, original_event, transform_input)
            return
        if not self.event_pattern.matches_event(original_event):
            return
        others = [t for t in self.targets if t not in functions]
        if others:
            send_to_targets(_RuleWithTargets(self, others), original_event, transform_input)
        for target in functions:
            event = eventbridge_event_for_lambda(self, target, original_event, transform_input)
            put_in_inbox(target["Arn"], json.dumps(event), EVENTBRIDGE)

    setattr(send_to_targets_and_inboxes, _BRIDGED, True)
    events_models.Rule.send_to_targets = send_to_targets_and_inboxes  # type: ignore[method-assign]


def sns_record_for_lambda(
    subscription: Any,
    message: str,
    message_id: str,
    subject: str | None,
    message_attributes: dict[str, Any] | None,
) -> dict[str, Any]:
    """The event a Lambda function subscribed to an SNS topic receives for one message: one record with
    ``EventSource`` ``aws:sns``, ``EventVersion``, ``EventSubscriptionArn`` and ``Sns``: ``Type``, ``MessageId``,
    ``TopicArn``, ``Subject`` (``None`` without one), ``Message``, ``Timestamp``, ``SignatureVersion``,
    ``Signature``, ``SigningCertUrl``, ``UnsubscribeUrl``, ``MessageAttributes`` as ``{name: {"Type", "Value"}}``
    (AWS Lambda Developer Guide, "Invoking Lambda functions with Amazon SNS notifications",
    https://docs.aws.amazon.com/lambda/latest/dg/with-sns.html). The timestamp, signature and certificate URL are
    moto's, as for its HTTP and SQS subscriptions."""
    post = subscription.get_post_data(message, message_id, subject, message_attributes=message_attributes)
    region = subscription.topic.arn.split(":")[3]
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": subscription.arn,
                "Sns": {
                    "Type": post["Type"],
                    "MessageId": message_id,
                    "TopicArn": subscription.topic.arn,
                    "Subject": subject or None,
                    "Message": message,
                    "Timestamp": post["Timestamp"],
                    "SignatureVersion": post["SignatureVersion"],
                    "Signature": post["Signature"],
                    "SigningCertUrl": post["SigningCertURL"],
                    "UnsubscribeUrl": (
                        f"https://sns.{region}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={subscription.arn}"
                    ),
                    "MessageAttributes": {
                        name: {"Type": value["Type"], "Value": str(value["Value"])}
                        for name, value in (message_attributes or {}).items()
                    },
                },
            }
        ]
    }


def sns_lambda_subscriptions() -> None:
    """moto 5.2.5: ``Subscription.publish`` (sns/models.py) hands a ``lambda`` subscription's message to its
    Docker-backed Lambda (``send_sns_message``); without Docker the message is lost with a log line, and the publish
    succeeds. SNS invokes the function asynchronously with the SNS event. The patch puts that event
    (:func:`sns_record_for_lambda`) in the function's inbox (:func:`put_in_inbox`, source ``sns``), after moto's own
    filter policy and ``MessageStructure=json`` (the ``lambda`` key, else ``default``); other protocols stay moto's. A
    second call changes nothing. docs/moto-bugs.md, report 10; tests: ``test_an_sns_publish_reaches_the_inbox``,
    ``test_an_sns_filter_policy_is_applied``, ``test_the_local_aws_server_bridges_eventbridge_and_sns``
    (tests/local/test_async_bridges.py)."""
    from moto.sns import models as sns_models

    publish: Callable[..., None] = sns_models.Subscription.publish
    if getattr(publish, _BRIDGED, False):
        return
    signature = inspect.signature(publish)

    @wraps(publish)
    def publish_to_inbox(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        subscription = given["self"]
        if subscription.protocol != "lambda":
            publish(*args, **kwargs)
            return
        message, attributes = given["message"], given["message_attributes"]
        matcher = subscription._filter_policy_matcher
        if matcher is not None and not matcher.matches(attributes, message):
            return
        if given["message_structure"] == "json":
            message = subscription._parse_message_structure(message, subscription.protocol)
        record = sns_record_for_lambda(subscription, message, given["message_id"], given["subject"], attributes)
        put_in_inbox(subscription.endpoint, json.dumps(record), SNS)

    setattr(publish_to_inbox, _BRIDGED, True)
    sns_models.Subscription.publish = publish_to_inbox  # type: ignore[method-assign]


def lazy_queue_attributes() -> None:
    """moto 5.2.5: ``Queue.attributes`` builds every attribute on each read, the three ``ApproximateNumberOf*``
    counts each scanning all of the queue's messages, and every ``SendMessage`` reads it (``ContentBasedDeduplication``;
    a FIFO send four times): a send costs O(queue depth), filling a queue is quadratic. The patch makes it a mapping
    that computes a value only when it is read (:class:`_LazyAttributes`); what the API answers is unchanged.
    docs/moto-bugs.md, report 1; test: ``test_a_send_does_not_count_the_queue``."""
    from moto.sqs import models

    def attributes(self: Any) -> Mapping[str, Any]:
        return _LazyAttributes(self)

    models.Queue.attributes = property(attributes)  # type: ignore[assignment,method-assign]


def direct_retention_check() -> None:
    """moto 5.2.5: ``ReceiveMessage`` checks each message it returns against the retention period through
    ``get_queue_attributes``, every attribute (and so every count of the queue) once per message returned. The patch
    reads the queue's ``message_retention_period`` directly; the check itself is moto's. docs/moto-bugs.md, report 1;
    test: ``test_a_receive_does_not_count_the_queue``."""
    from moto.core.utils import unix_time
    from moto.sqs import models

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        queue = self.get_queue(queue_name)
        return bool(int(queue.message_retention_period) + message.sent_timestamp / 1000 > unix_time())

    models.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]


def powertools_parameters() -> None:
    """moto 5.2.5 serves some AWS-owned public SSM parameters, not Powertools' layer parameters (not a bug: a gap;
    ``PutParameter`` under ``/aws/`` is refused, as on AWS). The patch loads them on the first read under
    :data:`POWERTOOLS_PARAMETER_ROOT` in an account and region, as moto loads its own (see the module docstring).
    Tests: ``tests/local/test_local_powertools_layer.py``."""
    from moto.ssm import models as ssm_models

    check_loading_status = ssm_models.ParameterDict._check_loading_status

    def check_loading_status_with_powertools(self: Any, key: str) -> None:
        check_loading_status(self, key)
        if str(key or "").startswith(POWERTOOLS_PARAMETER_ROOT) and not getattr(self, "_powertools_loaded", False):
            self._powertools_loaded = True
            _load_powertools_parameters(self)

    ssm_models.ParameterDict._check_loading_status = check_loading_status_with_powertools  # type: ignore[method-assign]


def apply() -> None:
    """Every patch of this module, on the moto release they were written for (:func:`check_moto_version`)."""
    check_moto_version()
    lazy_queue_attributes()
    direct_retention_check()
    powertools_parameters()
    remember_deduplication_ids()  # before the serialization, which then wraps it too
    fifo_groups_keep_their_order()  # before the serialization too: its receive runs under the lock
    sns_content_based_deduplication_ids()
    serialize_queue_mutations()
    serialize_dynamodb_item_calls()
    serialize_s3_puts_per_key()
    event_bus_ref_is_its_name()
    eventbridge_lambda_targets()
    sns_lambda_subscriptions()


if __name__ == "__main__":
    try:
        apply()
    except MotoVersionError as exc:
        raise SystemExit(f"error: {exc}") from None
    from moto.server import main

    main()
