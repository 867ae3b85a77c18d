"""A wrong effect key is a usage error, not the app's loss (issue 57, item 2): when the run's effect lines name the
keys it sent and a store holds items the run added, none of them with a key (under the store's key path) the run
knows, the store or its key path is probably wrong: the run says so in one line, naming the key path and what the
items hold, and exits 2. An app that wrote nothing still loses its keys (exit 1), and so does any run whose effect
lines name no key it sent. Every store kind with a key path (a table's attribute, a bucket's name template, a
queue's or a provider call's JMESPath, a SQL table's column) is checked the same way (``proof/stores.py``
``wrong_key_path``); the chaos command is driven whole with the deploy, the discovery and the app faked on moto."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.any_stack import chaos_run
from effectively_once_local.aws.discovery import DeployedMapping
from effectively_once_local.base.exit_codes import EXIT_USAGE
from effectively_once_local.chaos.fault_model import EventLog
from effectively_once_local.cli.main import main
from effectively_once_local.engine.pipeline import Deployment, Drive
from effectively_once_local.proof.key_check import EFFECT_MESSAGE
from effectively_once_local.proof.stores import PROVIDER_LOG, Store, parse_effect, wrong_key_path

from .conftest import mapping_config

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
KEYS = [f"o-{i}" for i in range(5)]
#: The app's effect lines: one per key it sent, as the runtime logs them.
LOGGED = Counter(KEYS)


class _Pages:
    def __init__(self, pages: list[dict[str, Any]]) -> None:
        self.pages = pages

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        return self.pages


class _Cloudformation:
    def __init__(self, resources: dict[str, tuple[str, str]]) -> None:
        self.summaries = [
            {"LogicalResourceId": lid, "ResourceType": kind, "PhysicalResourceId": pid}
            for lid, (kind, pid) in resources.items()
        ]

    def get_paginator(self, _: str) -> _Pages:
        return _Pages([{"StackResourceSummaries": self.summaries}])


class _Session:
    """moto's clients, with a CloudFormation stack holding ``resources`` (logical id -> (type, physical id))."""

    def __init__(self, resources: dict[str, tuple[str, str]]) -> None:
        self._real = boto3.session.Session(region_name=REGION)
        self._cfn = _Cloudformation(resources)

    def client(self, name: str) -> Any:
        return self._cfn if name == "cloudformation" else self._real.client(name)


def _table(name: str) -> Any:
    dynamodb = boto3.client("dynamodb", region_name=REGION)
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return dynamodb


def _order_item(key: str, i: int) -> dict[str, Any]:
    """An item of the app: its key in ``pk`` (no ``orderId``), its amount and status."""
    return {"pk": {"S": key}, "amount": {"N": str(10 + i)}, "status": {"S": "done"}}


def _counted(store: Store, write: Callable[[], None]) -> Store:
    store.snapshot()
    write()
    store.count()
    return store


def test_a_table_whose_items_lack_the_attribute_is_named_with_what_its_items_hold(tmp_path: Path) -> None:
    with mock_aws():
        dynamodb = _table("orders-table")
        session = _Session({"Orders": ("AWS::DynamoDB::Table", "orders-table")})
        store = Store(session, "s", parse_effect("table:Orders:orderId"), tmp_path, keys=KEYS)
        put = lambda: [dynamodb.put_item(TableName="orders-table", Item=_order_item(k, i)) for i, k in enumerate(KEYS)]  # noqa: E731
        _counted(store, put)

        why = wrong_key_path(store, LOGGED, set(KEYS))

    assert why == (
        "the effect store orders-table holds 5 new items, none with attribute 'orderId' matching a key of the 5"
        " effect lines; its items have attributes amount, pk, status (one item: "
        '{"amount": "10", "pk": "o-0", "status": "done"})'
    )


def test_an_item_of_any_attribute_type_is_shown(tmp_path: Path) -> None:
    """Every item of a table is read with what it holds: a binary, a set or a map attribute is shown as JSON."""
    with mock_aws():
        dynamodb = _table("orders-table")
        session = _Session({"Orders": ("AWS::DynamoDB::Table", "orders-table")})
        store = Store(session, "s", parse_effect("table:Orders:orderId"), tmp_path, keys=KEYS)
        item = {"pk": {"S": "o-0"}, "blob": {"B": b"\x00"}, "tags": {"SS": ["a"]}, "m": {"M": {"n": {"N": "1"}}}}
        _counted(store, lambda: dynamodb.put_item(TableName="orders-table", Item=item))

        why = wrong_key_path(store, LOGGED, set(KEYS))

    assert why is not None and "its items have attributes blob, m, pk, tags (one item: " in why
    assert '"tags": "{\\"SS\\": [\\"a\\"]}"' in why, why


def test_a_table_attribute_whose_values_are_no_key_is_named_too(tmp_path: Path) -> None:
    with mock_aws():
        dynamodb = _table("orders-table")
        session = _Session({"Orders": ("AWS::DynamoDB::Table", "orders-table")})
        store = Store(session, "s", parse_effect("table:Orders:amount"), tmp_path, keys=KEYS)
        put = lambda: [dynamodb.put_item(TableName="orders-table", Item=_order_item(k, i)) for i, k in enumerate(KEYS)]  # noqa: E731
        _counted(store, put)

        why = wrong_key_path(store, LOGGED, set(KEYS))

    assert why is not None and "none with attribute 'amount' matching a key of the 5 effect lines" in why


@pytest.mark.parametrize(
    ("case", "logged", "items"),
    [
        ("the right attribute", LOGGED, KEYS),
        ("an app that wrote nothing", LOGGED, []),
        ("one item the right key, the others not", LOGGED, ["o-0", "x-1", "x-2"]),
        ("effect lines naming no key sent (an app keyed on the messageId)", Counter({"m-1": 1, "m-2": 1}), ["m-1"]),
        ("no effect lines (an app not on the runtime)", Counter(), ["x-1"]),
    ],
)
def test_no_finding_of_the_app_is_taken_for_a_wrong_key_path(
    case: str, logged: Counter[str], items: list[str], tmp_path: Path
) -> None:
    with mock_aws():
        dynamodb = _table("orders-table")
        session = _Session({"Orders": ("AWS::DynamoDB::Table", "orders-table")})
        store = Store(session, "s", parse_effect("table:Orders:orderId"), tmp_path, keys=KEYS)

        def put() -> None:
            for i, key in enumerate(items):
                item = {"pk": {"S": f"p-{i}"}, "orderId": {"S": key}}
                dynamodb.put_item(TableName="orders-table", Item=item)

        _counted(store, put)

        assert wrong_key_path(store, logged, set(KEYS)) is None, case


def test_an_item_there_before_the_run_is_not_what_the_store_holds(tmp_path: Path) -> None:
    """Only what the run added counts: a store whose only items are an earlier run's holds nothing new."""
    with mock_aws():
        dynamodb = _table("orders-table")
        dynamodb.put_item(TableName="orders-table", Item=_order_item("earlier", 0))
        session = _Session({"Orders": ("AWS::DynamoDB::Table", "orders-table")})
        store = _counted(Store(session, "s", parse_effect("table:Orders:orderId"), tmp_path), lambda: None)

        assert wrong_key_path(store, LOGGED, set(KEYS)) is None


def test_a_bucket_whose_objects_match_no_key_is_named_with_one_objects_name(tmp_path: Path) -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="receipts-1")
        session = _Session({"Receipts": ("AWS::S3::Bucket", "receipts-1")})
        store = Store(session, "s", parse_effect("bucket:Receipts:receipt/{key}.json"), tmp_path, keys=KEYS)
        _counted(
            store, lambda: [s3.put_object(Bucket="receipts-1", Key=f"receipts/{k}.json", Body=b"{}") for k in KEYS]
        )

        why = wrong_key_path(store, LOGGED, set(KEYS))

    assert why == (
        "the effect store receipts-1 holds 5 new objects, none with name template 'receipt/{key}.json' matching a"
        " key of the 5 effect lines; one object: receipts/o-0.json"
    )


def test_a_queue_whose_messages_match_no_key_is_named_with_their_body_fields(tmp_path: Path) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="notices")["QueueUrl"]
        session = _Session({"Notices": ("AWS::SQS::Queue", url)})
        store = Store(session, "s", parse_effect("queue:Notices:order.id"), tmp_path, keys=KEYS)
        send = lambda: [sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"orderId": k})) for k in KEYS]  # noqa: E731
        _counted(store, send)

        why = wrong_key_path(store, LOGGED, set(KEYS))

    assert why is not None
    assert "holds 5 new messages, none with JMESPath 'order.id' matching a key of the 5 effect lines" in why
    assert "its messages have body fields orderId (one message: " in why


def test_a_provider_whose_calls_match_no_key_is_named_with_their_request_fields(tmp_path: Path) -> None:
    log = EventLog(tmp_path / PROVIDER_LOG)
    store = Store(None, "s", parse_effect("provider:/v1/:order_id"), tmp_path, keys=KEYS)

    def call() -> None:
        for key in KEYS:
            log.write(event="call", path="/v1/charges", executed=True, request={"orderId": key, "amount": 3})

    _counted(store, call)
    why = wrong_key_path(store, LOGGED, set(KEYS))

    assert why is not None
    assert "holds 5 new calls, none with JMESPath 'order_id' matching a key of the 5 effect lines" in why
    assert 'its calls have request fields amount, orderId (one call: {"amount": 3, "orderId": "o-0"})' in why


def test_a_sql_table_without_the_column_is_named_with_its_columns(tmp_path: Path) -> None:
    db = tmp_path / "effects.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE shipments (id TEXT PRIMARY KEY, order_ref TEXT)")
    store = Store(None, "s", parse_effect(f"sqlite:{db}:shipments:order_id"), tmp_path, keys=KEYS)

    def insert() -> None:
        with sqlite3.connect(db) as conn:
            conn.executemany("INSERT INTO shipments VALUES (?, ?)", [(f"s-{i}", k) for i, k in enumerate(KEYS)])

    _counted(store, insert)
    why = wrong_key_path(store, LOGGED, set(KEYS))

    assert why is not None
    assert f"the effect store {db}:shipments holds 5 new rows, none with column 'order_id' matching" in why
    assert 'its rows have columns id, order_ref (one row: {"id": "s-0", "order_ref": "o-0"})' in why


# The chaos command, driven whole: the deploy, the discovery and the app (``drive``: it writes its effect lines and
# its items, as the pollers would) faked on moto; every step after them is the run's own.


def _mapping(tmp_path: Path, dlq_url: str) -> DeployedMapping:
    config = mapping_config(label="Orders", queue_url=dlq_url.replace("-dlq", ""))
    return DeployedMapping("Orders", "orders", False, config, "uuid", dlq_url, tmp_path)


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bool], None]]:
    """``app(writes)``: the app the chaos command runs: each key sent and delivered once, an effect line per key, and
    with ``writes`` (the default) its item per key in the stack's table ``Orders`` (``pk``, ``amount``, ``status``)."""
    behaviour: dict[str, bool] = {"writes": True}
    with mock_aws():
        dynamodb = _table("orders-table")
        sqs = boto3.client("sqs", region_name=REGION)
        sqs.create_queue(QueueName="orders")
        dlq_url = sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
        session = _Session({"Orders": ("AWS::DynamoDB::Table", "orders-table")})

        @contextmanager
        def deployment(**_: Any) -> Iterator[Deployment]:
            yield Deployment("http://127.0.0.1:9", tmp_path / "cdk.out", fresh=True)

        def drive(*_: Any, run_dir: Path, **__: Any) -> Drive:
            logs = [EventLog(run_dir / name) for name in ("sent-Orders.jsonl", "deliveries-Orders-1.jsonl")]
            effects = EventLog(run_dir / "function-Orders-1.log")
            for i, key in enumerate(KEYS):
                logs[0].write(line=i + 1, key=key, message_id=f"m-{i}")
                logs[1].write(message_id=f"m-{i}")
                if behaviour["writes"]:
                    dynamodb.put_item(TableName="orders-table", Item=_order_item(key, i))
                effects.write(message=EFFECT_MESSAGE, idempotency_key=key)
            return Drive(messages_sent=len(KEYS), sending_started=0.0, drained=0.0)

        monkeypatch.setattr(chaos_run, "local_deployment", deployment)
        monkeypatch.setattr(chaos_run, "local_endpoint", lambda endpoint: nullcontext())
        monkeypatch.setattr(chaos_run, "local_session", lambda endpoint: session)
        monkeypatch.setattr(chaos_run, "discover_targets", lambda s, stack, out: [_mapping(tmp_path, dlq_url)])
        monkeypatch.setattr(chaos_run, "disable", lambda s, mappings: None)
        monkeypatch.setattr(chaos_run, "drive", drive)
        yield lambda writes: behaviour.update(writes=writes)


def _chaos(tmp_path: Path, effect_key: str) -> int:
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"order_id": k}) + "\n" for k in KEYS))
    return main(
        ["chaos", "--app-dir", str(REPO / "examples" / "plain"), "--stack", "PlainOrders"]
        + ["--input", str(tmp_path / "in.jsonl"), "--key", "order_id", "--quiet", "--drain-timeout", "30"]
        + ["--report", str(tmp_path / "report.json"), "--run-dir", str(tmp_path / "run")]
        + ["--effect-table", "Orders", "--effect-key", effect_key]
    )


def test_the_chaos_command_says_a_wrong_effect_key_in_one_line_and_exits_2(
    app: Callable[[bool], None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _chaos(tmp_path, "orderId")

    out, err = capsys.readouterr()
    assert (code, err.strip()) == (
        EXIT_USAGE,
        "error: the effect store orders-table holds 5 new items, none with attribute 'orderId' matching a key of the"
        " 5 effect lines; its items have attributes amount, pk, status (one item: "
        '{"amount": "10", "pk": "o-0", "status": "done"}): --effect-table or --effect-key is probably wrong',
    ), out
    assert "vanished" not in out and "lost" not in out, "the app is not blamed"


def test_the_chaos_command_still_fails_an_app_that_wrote_nothing_on_its_lost_keys(
    app: Callable[[bool], None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app(False)
    code = _chaos(tmp_path, "orderId")

    out, err = capsys.readouterr()
    report = json.loads((tmp_path / "report.json").read_text())
    assert code == 1 and err == "", err
    assert report["keys"]["lost"] == KEYS and report["total"]["effect_log_lines"] == len(KEYS)
    assert "FAIL: 5 lines vanished (delivered and reported done, with no effect and no DLQ copy)" in out


def test_the_chaos_command_counts_the_effects_under_the_right_key(
    app: Callable[[bool], None], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _chaos(tmp_path, "pk")

    report = json.loads((tmp_path / "report.json").read_text())
    assert code == 0, capsys.readouterr()
    assert report["keys"]["lost"] == [] and report["total"]["effects"] == len(KEYS)
