"""Faults from outside the code under test, at the SDK boundary: every write the local AWS accepted from an execution
environment is seen, numbered and logged, and may be followed by a kill or a stall, whether or not the app declared
it as an effect (the way Jepsen injects faults: by the platform, never by the code under test).

:class:`WriteWatch` registers a botocore ``after-call`` hook on every boto3 session the process creates from then on
(the default session, and the ones Powertools and the runtime build), like ``runner.request_counter.RequestCounter``. It
watches the writes in :data:`WRITE_OPERATIONS`: DynamoDB ``PutItem``, ``UpdateItem``, ``DeleteItem``, ``BatchWriteItem``
and ``TransactWriteItems``; S3 ``PutObject`` and ``CompleteMultipartUpload``; SQS ``SendMessage(Batch)``; SNS
``Publish(Batch)``. A write is *accepted* when the service answered it with a 2xx status.

Each accepted write gets a role (:func:`role`):

- ``idempotency_record``: Powertools' own record writes (the in-progress put, the completion, the delete after a
  failure) on the idempotency table (``IDEMPOTENCY_TABLE_NAME``), told apart by their id, ``<key prefix>#<hash>``.
  Logged, never a kill point: a kill after the record's completion is "after completion".
- ``effect_result``: the runtime's marker of a declared effect's result on the same table (``<key prefix>#
  effect-result#...``, ``effectively_once_runtime.effect_results``), the runtime's bookkeeping as the record is.
  Logged, never a kill point: the effect's own write before it is one.
- ``dead_letter``: the runtime's send of a record to its DLQ (``DEAD_LETTER_QUEUE_URL``), or of an event's record to
  its on-failure queue (``ON_FAILURE_QUEUE_URL``). A kill point.
- ``effect``: any other write, declared or not. A kill point.

Every accepted write and every kill goes into the environment's chaos log (``chaos-<label>-<pid>.jsonl``) with one
counter, ``seq``, numbered per process in the order they happened, flushed per line: "a kill between a key's effect
and its completion" is read from that order (an effect write, then the kill, and no completion write of that
record between them), never from wall-clock times. The writes of the runner itself (receive, delete) are not in
the list. SQL commits and HTTP calls are outside boto. SQL commits are watched by wrapping the drivers
(``chaos/sql_watch.py``, ``SqlCommitWatch``): every commit of a ``sqlite3`` or psycopg 3 connection, ``commit()``,
``with conn:``, ``with conn.transaction():`` and statements in autocommit mode (``sql.commit``, role ``effect``, a
kill point). The HTTP provider stand-in logs its own calls (``aws/provider_stand_in.py``).

Each write also names what it wrote, ``items``: ``[store, identity]`` pairs in the form the effect stores read them
back (``proof/stores.py``), so that an item found in a store is tied to the execution that wrote it, and "duplicated"
means more than one execution's writes for a key, never one execution writing two items. DynamoDB items are
identified by their key attributes, which the run names per table in ``EFFECTIVELY_ONCE_WATCH_KEYS``
(``{"<table name>": ["<attribute>", ...]}``: the tables it counts effects in); S3 objects by bucket and key; SQS
messages by queue URL and the message id the service answered.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from effectively_once_runtime import names

from .write_services import SDK_SERVICES

#: The writes watched, by botocore service name: the accepted ones are numbered, logged and may be kill points
#: (``chaos/write_services.py``: one class per service).
WRITE_OPERATIONS: dict[str, frozenset[str]] = {name: s.operations for name, s in SDK_SERVICES.items()}
EFFECT = "effect"
DEAD_LETTER = "dead_letter"
IDEMPOTENCY_RECORD = "idempotency_record"
EFFECT_RESULT = "effect_result"
#: What every effect result marker's id holds after the key prefix: the runtime before issue 55, item 8 wrote one
#: item per effect result (``effect_results.RESULT_INFIX`` then); a stack on such a runtime still writes them.
_RESULT_INFIX = "#effect-result#"
#: The roles a kill may follow.
KILL_POINT_ROLES = (EFFECT, DEAD_LETTER)
#: A Powertools record id: ``<key prefix>#<hex digest>`` (md5 by default: 32 hex characters; longer digests too).
_RECORD_ID = re.compile(r".+#([0-9a-f]{32,128})")


def _record_id(params: dict[str, Any]) -> str | None:
    for field in ("Item", "Key"):
        value = (params.get(field) or {}).get("id")
        if isinstance(value, dict) and isinstance(value.get("S"), str):
            return str(value["S"])
    return None


def role(service: str, operation: str, params: dict[str, Any], env: Mapping[str, str] | None = None) -> str:
    """The role of an accepted write (module docstring). ``env``: the function's environment.

    :default: ``os.environ`` (the execution environment's).
    """
    environment: Mapping[str, str] = os.environ if env is None else env
    table = environment.get(names.ENV_TABLE_NAME)
    if service == "dynamodb" and table and params.get("TableName") == table:
        record = _record_id(params)
        if record is not None and _RESULT_INFIX in record:
            return EFFECT_RESULT
        if record is not None and _RECORD_ID.fullmatch(record):
            return IDEMPOTENCY_RECORD
    refusals = {environment.get(names.ENV_DEAD_LETTER_QUEUE_URL), environment.get(names.ENV_ON_FAILURE_QUEUE_URL)}
    if service == "sqs" and params.get("QueueUrl") in refusals - {None, ""}:
        return DEAD_LETTER
    return EFFECT


def target(service: str, params: dict[str, Any]) -> str | None:
    """What a write wrote to: a table, a bucket (and key), a queue URL, a topic ARN (its service's ``target``)."""
    found = SDK_SERVICES.get(service)
    return found.target(params) if found is not None else None


def record_hash_candidates(key: str) -> set[str]:
    """The digests a Powertools record id of business key ``key`` may end in: md5 of the key as JSON (Powertools
    hashes the JMESPath result with ``json.dumps(..., sort_keys=True)``) and of the bare text."""
    return {hashlib.md5(text.encode()).hexdigest() for text in (json.dumps(key, sort_keys=True), key)}  # noqa: S324


def record_hash(record_id: str | None) -> str | None:
    """The digest at the end of a Powertools record id, ``None`` for anything else."""
    match = _RECORD_ID.fullmatch(record_id or "")
    return match.group(1) if match else None


_PARAMS = "effectively_once_local.params"
#: The request context's entry holding the parameters a call sent after an SDK fault took part of them out
#: (``chaos/sdk_faults.py``): the items written are named from it, not from the app's own parameters.
SENT_PARAMS = "effectively_once_local.sent_params"
#: The request context's entry set when an SDK fault answered the call without sending it (every request or entry
#: held back, ``chaos/sdk_faults.py``): nothing was written, so no write is logged.
NOTHING_SENT = "effectively_once_local.nothing_sent"
#: The execution environment's variable naming each effect table's key attributes (module docstring).
ENV_WATCH_KEYS = "EFFECTIVELY_ONCE_WATCH_KEYS"


def written_items(service: str, params: dict[str, Any], parsed: Any, watch: Mapping[str, list[str]]) -> list[list[str]]:
    """``[store, identity]`` of everything an accepted write wrote (module docstring; its service's
    ``written_items``); ``watch``: table -> key attributes."""
    found = SDK_SERVICES.get(service)
    return found.written_items(params, parsed, watch) if found is not None else []


def _watch_keys() -> dict[str, list[str]]:
    try:
        found = json.loads(os.environ.get(ENV_WATCH_KEYS) or "{}")
    except ValueError:
        return {}
    return {str(t): [str(a) for a in attrs] for t, attrs in found.items()} if isinstance(found, dict) else {}


def _keep_params(params: Any = None, context: Any = None, **_: Any) -> None:
    if isinstance(context, dict):
        context[_PARAMS] = params


class WriteWatch:
    """Sees every accepted write of this process (module docstring) and hands it to ``on_write(write)``, where
    ``write`` is the logged record: ``op`` (``service.Operation``), ``target``, ``role``, ``record_id`` (Powertools'
    record writes), ``items`` (what it wrote, :func:`written_items`). ``on_write`` logs it (with the one counter)
    and may kill or stall the process there."""

    def __init__(self, on_write: Callable[[dict[str, Any]], None]) -> None:
        self._on_write = on_write
        self._watch = _watch_keys()

    def install(self) -> None:
        """Register the hook on every boto3 session created from now on."""
        import boto3.session

        original = boto3.session.Session.__init__
        hook = self._after_call

        def init(session: Any, *args: Any, **kwargs: Any) -> None:
            original(session, *args, **kwargs)
            # after-call carries no request parameters: keep them in the request context, which both events share.
            session.events.register("before-parameter-build", _keep_params)
            session.events.register("after-call", hook)

        boto3.session.Session.__init__ = init

    def _after_call(
        self, event_name: str, http_response: Any = None, parsed: Any = None, context: Any = None, **_: Any
    ) -> None:
        # event_name: after-call.<service>.<Operation>
        service, operation = (event_name.split(".") + ["", ""])[1:3]
        if operation not in WRITE_OPERATIONS.get(service, ()):
            return
        status = getattr(http_response, "status_code", None)
        if status is None or not 200 <= int(status) < 300:
            return
        if isinstance(context, dict) and context.get(NOTHING_SENT):
            return
        kept = (context.get(SENT_PARAMS) or context.get(_PARAMS)) if isinstance(context, dict) else None
        params: dict[str, Any] = kept if isinstance(kept, dict) else {}
        self._on_write(
            {
                "op": f"{service}.{operation}",
                "target": target(service, params),
                "role": role(service, operation, params),
                "record_id": _record_id(params) if service == "dynamodb" else None,
                "items": written_items(service, params, parsed, self._watch),
            }
        )
