"""The services an effect store is written through, one class each: the write side of a store kind, what an
execution environment knows of it (``chaos/faults.py``'s write watch, ``chaos/sdk_faults.py``'s throttling,
``chaos/sql_watch.py``), apart from the read side, which needs the local AWS (``proof/store_kinds.py``, whose kinds
name their services here).

Each class says which of its calls are writes (``operations``: botocore's operation names; watched, numbered, logged,
kill points), what a write wrote to (``target``) and what it wrote (``written_items``: ``[store, identity]`` pairs in
the form the store is read back), the report's name for a kill after one of its writes (``write_kind``:
``total.kills_after_write``) and the throttling error a write of it answers after the SDK's retries gave up
(``throttling``: code and HTTP status, the codes botocore models; ``None`` only for writes outside the SDK). A class
that leaves one of them out fails at import (:meth:`WriteService.__init_subclass__`), never mid-run.

A service whose batch calls answer per entry (SQS's ``SendMessageBatch``, ``DeleteMessageBatch`` and
``ChangeMessageVisibilityBatch``, SNS's ``PublishBatch``: HTTP 200 with ``Successful`` and ``Failed`` entries) names
them in ``batch_answers`` (operation -> the request's member holding the entries; writes or not) with the code a
failed entry carries when the service failed it (``entry_error``: ``chaos/sdk_faults.py``'s per-entry failures).

Model: Powertools' ``BasePersistenceLayer`` (one base, one class per store; the rest never asks which it has).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["SDK_SERVICES", "WRITE_SERVICES", "WriteService", "item_identity"]

#: What every concrete service class must set (module docstring).
_REQUIRED = ("name", "operations", "write_kind", "throttling")


def item_identity(item: Mapping[str, Any], attributes: list[str]) -> str:
    """A DynamoDB item's identity as the table store reads it back: its key attributes, typed, as JSON."""
    return json.dumps([item.get(a) for a in attributes], sort_keys=True)


class WriteService(ABC):
    """One service whose writes the execution environment watches (module docstring).

    :cvar name: botocore's service name (``"dynamodb"``), or ``"sql"`` for the SQL drivers' commits.
    :cvar operations: the write operations, as botocore names them (``after-call.<service>.<Operation>``).
    :cvar write_kind: the report's key for a kill after one of its writes (``total.kills_after_write``).
    :cvar throttling: (error code, HTTP status) of its throttling error; ``None``: not an SDK call.
    :cvar through_sdk: whether its writes are botocore calls (the write watch and the SDK faults' hooks see them).
    :cvar batch_answers: its batch operations answered per entry -> the request member holding the entries
        (module docstring). :default: none.
    :cvar entry_error: the ``Code`` of an entry the service failed (``SenderFault: false``); needed with
        ``batch_answers``.
    """

    name: ClassVar[str]
    operations: ClassVar[frozenset[str]]
    write_kind: ClassVar[str]
    throttling: ClassVar[tuple[str, int] | None]
    through_sdk: ClassVar[bool] = True
    batch_answers: ClassVar[Mapping[str, str]] = {}
    entry_error: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [attr for attr in _REQUIRED if not hasattr(cls, attr)]
        if missing:
            raise TypeError(f"write service {cls.__name__} sets no {', '.join(missing)} (chaos/write_services.py)")
        if cls.through_sdk and cls.throttling is None:
            raise TypeError(f"write service {cls.__name__}: an SDK service needs its throttling error (code, status)")
        if cls.batch_answers and cls.entry_error is None:
            raise TypeError(f"write service {cls.__name__}: batch answers per entry need the code of a failed entry")

    @abstractmethod
    def target(self, params: Mapping[str, Any]) -> str | None:
        """What a write wrote to (a table, a bucket and key, a queue URL, a topic ARN), from its parameters."""

    def written_items(self, params: Mapping[str, Any], parsed: Any, watch: Mapping[str, list[str]]) -> list[list[str]]:
        """``[store, identity]`` of everything an accepted write wrote (``parsed``: its answer; ``watch``: table ->
        key attributes, the tables whose items are named). :default: none (a store read back by other means)."""
        return []


class DynamoDbWrites(WriteService):
    name = "dynamodb"
    operations = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
    write_kind = "dynamodb_write"
    throttling = ("ProvisionedThroughputExceededException", 400)

    def target(self, params: Mapping[str, Any]) -> str | None:
        if "TableName" in params:
            return str(params["TableName"])
        tables = params.get("RequestItems") or {}
        if tables:
            return ",".join(sorted(tables))
        items = params.get("TransactItems") or []
        found = {next(iter(i.values())).get("TableName") for i in items if i}
        return ",".join(sorted(t for t in found if t)) or None

    def written_items(self, params: Mapping[str, Any], parsed: Any, watch: Mapping[str, list[str]]) -> list[list[str]]:
        """Each item or key the write touched on a watched table, identified by the table's key attributes."""
        found: list[tuple[str, Any]] = []
        if "TableName" in params:
            found.append((str(params["TableName"]), params.get("Item") or params.get("Key") or {}))
        for table, requests in (params.get("RequestItems") or {}).items():
            for request in requests:
                put, delete = request.get("PutRequest") or {}, request.get("DeleteRequest") or {}
                found.append((table, put.get("Item") or delete.get("Key") or {}))
        for entry in params.get("TransactItems") or []:
            for action in ("Put", "Update", "Delete"):
                if action in entry:
                    part = entry[action]
                    found.append((str(part.get("TableName")), part.get("Item") or part.get("Key") or {}))
        return [[t, item_identity(i, watch[t])] for t, i in found if t in watch]


class S3Writes(WriteService):
    name = "s3"
    operations = frozenset({"PutObject", "CompleteMultipartUpload"})
    write_kind = "s3_put"
    throttling = ("SlowDown", 503)

    def target(self, params: Mapping[str, Any]) -> str | None:
        return f"{params.get('Bucket')}/{params.get('Key')}"

    def written_items(self, params: Mapping[str, Any], parsed: Any, watch: Mapping[str, list[str]]) -> list[list[str]]:
        if params.get("Bucket") and params.get("Key"):
            return [[str(params["Bucket"]), str(params["Key"])]]
        return []


class SqsWrites(WriteService):
    name = "sqs"
    operations = frozenset({"SendMessage", "SendMessageBatch"})
    write_kind = "send"
    throttling = ("RequestThrottled", 400)
    batch_answers = {
        "SendMessageBatch": "Entries",
        "DeleteMessageBatch": "Entries",
        "ChangeMessageVisibilityBatch": "Entries",
    }
    # SQS names no codes for a failed entry (Amazon SQS API Reference, "BatchResultErrorEntry"); a public report shows
    # a SendMessageBatch entry failed with this one, SenderFault false (aws/aws-sdk-java#2562).
    entry_error = "InternalError"

    def target(self, params: Mapping[str, Any]) -> str | None:
        return str(params.get("QueueUrl"))

    def written_items(self, params: Mapping[str, Any], parsed: Any, watch: Mapping[str, list[str]]) -> list[list[str]]:
        """The queue URL and each message id the service answered (a batch's ``Successful`` entries)."""
        if not isinstance(parsed, dict):
            return []
        url = str(params.get("QueueUrl"))
        ids = [parsed.get("MessageId")] + [e.get("MessageId") for e in parsed.get("Successful") or []]
        return [[url, str(i)] for i in ids if i]


class SnsWrites(WriteService):
    """A publish: its messages reach a queue store through the topic's subscription (read back as that queue)."""

    name = "sns"
    operations = frozenset({"Publish", "PublishBatch"})
    write_kind = "send"
    throttling = ("Throttled", 429)
    batch_answers = {"PublishBatch": "PublishBatchRequestEntries"}
    # PublishBatch's InternalErrorException: "Indicates an internal service error" (Amazon SNS API Reference,
    # "PublishBatch": Errors).
    entry_error = "InternalError"

    def target(self, params: Mapping[str, Any]) -> str | None:
        return str(params.get("TopicArn") or params.get("TargetArn") or params.get("PhoneNumber"))


class SqlCommits(WriteService):
    """A commit of a SQL driver's connection (``chaos/sql_watch.py``): outside the SDK, no throttling; its target is
    the connection's class (``sqlite3.Connection``), its rows are identified by their values when read back."""

    name = "sql"
    operations = frozenset({"commit"})
    write_kind = "sql_commit"
    throttling = None
    through_sdk = False

    def target(self, params: Mapping[str, Any]) -> str | None:
        """The committing connection's class, ``<module>.<class>`` (``params``: ``{"connection": <connection>}``)."""
        kind = type(params.get("connection"))
        return f"{kind.__module__}.{kind.__name__}"


#: Every write service by name, in the report's order (``run.writes_watched``, ``total.kills_after_write``).
WRITE_SERVICES: dict[str, WriteService] = {
    service.name: service for service in (DynamoDbWrites(), S3Writes(), SqsWrites(), SnsWrites(), SqlCommits())
}
#: The services whose writes are botocore calls.
SDK_SERVICES: dict[str, WriteService] = {name: s for name, s in WRITE_SERVICES.items() if s.through_sdk}
