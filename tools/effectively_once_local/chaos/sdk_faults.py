"""SDK faults from outside the app (issue 43, item 5): the answers AWS gives under load, injected by a botocore hook on
every boto3 session of the execution environment, beside the write watch (``chaos/faults.py``). The handler never
knows: it sees what its SDK call returned.

- **Partial batch writes** (:data:`UNPROCESSED`, ``ChaosConfig.partial_batch_write``): a fraction of DynamoDB
  ``BatchWriteItem`` calls answer with some of their requests, or all of them, in ``UnprocessedItems``, as DynamoDB
  does when a table is over its capacity or fails internally ("BatchWriteItem", Amazon DynamoDB API Reference: "If
  any requested operations fail because the table's provisioned throughput is exceeded or an internal processing
  failure occurs, the failed operations are returned in the UnprocessedItems response parameter": any of them, a
  batch of one request included; the caller must send them again). On ``before-call`` the hook takes a random part of
  the requests (at least one; all of them may go) out of the serialized request, a copy, never the app's own dict, so
  the local AWS never writes them; on ``before-parse`` of the same call's successful answer, still in the wire form,
  it adds them to the answer's ``UnprocessedItems``, so that boto3's resource layer (``Table.batch_writer``) reads
  them as it reads DynamoDB's. A call whose every request is held back is not sent: it is answered at once with all
  of them unprocessed. An app that drops them loses those items; one that writes them again loses nothing.

- **Per-entry failures in batch answers** (:data:`FAILED_ENTRIES`, ``ChaosConfig.batch_entry_failure``): each entry
  of the handler's SQS ``SendMessageBatch``, ``DeleteMessageBatch`` and ``ChangeMessageVisibilityBatch`` and SNS
  ``PublishBatch`` calls fails with that odds: the entry is not performed (taken out of the serialized request on
  ``before-call``, ``chaos/batch_entries.py``) and is listed in the answer's ``Failed`` (added on ``before-parse``)
  as the service lists one it failed, ``SenderFault`` false and its code (``write_services.WriteService.
  entry_error``); HTTP 200, so the SDK does not retry it. A call whose every entry failed is answered at once, nothing
  sent. An app that ignores ``Failed`` loses those messages (or leaves the records it meant to delete); one that
  sends the failed entries again loses nothing. Every such call the handler makes while the fraction is above 0 is
  handed to ``on_call`` (the chaos log's ``batch_call``), so a run can tell a fault that had no call to strike from
  one that was not drawn.

- **Throttling** (:data:`THROTTLED`, ``ChaosConfig.throttle``): a fraction of the writes the runner watches
  (``faults.WRITE_OPERATIONS``) fail with the service's throttling error, as the app sees it after the SDK's own
  retries gave up: DynamoDB's ``ProvisionedThroughputExceededException``, S3's ``SlowDown``, SQS's
  ``RequestThrottled`` and SNS's ``Throttled`` (the codes botocore models). Injected once per call, on
  ``before-call``, by answering the call with that error (nothing is sent, and
  ``ResponseMetadata.MaxAttemptsReached`` is set): injected per HTTP attempt instead, the SDK's own retries would
  hide it. A DynamoDB call whose tables cannot be read from its body is never throttled. An app that swallows
  the error loses the write; one that lets it fail the record gets a redelivery.

Never on the idempotency table (``IDEMPOTENCY_TABLE_NAME``): its requests are never taken, and a call that touches it
is never throttled. Never on the runner's own calls (receive, delete, an on-failure record): only while the handler
runs (``running``). Every fault is handed to
``on_fault`` (the environment's chaos log, ``InvocationChaos.on_sdk_fault``) with ``kind``, ``op``, ``target`` and
the write requests it held back (``requests``: ``{table: [request, ...]}`` in DynamoDB's wire form) or the entries it
failed (``entries``: each ``Id`` and message ``body``), so a key lost to it shows what hit it
(``proof/sdk_faults_seen.py``). The write watch logs what the call wrote: only the requests that were sent (the
request context's :data:`SENT_PARAMS`), and nothing for a call answered without being sent (:data:`NOTHING_SENT`).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from botocore.awsrequest import AWSResponse

from effectively_once_runtime import names

from . import batch_entries
from .batch_entries import ENTRY_ERRORS, ENTRY_OPERATIONS
from .fault_model import ChaosConfig
from .faults import NOTHING_SENT, SENT_PARAMS, WRITE_OPERATIONS
from .write_services import SDK_SERVICES

#: The fault kinds, as the chaos log's ``kind`` names them.
UNPROCESSED = "unprocessed_items"
THROTTLED = "throttled"
FAILED_ENTRIES = "failed_entries"
SDK_FAULT_KINDS: tuple[str, ...] = (UNPROCESSED, THROTTLED, FAILED_ENTRIES)
_HOOK = "effectively_once_local.sdk_faults"
#: Each watched service's throttling error after the SDK's retries: (code, HTTP status), its class's ``throttling``
#: (``chaos/write_services.py``: a service without one fails at import).
THROTTLING_ERRORS: dict[str, tuple[str, int]] = {
    name: service.throttling for name, service in SDK_SERVICES.items() if service.throttling is not None
}


def dynamodb_requests(operation: str, body: dict[str, Any]) -> dict[str, list[Any]]:
    """A DynamoDB write's items as write requests by table (``{table: [{"PutRequest": {"Item"}} | {"DeleteRequest":
    {"Key"}}]}``, the wire form), whatever the operation: what a fault's log line names its keys by."""
    if operation == "BatchWriteItem":
        return dict(body.get("RequestItems") or {})
    parts = [(operation.removesuffix("Item"), body)] if "TableName" in body else []
    for entry in body.get("TransactItems") or []:
        parts += [(action, entry[action]) for action in ("Put", "Update", "Delete") if action in entry]
    found: dict[str, list[Any]] = {}
    for action, part in parts:
        request = {"PutRequest": {"Item": part["Item"]}} if action == "Put" and "Item" in part else None
        request = request or {"DeleteRequest": {"Key": part.get("Key") or {}}}
        found.setdefault(str(part.get("TableName")), []).append(request)
    return found


def _split(
    requests: dict[str, list[Any]], rng: random.Random, protected: Callable[[str], bool]
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """The requests to send and the ones held back: a random part of those on no table ``protected`` names (at least
    one held back; all of them may be, a request of a batch of one included), each table's order kept. ``({}, {})``
    when none can be held back."""
    places = [(table, i) for table, items in requests.items() if not protected(table) for i in range(len(items))]
    if not places:
        return {}, {}
    count = rng.randint(1, len(places))
    held = set(rng.sample(places, count))
    sent: dict[str, list[Any]] = {}
    back: dict[str, list[Any]] = {}
    for table, items in requests.items():
        for i, request in enumerate(items):
            (back if (table, i) in held else sent).setdefault(table, []).append(request)
    return sent, back


class SdkFaults:
    """The SDK fault hook of one execution environment (module docstring). ``config``: the run's fractions;
    ``on_fault``: called with each fault's record before the call returns to the app; ``running``: whether the
    handler runs now; ``on_call``: called with each batch call answered per entry the handler makes while
    ``batch_entry_failure`` is above 0 (``op``, ``target``, ``entries``), a throttled one left out (answered whole
    with the throttling error, no entry could fail)."""

    def __init__(
        self,
        config: ChaosConfig,
        on_fault: Callable[[dict[str, Any]], None],
        env: Mapping[str, str] | None = None,
        running: Callable[[], bool] = lambda: True,
        on_call: Callable[[dict[str, Any]], None] = lambda _: None,
    ) -> None:
        self.config = config
        self._on_fault = on_fault
        self._on_call = on_call
        #: Whether the handler runs now (an invocation between its begin and end): the runner's own calls, made
        #: outside, never get a fault. :default: always.
        self._running = running
        environment = os.environ if env is None else env
        self._protected = environment.get(names.ENV_TABLE_NAME) or None
        self._rng = random.Random(f"{config.seed}-sdk-{os.getpid()}-{time.time_ns()}")
        # What the call in flight on this thread adds to its successful answer (before-parse), until it is parsed.
        self._pending = threading.local()

    @property
    def enabled(self) -> bool:
        config = self.config
        return config.partial_batch_write > 0 or config.throttle > 0 or config.batch_entry_failure > 0

    def install(self) -> None:
        """Register the hooks on every boto3 session created from now on (nothing when no fraction is above 0)."""
        if not self.enabled:
            return
        import boto3.session

        original = boto3.session.Session.__init__
        before_call, before_parse = self.before_call, self.before_parse

        def init(session: Any, *args: Any, **kwargs: Any) -> None:
            original(session, *args, **kwargs)
            # unique ids: sessions sharing one event system register each hook once (twice, a second split would
            # drop the first one's held-back requests)
            session.events.register("before-call", before_call, unique_id=f"{_HOOK}.before_call")
            session.events.register("before-parse", before_parse, unique_id=f"{_HOOK}.before_parse")

        boto3.session.Session.__init__ = init

    def before_call(self, event_name: str = "", params: Any = None, context: Any = None, **_: Any) -> Any:
        """A call about to be sent (``before-call.<service>.<Operation>``): a watched write may be throttled (the
        error answered, nothing sent); a ``BatchWriteItem`` not throttled may have part of its requests held back,
        and a batch call answered per entry some of its entries failed. Returns the answer of a call not sent (a
        throttle, or every request or entry held back), ``None`` otherwise."""
        self._pending.amend = None
        service, operation = (event_name.split(".") + ["", ""])[1:3]
        if not isinstance(params, dict) or not self._running():
            return None
        batch = None
        if operation in ENTRY_OPERATIONS.get(service, {}) and self.config.batch_entry_failure > 0:
            batch = batch_entries.read_batch(service, operation, params)
        write = operation in WRITE_OPERATIONS.get(service, ())
        if not write and batch is None:
            return None
        if write and self.config.throttle > 0 and self._rng.random() < self.config.throttle:
            throttled = self._throttle(service, operation, params)
            if throttled is not None:
                return throttled
        if batch is not None:  # a throttled call was answered whole, not per entry: no batch_call
            self._on_call({"op": f"{service}.{operation}", "target": batch.target, "entries": len(batch.entries)})
        if service == "dynamodb" and operation == "BatchWriteItem":
            return self._partial(params, context)
        return self._fail_entries(batch, operation, params, context) if batch is not None else None

    def _body(self, service: str, params: dict[str, Any]) -> dict[str, Any]:
        """A DynamoDB call's serialized body; ``{}`` for another service's or one that is not JSON."""
        if service != "dynamodb":
            return {}
        try:
            body = json.loads(params.get("body") or b"{}")
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def _is_protected(self, table: str) -> bool:
        """Whether ``table`` (a name or an ARN) is the idempotency table."""
        return self._protected is not None and (table == self._protected or table.endswith(f":table/{self._protected}"))

    def _throttle(self, service: str, operation: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
        """The throttling answer of the call (module docstring), logged; ``None`` for a call on the idempotency
        table."""
        requests = dynamodb_requests(operation, self._body(service, params)) if service == "dynamodb" else {}
        if service == "dynamodb" and (not requests or any(self._is_protected(table) for table in requests)):
            return None  # fails closed: a call whose tables are unknown may be on the idempotency table
        code, status = THROTTLING_ERRORS[service]
        self._on_fault(
            {"kind": THROTTLED, "op": f"{service}.{operation}", "target": ",".join(sorted(requests)) or service}
            | {"error": code, "requests": requests}
        )
        message = "Rate of requests exceeds the allowed throughput (injected by the chaos run, after the SDK's retries)"
        parsed = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "MaxAttemptsReached": True},
        }
        return AWSResponse(str(params.get("url") or ""), status, {}, None), parsed

    def _partial(self, params: dict[str, Any], context: Any) -> tuple[Any, dict[str, Any]] | None:
        """With odds ``partial_batch_write``, hold back part of a ``BatchWriteItem``'s requests, or all of them (then
        answered at once, nothing sent: returned)."""
        if self._rng.random() >= self.config.partial_batch_write:
            return None
        body = self._body("dynamodb", params)
        sent, held = _split(body.get("RequestItems") or {}, self._rng, self._is_protected)
        if not held:
            return None
        self._on_fault(
            {
                "kind": UNPROCESSED,
                "op": "dynamodb.BatchWriteItem",
                "target": ",".join(sorted(held)),
                "requests": held,
                "held_back": sum(len(v) for v in held.values()),
                "sent": sum(len(v) for v in sent.values()),
            }
        )
        if not sent:
            return _answered(params, context, {"UnprocessedItems": held})
        body["RequestItems"] = sent
        params["body"] = json.dumps(body).encode("utf-8")
        if isinstance(context, dict):
            context[SENT_PARAMS] = {"RequestItems": sent}
        self._pending.amend = lambda response: _add_unprocessed(response, held)
        return None

    def _fail_entries(
        self, batch: batch_entries.EntryBatch, operation: str, params: dict[str, Any], context: Any
    ) -> tuple[Any, dict[str, Any]] | None:
        """Each entry of a batch call answered per entry fails with odds ``batch_entry_failure``: those are taken
        out of the request and listed in the answer's ``Failed``; a call whose every entry failed is answered at once,
        nothing sent (returned)."""
        held = {i for i in range(len(batch.entries)) if self._rng.random() < self.config.batch_entry_failure}
        if not held:
            return None
        failed = batch_entries.failed_entries(batch.service, [batch.entries[i]["Id"] for i in sorted(held)])
        self._on_fault(
            {
                "kind": FAILED_ENTRIES,
                "op": f"{batch.service}.{operation}",
                "target": batch.target,
                "error": ENTRY_ERRORS[batch.service],
                "entries": [batch.entries[i] for i in sorted(held)],
                "failed": len(held),
                "sent": len(batch.entries) - len(held),
            }
        )
        if len(held) == len(batch.entries):
            return _answered(params, context, {"Successful": [], "Failed": failed})
        batch_entries.drop_entries(batch, held, params)
        self._pending.amend = lambda response: batch_entries.add_failed(response, failed)
        return None

    def before_parse(self, response_dict: Any = None, **_: Any) -> None:
        """The call's answer, before boto3 parses it: a successful one gains what the call's fault took out, in the
        wire form (the held-back requests in ``UnprocessedItems``, the failed entries in ``Failed``); an error is
        retried by the SDK with the same request: the next answer gets them."""
        amend = getattr(self._pending, "amend", None)
        if amend is None or not isinstance(response_dict, dict) or not 200 <= int(response_dict["status_code"]) < 300:
            return
        self._pending.amend = None
        amend(response_dict)


def _answered(params: dict[str, Any], context: Any, answer: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The successful answer of a call not sent (every request or entry held back): ``answer`` with HTTP 200; the
    request context says nothing was sent, so the write watch logs no write (:data:`faults.NOTHING_SENT`)."""
    if isinstance(context, dict):
        context[NOTHING_SENT] = True
    parsed = {**answer, "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}}}
    return AWSResponse(str(params.get("url") or ""), 200, {}, None), parsed


def _add_unprocessed(response_dict: dict[str, Any], held: dict[str, list[Any]]) -> None:
    """Add the held-back requests to a successful ``BatchWriteItem`` answer's ``UnprocessedItems`` (wire form)."""
    try:
        body = json.loads(response_dict.get("body") or b"{}")
    except ValueError:
        return
    unprocessed = body.get("UnprocessedItems") or {}
    for table, requests in held.items():
        unprocessed.setdefault(table, []).extend(requests)
    body["UnprocessedItems"] = unprocessed
    response_dict["body"] = json.dumps(body).encode("utf-8")
