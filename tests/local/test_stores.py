"""Effects counted from the stores a chaos run names (``effectively_once_local.proof.stores``): ``--effect
KIND:NAME:KEYPATH``, only what the run added, each key normalised as the input is."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.chaos.fault_model import EventLog
from effectively_once_local.chaos.write_services import item_identity
from effectively_once_local.proof.executions import writers
from effectively_once_local.proof.stores import PROVIDER_LOG, EffectStore, Store, combine, parse_effect
from effectively_once_local.traffic.chaos_input import compile_key, load_input

REGION = "us-east-1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("table:Outbox:order_id", EffectStore("table", "Outbox", "order_id")),
        ("bucket:Receipts:receipts/{key}.json", EffectStore("bucket", "Receipts", "receipts/{key}.json")),
        ("queue:Notices:order.id", EffectStore("queue", "Notices", "order.id")),
        ("provider::request.order_id", EffectStore("provider", "", "request.order_id")),
        ("provider:/v1/charges:order_id", EffectStore("provider", "/v1/charges", "order_id")),
        ("sqlite:/tmp/run/e.db:shipments:order_id", EffectStore("sqlite", "/tmp/run/e.db:shipments", "order_id")),
        (
            "postgres:postgresql://u@127.0.0.1:5432/db:app.shipments:order_id",
            EffectStore("postgres", "postgresql://u@127.0.0.1:5432/db:app.shipments", "order_id"),
        ),
    ],
)
def test_an_effect_store_is_kind_name_and_key_path(text: str, expected: EffectStore) -> None:
    assert parse_effect(text) == expected
    assert str(parse_effect(text)) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Outbox:order_id", "KIND:NAME:KEYPATH"),
        ("sql:t:k", "KIND:NAME:KEYPATH"),
        ("table::order_id", "NAME and KEYPATH are needed"),
        ("provider:stand-in:id", "has no name"),
        ("bucket:Receipts:receipts/x.json", "needs exactly one of {key}"),
        ("bucket:Receipts:receipts/{key}/{effect_key}.json", "needs exactly one of {key}"),
        ("queue:Notices:order.[", "not a JMESPath expression"),
        ("sqlite:e.db:shipments", "is not sqlite:FILE:TABLE:COLUMN"),
        ("postgres:host=h:shipments:", "is not postgres:DSN:TABLE:COLUMN"),
        ("sqlite:e.db:ship ments:order_id", "plain SQL identifiers"),
        ("sqlite:e.db:shipments:order-id", "plain SQL identifiers"),
    ],
)
def test_fails_a_malformed_effect_store(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_effect(text)


class _Session:
    """A boto3 session whose CloudFormation stack holds the given resources (logical id -> (type, physical id))."""

    def __init__(self, resources: dict[str, tuple[str, str]]) -> None:
        self._real = boto3.session.Session(region_name=REGION)
        self._resources = resources

    def client(self, name: str) -> Any:
        if name != "cloudformation":
            return self._real.client(name)
        summaries = [
            {"LogicalResourceId": lid, "ResourceType": kind, "PhysicalResourceId": pid}
            for lid, (kind, pid) in self._resources.items()
        ]

        class _Cfn:
            def get_paginator(self, _: str) -> Any:
                class _Pages:
                    def paginate(self, **__: Any) -> list[dict[str, Any]]:
                        return [{"StackResourceSummaries": summaries}]

                return _Pages()

        return _Cfn()


def test_a_table_store_counts_only_what_the_run_added_per_normalised_key(tmp_path: Path) -> None:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName="outbox-1",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        put = lambda i, key: dynamodb.put_item(  # noqa: E731
            TableName="outbox-1", Item={"id": {"S": i}, "order_id": {"S": key}}
        )
        put("before", "o-1")  # an earlier run's effect: not this run's
        session = _Session({"Outbox": ("AWS::DynamoDB::Table", "outbox-1")})
        store = Store(session, "s", parse_effect("table:out:order_id"), tmp_path, ("strip", "casefold"))
        store.snapshot()
        put("a", "o-1")
        put("b", " O-1 ")  # the same order in another form: a second effect for one key
        put("c", "o-2")

        counts = store.count()

    assert counts == {"o-1": 2, "o-2": 1}
    assert store.name == "outbox-1", "a unique part of the logical id names the table"


def test_an_effect_is_an_executions_writes_so_one_execution_writing_two_items_is_one(tmp_path: Path) -> None:
    """Issue 22's "effect that writes twice": an execution writing an order row and an audit row under a fresh id
    is one effect; a second execution's fresh row makes the key duplicated; a row no write log names counts alone."""
    log_a, log_b = EventLog(tmp_path / "chaos-q-1.jsonl"), EventLog(tmp_path / "chaos-q-2.jsonl")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName="outbox-1",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        session = _Session({"Outbox": ("AWS::DynamoDB::Table", "outbox-1")})
        store = Store(session, "s", parse_effect("table:Outbox:order_id"), tmp_path)
        store.snapshot()
        assert store.key_attributes == ["id"]

        def put(log: EventLog, invocation: int, item_id: str, key: str) -> None:
            item = {"id": {"S": item_id}, "order_id": {"S": key}}
            dynamodb.put_item(TableName="outbox-1", Item=item)
            items = [["outbox-1", item_identity(item, ["id"])]]
            log.write(event="write", op="dynamodb.PutItem", invocation=invocation, items=items)

        put(log_a, 1, "confirm#o-1", "o-1")  # one execution: the keyed row and a fresh audit row
        put(log_a, 1, "audit#1f0c", "o-1")
        put(log_a, 2, "confirm#o-2", "o-2")  # o-2: killed after both rows, replayed by another environment
        put(log_a, 2, "audit#77aa", "o-2")
        put(log_b, 1, "audit#90bd", "o-2")  # (its keyed row was refused: only the fresh one is new)
        dynamodb.put_item(TableName="outbox-1", Item={"id": {"S": "stray"}, "order_id": {"S": "o-3"}})

        found = writers(tmp_path)
        assert store.count(found) == {"o-1": 1, "o-2": 2, "o-3": 1}
        assert store.count() == {"o-1": 2, "o-2": 3, "o-3": 1}, "without the write log every row counts alone"


def test_two_records_of_one_batch_whose_keys_normalise_alike_are_two_executions(tmp_path: Path) -> None:
    """An execution is one record's pass (the writes after its in-progress put), not the invocation: an app keyed on
    the raw id processes " O-9 " and "o-9" in one batch, and under --normalize that is one key done twice."""
    log = EventLog(tmp_path / "chaos-q-1.jsonl")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(
            TableName="outbox-2",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        session = _Session({"Outbox": ("AWS::DynamoDB::Table", "outbox-2")})
        store = Store(session, "s", parse_effect("table:Outbox:order_id"), tmp_path, ("strip", "casefold"))
        store.snapshot()
        for record_id, item_id, key in (("p#r1", "confirm#r1", " O-9 "), ("p#r2", "confirm#r2", "o-9")):
            log.write(
                event="write", op="dynamodb.PutItem", role="idempotency_record", invocation=1, record_id=record_id
            )
            item = {"id": {"S": item_id}, "order_id": {"S": key}}
            dynamodb.put_item(TableName="outbox-2", Item=item)
            log.write(
                event="write",
                op="dynamodb.PutItem",
                role="effect",
                invocation=1,
                items=[["outbox-2", item_identity(item, ["id"])]],
            )

        assert store.count(writers(tmp_path)) == {"o-9": 2}


def test_a_bucket_store_reads_the_key_from_the_object_key(tmp_path: Path) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="receipts-1")
        session = _Session({"Receipts": ("AWS::S3::Bucket", "receipts-1")})
        store = Store(session, "s", parse_effect("bucket:Receipts:receipts/{key}.json"), tmp_path)
        store.snapshot()
        for key in ("receipts/o-1.json", "receipts/o-1.json", "receipts/o-2.json", "other/o-3.json"):
            s3.put_object(Bucket="receipts-1", Key=key, Body=b"{}")

        assert store.count() == {"o-1": 1, "o-2": 1}, "an overwritten key is one object; other prefixes are not"


def test_a_bucket_template_takes_wildcards_where_the_object_key_varies(tmp_path: Path) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="documents-1")
        session = _Session({"Documents": ("AWS::S3::Bucket", "documents-1")})
        store = Store(session, "s", parse_effect("bucket:Documents:documents/{key}/*"), tmp_path)
        store.snapshot()
        for key in ("documents/o-1/shop#confirm#o-1", "documents/o-1/1f0c.json", "documents/o-2/77aa", "x/o-3/1"):
            s3.put_object(Bucket="documents-1", Key=key, Body=b"{}")

        assert store.count() == {"o-1": 2, "o-2": 1}


def test_a_queue_store_reads_bodies_without_consuming_them(tmp_path: Path) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="notices")["QueueUrl"]
        session = _Session({"Notices": ("AWS::SQS::Queue", url)})
        store = Store(session, "s", parse_effect("queue:Notices:order.id"), tmp_path)
        store.snapshot()
        for key in ("o-1", "o-1", "o-2"):
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"order": {"id": key}}))

        assert store.count() == {"o-1": 2, "o-2": 1}
        assert store.count() == {"o-1": 2, "o-2": 1}, "read twice: the queue still holds them"


def test_a_provider_store_counts_executed_calls_per_key_in_the_body(tmp_path: Path) -> None:
    log = EventLog(tmp_path / PROVIDER_LOG)
    for executed, order in ((True, "o-1"), (False, "o-1"), (True, "o-1"), (True, "o-2")):
        log.write(event="call", key="k", executed=executed, **({"request": {"order_id": order}} if executed else {}))
    store = Store(None, "s", parse_effect("provider::order_id"), tmp_path)

    assert store.count() == {"o-1": 2, "o-2": 1}


def test_a_provider_store_with_a_path_counts_only_the_calls_under_it(tmp_path: Path) -> None:
    log = EventLog(tmp_path / PROVIDER_LOG)
    for path, order in (("/keyed/c", "o-1"), ("/unkeyed/sms", "o-1"), ("/unkeyed/sms", "o-1"), ("/keyed/c", "o-2")):
        log.write(event="call", path=path, key=None, executed=True, request={"order_id": order})

    assert Store(None, "s", parse_effect("provider:/unkeyed/:order_id"), tmp_path).count() == {"o-1": 2}
    assert Store(None, "s", parse_effect("provider:/keyed/:order_id"), tmp_path).count() == {"o-1": 1, "o-2": 1}
    assert Store(None, "s", parse_effect("provider::order_id"), tmp_path).count() == {"o-1": 3, "o-2": 1}


def test_a_sqlite_store_counts_the_rows_the_run_added_per_key(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "effects.sqlite3"
    store = Store(None, "s", parse_effect(f"sqlite:{db}:shipments:order_id"), tmp_path, ("casefold",))
    store.snapshot()  # no file yet: nothing there
    assert store.count() == {} and not db.exists(), "reading does not create the database"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE shipments (id TEXT PRIMARY KEY, order_id TEXT)")
    assert store.count() == {}
    with sqlite3.connect(db) as conn:
        conn.executemany("INSERT INTO shipments VALUES (?, ?)", [("before", "o-1")])
    store.snapshot()
    with sqlite3.connect(db) as conn:
        rows = [("a", "o-1"), ("b", "O-1"), ("c", "o-2"), ("d", None)]
        conn.executemany("INSERT INTO shipments VALUES (?, ?)", rows)

    assert store.count() == {"o-1": 2, "o-2": 1}, "a row without the key is left out"
    assert store.name == f"{db}:shipments"


def test_stores_combine_into_one_count_per_key_naming_the_store_of_each_duplicate() -> None:
    from collections import Counter

    combined, per_store = combine({"table:A:k": Counter({"x": 1, "y": 2}), "queue:B:k": Counter({"x": 3})})

    assert combined == {"x": 3, "y": 2}
    assert per_store == {
        "table:A:k": {"effects": 3, "duplicated": ["y"]},
        "queue:B:k": {"effects": 3, "duplicated": ["x"]},
    }


def test_normalize_makes_one_key_of_the_forms_of_an_id(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"order_id": k}) + "\n" for k in ("ABC-1", " abc-1 ", "ＡＢＣ-１")))

    raw = [ln.key for ln in load_input(path, "order_id")]
    normal = [ln.key for ln in load_input(path, "order_id", ("nfkc", "strip", "casefold"))]

    assert len(set(raw)) == 3 and set(normal) == {"abc-1"}
    with pytest.raises(ValueError, match="unknown normalize step"):
        compile_key("order_id", ("lower",))


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--effect", "sql:t:k", "argument --effect: 'sql:t:k' is not KIND:NAME:KEYPATH"),
        ("--normalize", "lower", "invalid choice"),
    ],
)
def test_the_chaos_command_refuses_a_bad_store_or_step_in_one_line(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from effectively_once_local.cli.main import main

    with pytest.raises(SystemExit) as exit_:
        main(["chaos", "--app-dir", ".", "--stack", "S", "--input", "in.jsonl", "--key", "k", flag, value])

    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1 and message in err


def test_a_store_marked_optional_is_parsed_and_shown_with_its_suffix() -> None:
    """Issue 30, item 6: ``:optional``, after any kind's parts."""
    from effectively_once_local.proof.stores import parse_effect as parse

    assert parse("provider:/unkeyed/at-most-once/:order_id:optional") == EffectStore(
        "provider", "/unkeyed/at-most-once/", "order_id", optional=True
    )
    sql = parse("sqlite:e.db:shipments:order_id:optional")
    assert (sql.name, sql.key_path, sql.optional) == ("e.db:shipments", "order_id", True)
    assert str(sql) == "sqlite:e.db:shipments:order_id:optional"
    assert parse("table:Receipts:order_id").optional is False


def test_a_key_in_some_required_stores_and_not_the_others_is_incomplete() -> None:
    """Issue 30, item 6: every store is required by default; an optional one is counted, never required."""
    from effectively_once_local.proof.stores import incomplete_keys

    counts = {
        "sqlite:e.db:shipments:order_id": Counter({"torn": 1, "whole": 1}),
        "bucket:Documents:documents/{key}/*": Counter({"whole": 1}),
        "provider:/sms/:order_id:optional": Counter({"whole": 1}),
        "table:Receipts:order_id": Counter({"whole": 2, "torn": 0}),
    }
    keys = {"torn", "whole", "refused"}

    assert incomplete_keys(counts, {"provider:/sms/:order_id:optional"}, keys) == ["torn"]
    assert incomplete_keys({"table:Receipts:order_id": Counter({"a": 1})}, set(), {"a", "b"}) == [], "one store"
    only_optional = {name: c for name, c in counts.items() if "sqlite" in name or "optional" in name}
    assert incomplete_keys(only_optional, {"provider:/sms/:order_id:optional"}, keys) == []
