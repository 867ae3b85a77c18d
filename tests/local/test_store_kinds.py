"""Issue 56, item 2: one class per store kind (``proof/store_kinds.py``), per write service (``chaos/
write_services.py``) and per asynchronous source kind (``traffic/source_kinds.py``). Every list the tooling keeps of
them is built from the classes, and a class that leaves a piece out fails at import, never as a ``KeyError`` mid-run
(the throttling table once missed a service: the first throttled call under ``--throttle`` failed that way)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from effectively_once_local.aws.async_inbox import SOURCES
from effectively_once_local.aws.async_sources import SOURCE_FINDERS
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.chaos.faults import WRITE_OPERATIONS
from effectively_once_local.chaos.sdk_faults import THROTTLED, THROTTLING_ERRORS, SdkFaults
from effectively_once_local.chaos.sql_watch import SQL_COMMIT
from effectively_once_local.chaos.write_services import SDK_SERVICES, WRITE_SERVICES, WriteService
from effectively_once_local.cli.main import _parser
from effectively_once_local.proof import key_check, stores
from effectively_once_local.proof.store_kinds import STORE_KINDS, EffectStore, StoreKind, kind_of
from effectively_once_local.proof.torn_moments import StoreRef, _stores_of
from effectively_once_local.runner.async_poller import async_event_key
from effectively_once_local.traffic.source_kinds import SOURCE_KINDS, SOURCE_SENDERS, AsyncSourceKind, sent_line
from effectively_once_runtime import dispatch, events


def test_every_list_of_store_kinds_is_built_from_the_classes() -> None:
    assert stores.KINDS == tuple(STORE_KINDS) == ("table", "bucket", "queue", "provider", "sqlite", "postgres")
    help_text = " ".join(next(a.help for a in _chaos_actions() if a.dest == "effect").split())
    assert all(kind.syntax in help_text for kind in STORE_KINDS.values()), help_text
    assert {name: kind.services for name, kind in STORE_KINDS.items()} == {
        "table": ("dynamodb",),
        "bucket": ("s3",),
        "queue": ("sqs", "sns"),
        "provider": (),
        "sqlite": ("sql",),
        "postgres": ("sql",),
    }
    assert [k.name for k in STORE_KINDS.values() if not k.watched] == ["provider"], "HTTP calls are no watched writes"
    assert [k.name for k in STORE_KINDS.values() if k.stand_in] == ["provider"]


def _chaos_actions() -> list[Any]:
    return list(_parser()[1]["chaos"]._actions)


def test_every_list_of_write_services_is_built_from_the_classes() -> None:
    assert tuple(WRITE_OPERATIONS) == tuple(SDK_SERVICES) == ("dynamodb", "s3", "sqs", "sns")
    assert THROTTLING_ERRORS == {
        "dynamodb": ("ProvisionedThroughputExceededException", 400),
        "s3": ("SlowDown", 503),
        "sqs": ("RequestThrottled", 400),
        "sns": ("Throttled", 429),
    }
    assert key_check.WRITE_KINDS == {
        "dynamodb": "dynamodb_write",
        "s3": "s3_put",
        "sqs": "send",
        "sns": "send",
        "sql": "sql_commit",
    }
    assert list(key_check.kills_after_write([])) == ["dynamodb_write", "s3_put", "send", "sql_commit"]
    assert SQL_COMMIT == "sql.commit" and "sql" in WRITE_SERVICES and "sql" not in SDK_SERVICES


@pytest.mark.parametrize("service", list(SDK_SERVICES))
def test_every_watched_service_is_throttled_with_its_own_error(service: str) -> None:
    """What failed with a ``KeyError`` mid-run when the throttling table missed a service."""
    faults: list[dict[str, Any]] = []
    hook = SdkFaults(ChaosConfig(throttle=1.0), faults.append, env={})
    operation = next(op for op in sorted(SDK_SERVICES[service].operations) if "Batch" not in op)
    params = {"body": json.dumps({"TableName": "orders"}).encode(), "url": "http://127.0.0.1"}

    answer = hook.before_call(f"before-call.{service}.{operation}", params=params, context={})

    code, status = SDK_SERVICES[service].throttling or ("", 0)
    assert answer is not None and answer[1]["Error"]["Code"] == code and answer[0].status_code == status
    assert [(f["kind"], f["error"]) for f in faults] == [(THROTTLED, code)]


def test_a_kind_that_leaves_a_piece_out_fails_at_import() -> None:
    with pytest.raises(TypeError, match="sets no resource_type"):

        class NoType(StoreKind):  # noqa: F841 - defined for the error
            name, syntax, services = "stream", "stream:NAME:JMESPATH", ("kinesis",)

    with pytest.raises(TypeError, match="no write service"):

        class UnknownService(StoreKind):  # noqa: F841
            name, syntax, services, resource_type = "stream", "stream:N:J", ("kinesis",), "AWS::Kinesis::Stream"

    class NoRead(StoreKind):
        name, syntax, services, resource_type = "stream", "stream:N:J", ("sqs",), "AWS::Kinesis::Stream"

    with pytest.raises(TypeError, match="abstract"):
        NoRead()  # type: ignore[abstract]
    with pytest.raises(TypeError, match="needs its throttling error"):

        class NoThrottling(WriteService):  # noqa: F841
            name, operations, write_kind, throttling = "kinesis", frozenset({"PutRecord"}), "send", None

    with pytest.raises(TypeError, match="sets no what"):

        class NoWhat(AsyncSourceKind):  # noqa: F841
            trigger = inbox_source = events.SNS


def _write(op: str, target: str, items: list[list[str]] | None = None) -> dict[str, Any]:
    return {"op": op, "target": target, "items": items or []}


REFS = {
    "table:orders:id": StoreRef("table", "orders"),
    "bucket:receipts:{key}": StoreRef("bucket", "receipts"),
    "queue:outbox:id": StoreRef("queue", "https://sqs/123/outbox"),
    "provider::id": StoreRef("provider", ""),
    "sqlite:db.sqlite:t:c": StoreRef("sqlite", "db.sqlite:t"),
    "postgres:dsn:t:c": StoreRef("postgres", "dsn:t"),
}


@pytest.mark.parametrize(
    ("write", "stores_written"),
    [
        (_write("dynamodb.TransactWriteItems", "audit,orders"), {"table:orders:id"}),
        (_write("dynamodb.BatchWriteItem", "audit", [["orders", "[]"]]), {"table:orders:id"}),
        (_write("s3.PutObject", "receipts/o-1.json"), {"bucket:receipts:{key}"}),
        (_write("sqs.SendMessage", "https://sqs/123/outbox"), {"queue:outbox:id"}),
        (_write("sns.Publish", "arn:aws:sns:us-east-1:123:topic"), set()),
        (_write("s3.PutObject", "orders/o-1.json"), set()),
        (_write(SQL_COMMIT, "sqlite3.Connection"), {"sqlite:db.sqlite:t:c"}),
        (_write(SQL_COMMIT, "psycopg.Connection"), {"postgres:dsn:t:c"}),
    ],
    ids=["transaction", "batch item", "object", "send", "publish", "other bucket", "sqlite commit", "psycopg commit"],
)
def test_each_kind_says_which_writes_wrote_to_it(write: dict[str, Any], stores_written: set[str]) -> None:
    assert _stores_of(write, REFS) == stores_written


def test_a_store_kind_is_found_by_its_spec_and_checks_what_it_can() -> None:
    assert kind_of(stores.parse_effect("bucket:receipts:receipts/{key}.json")).name == "bucket"
    with pytest.raises(ValueError, match="two ways|both"):
        kind_of(EffectStore("bucket", "b", "r/{key}*")).check(EffectStore("bucket", "b", "r/{key}*"), ["a", "a-b"])
    kind_of(EffectStore("table", "t", "id")).check(EffectStore("table", "t", "id"), ["a", "a-b"])  # nothing to check


def test_every_list_of_source_kinds_is_built_from_the_classes() -> None:
    assert tuple(SOURCE_SENDERS) == tuple(SOURCE_FINDERS) == (events.EVENTBRIDGE, events.SNS)
    assert (
        SOURCES
        == (*(kind.inbox_source for kind in SOURCE_KINDS), "redrive")
        == (
            "eventbridge",
            "sns",
            "invoke",
            "redrive",
        )
    )
    assert dispatch.ALWAYS_ASYNC == (events.SNS, events.S3, events.EVENTBRIDGE)
    assert {kind.trigger for kind in SOURCE_KINDS if kind.in_stack} <= set(events.ASYNC_TRIGGERS)


@pytest.mark.parametrize(
    ("event", "line"),
    [
        ({"version": "0", "id": "e-1", "detail-type": "Paid", "source": "shop", "detail": {"order_id": "o-1"}}, None),
        (
            {
                "Records": [
                    {
                        "EventSource": "aws:sns",
                        "Sns": {
                            "Type": "Notification",
                            "MessageId": "m-1",
                            "TopicArn": "arn:aws:sns:us-east-1:123456789012:t",
                            "Message": '{"order_id": "o-1"}',
                        },
                    }
                ]
            },
            '{"order_id": "o-1"}',
        ),
        ({"order_id": "o-1"}, None),
    ],
    ids=["eventbridge", "sns", "direct"],
)
def test_each_source_kind_reads_the_key_and_the_line_its_producer_put(event: dict[str, Any], line: str | None) -> None:
    assert async_event_key(events.compile_expression("key", "order_id"), event) == "o-1"
    assert json.loads(sent_line(event)) == json.loads(line or json.dumps(event.get("detail", event)))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sqlite:foo", "'sqlite:foo' is not sqlite:FILE:TABLE:COLUMN"),
        ("table:orders", "'table:orders' is not table:NAME:ATTRIBUTE: NAME and KEYPATH are needed"),
        ("table::id", "'table::id' is not table:NAME:ATTRIBUTE: NAME and KEYPATH are needed"),
        ("provider:v1:id", "a path prefix starting with '/'"),
        ("stream:s:id", "with KIND one of table, bucket, queue, provider, sqlite, postgres"),
    ],
)
def test_a_store_that_leaves_a_part_out_is_refused_in_its_kinds_own_form(text: str, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        stores.parse_effect(text)

    assert message in str(refused.value)
