"""moto's server with two small fixes for its SQS backend's cost, two for its SQS and DynamoDB backends under
concurrent calls, and one bridge for Powertools' public parameters, for the local tooling only. Written for and
tested on moto :data:`REQUIRED_MOTO_VERSION` (the ``[local]`` extra's pin): any other release is refused at start.
Each patch is a function below naming the moto behaviour it changes, its report in docs/moto-bugs.md (an
upstream-style report with a plain boto3 + moto reproduction) and the test that shows it.

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

Run as ``python -m effectively_once_local._moto_server -H 127.0.0.1 -p PORT`` (the arguments of ``moto_server``).
"""

from __future__ import annotations

import base64
import inspect
import io
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from functools import partial, wraps
from importlib.metadata import version
from typing import Any

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
    serialize_queue_mutations()
    serialize_dynamodb_item_calls()


if __name__ == "__main__":
    try:
        apply()
    except MotoVersionError as exc:
        raise SystemExit(f"error: {exc}") from None
    from moto.server import main

    main()
