"""moto's server with two small fixes for its SQS backend's cost, two for its SQS and DynamoDB backends under
concurrent calls, and one bridge for Powertools' public parameters, for the local tooling only.

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
pollers deleting while the producer sends; accepted, never delivered, not in the DLQ). Fix: every call that changes
a queue's messages (send, receive, delete, change visibility, purge) holds that queue's own lock (moto's
``_messages_lock``, a condition on a re-entrant lock, which a long poll's wait releases), so they run one at a time
per queue. What the API answers is unchanged.

Fixed (moto 5.2.x), the same kind of fault in DynamoDB: a conditional write is a read, a check and a write with no
lock (``Table.put_item``: ``get_item``, the condition, then the assignment), so two concurrent ``PutItem`` calls with
``attribute_not_exists`` on one key can both pass. DynamoDB makes a conditional write atomic, and the idempotency
layer's first step (Powertools' INPROGRESS record) relies on it: the chaos's concurrent duplicates are exactly two
such calls. Fix: the item calls (``PutItem``, ``GetItem``, ``UpdateItem``, ``DeleteItem``,
``TransactWriteItems``) run one at a time.

Run as ``python -m effectively_once.local._moto_server -H 127.0.0.1 -p PORT`` (the arguments of ``moto_server``).
"""

from __future__ import annotations

import base64
import inspect
import io
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from functools import partial, wraps
from importlib.metadata import version
from typing import Any

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


#: The SQS backend calls that change a queue's messages (see the module docstring); their first argument after
#: ``self`` is the queue name. ``Queue.add_message`` and ``Queue.delete_message`` are locked as well: moto calls
#: them from other places too (a message moved to a DLQ, its own event source mappings).
SQS_BACKEND_MUTATIONS = (
    "send_message",
    "receive_message",
    "delete_message",
    "change_message_visibility",
    "purge_queue",
)
SQS_QUEUE_MUTATIONS = ("add_message", "delete_message")


def _holding_queue_lock(method: Callable[..., Any], queue_of: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    first = list(inspect.signature(method).parameters)[1]  # the queue name, or the message

    @wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with queue_of(self, args[0] if args else kwargs[first])._messages_lock:
            return method(self, *args, **kwargs)

    locked.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    return locked


def serialize_queue_mutations() -> None:
    """Make the SQS backend's message-changing calls hold their queue's lock (see the module docstring); a second
    call changes nothing."""
    from moto.sqs import models

    for cls, methods, queue_of in (
        (models.SQSBackend, SQS_BACKEND_MUTATIONS, lambda backend, name: backend.get_queue(name)),
        (models.Queue, SQS_QUEUE_MUTATIONS, lambda queue, _message: queue),
    ):
        for name in methods:
            method = getattr(cls, name)
            if not getattr(method, "__effectively_once_locked__", False):
                setattr(cls, name, _holding_queue_lock(method, queue_of))


#: The DynamoDB backend's item calls (see the module docstring), run one at a time under :data:`DYNAMODB_ITEM_LOCK`.
DYNAMODB_ITEM_CALLS = ("put_item", "get_item", "update_item", "delete_item", "transact_write_items")
DYNAMODB_ITEM_LOCK = threading.RLock()


def _holding(lock: Any, method: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return method(*args, **kwargs)

    locked.__effectively_once_locked__ = True  # type: ignore[attr-defined]
    return locked


def serialize_dynamodb_item_calls() -> None:
    """Make the DynamoDB backend's item calls atomic towards each other (see the module docstring); a second call
    changes nothing."""
    from moto.dynamodb.models import DynamoDBBackend

    for name in DYNAMODB_ITEM_CALLS:
        method = getattr(DynamoDBBackend, name)
        if not getattr(method, "__effectively_once_locked__", False):
            setattr(DynamoDBBackend, name, _holding(DYNAMODB_ITEM_LOCK, method))


def apply() -> None:
    from moto.core.utils import unix_time
    from moto.sqs import models
    from moto.ssm import models as ssm_models

    def attributes(self: Any) -> Mapping[str, Any]:
        return _LazyAttributes(self)

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        queue = self.get_queue(queue_name)
        return int(queue.message_retention_period) + message.sent_timestamp / 1000 > unix_time()

    check_loading_status = ssm_models.ParameterDict._check_loading_status

    def check_loading_status_with_powertools(self: Any, key: str) -> None:
        check_loading_status(self, key)
        if str(key or "").startswith(POWERTOOLS_PARAMETER_ROOT) and not getattr(self, "_powertools_loaded", False):
            self._powertools_loaded = True
            _load_powertools_parameters(self)

    ssm_models.ParameterDict._check_loading_status = check_loading_status_with_powertools  # type: ignore[method-assign]
    models.Queue.attributes = property(attributes)  # type: ignore[assignment,method-assign]
    models.SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]
    serialize_queue_mutations()
    serialize_dynamodb_item_calls()


if __name__ == "__main__":
    apply()
    from moto.server import main

    main()
