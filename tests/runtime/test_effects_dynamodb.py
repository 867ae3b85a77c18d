"""The DynamoDB effect adapters (issue 24, item 1): the condition paths and a repeated ``ClientRequestToken``
against moto in process (which answers a token as DynamoDB does: ``conftest.py`` applies the local AWS's DynamoDB
refusals), a token's mismatch with botocore's Stubber, and the adapters inside a real Consumer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from effectively_once_local.aws import moto_dynamodb_refusals
from effectively_once_runtime import Consumer, InvalidEffectCall, PermanentError, names
from effectively_once_runtime.effects._context import EffectCall, running
from effectively_once_runtime.effects.dynamodb import (
    ABSENT,
    CANCELLATION_REASONS,
    PERMANENT,
    TOKEN_WINDOW_SECONDS,
    ItemMismatch,
    StoredItemGone,
    TokenMismatch,
    TransactionRefused,
    TransactPut,
    client_request_token,
    put_item,
    transact_write,
)

from .conftest import IDEMPOTENCY_TABLE, REGION, create_table, failures, sqs_record
from .orders_domain import KEY_PREFIX, Orders, order

KEY = "shop/orders#ship#o-1"


@pytest.fixture
def ddb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's DynamoDB in process: ``outbox`` and ``stock`` (partition key ``pk``), ``events`` (``pk`` + ``sk``)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client, "outbox", "pk")
        create_table(client, "stock", "pk")
        client.create_table(
            TableName="events",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def _put(client: Any, item: dict[str, Any], **options: Any) -> dict[str, Any]:
    options.setdefault("idempotency_key", KEY)
    return put_item(client=client, table_name="outbox", key_attribute="pk", item=item, **options)


def _scan(client: Any, table: str) -> list[dict[str, Any]]:
    return client.scan(TableName=table)["Items"]  # type: ignore[no-any-return]


# --- conditional put -------------------------------------------------------------------------------------------------
def test_a_first_put_writes_the_item_under_the_key_and_returns_it(ddb: Any) -> None:
    written = _put(ddb, {"order_id": "o-1", "total": 100, "tags": {"a"}})

    assert written == {"pk": KEY, "order_id": "o-1", "total": Decimal(100), "tags": {"a"}}
    assert _scan(ddb, "outbox") == [
        {"pk": {"S": KEY}, "order_id": {"S": "o-1"}, "total": {"N": "100"}, "tags": {"SS": ["a"]}}
    ]


def test_a_replay_returns_the_stored_item_and_writes_nothing(ddb: Any) -> None:
    ddb.put_item(TableName="outbox", Item={"pk": {"S": KEY}, "total": {"N": "100"}, "first": {"BOOL": True}})

    replayed = _put(ddb, {"total": 100})

    assert replayed == {"pk": KEY, "total": Decimal(100), "first": True}, "the stored item, not the new one"
    assert len(_scan(ddb, "outbox")) == 1


def test_a_replay_with_other_values_is_a_permanent_error_naming_the_key_and_attributes_never_values(ddb: Any) -> None:
    _put(ddb, {"total": 100, "currency": "EUR", "note": "gift-wrap"})

    with pytest.raises(ItemMismatch) as caught:
        _put(ddb, {"total": 250, "currency": "USD", "note": "gift-wrap"})

    assert isinstance(caught.value, PermanentError)
    assert caught.value.attributes == ("currency", "total")
    assert caught.value.key == KEY and caught.value.table_name == "outbox"
    message = str(caught.value)
    assert KEY in message and "currency, total" in message
    assert not any(value in message for value in ("100", "250", "EUR", "USD", "gift-wrap")), message
    [stored] = _scan(ddb, "outbox")
    assert stored["total"] == {"N": "100"}


def test_volatile_attributes_are_left_out_of_the_comparison(ddb: Any) -> None:
    _put(ddb, {"total": 100, "created_at": "2026-12-01T10:00:00Z"}, volatile=("created_at",))

    replayed = _put(ddb, {"total": 100, "created_at": "2026-12-01T10:07:00Z"}, volatile=("created_at",))
    with pytest.raises(ItemMismatch) as caught:
        _put(ddb, {"total": 100, "created_at": "2026-12-01T10:07:00Z"})

    assert replayed["created_at"] == "2026-12-01T10:00:00Z", "the stored timestamp comes back"
    assert caught.value.attributes == ("created_at",), "without volatile= the timestamp is compared"


def test_compare_checks_only_the_named_attributes_and_an_attribute_missing_from_the_stored_item(ddb: Any) -> None:
    ddb.put_item(TableName="outbox", Item={"pk": {"S": KEY}, "total": {"N": "100.0"}, "note": {"S": "a"}})

    replayed = _put(ddb, {"total": Decimal("100"), "note": "b"}, compare=("total",))
    with pytest.raises(ItemMismatch) as caught:
        _put(ddb, {"total": 100, "note": "a", "more": 1})

    assert replayed["note"] == "a", "note is not compared; a number equal as a Decimal agrees"
    assert caught.value.attributes == ("more",)


def test_name_gives_each_call_its_own_key(ddb: Any) -> None:
    first = _put(ddb, {"kind": "shipment"}, name="shipment")
    second = _put(ddb, {"kind": "invoice"}, name="invoice")

    assert (first["pk"], second["pk"]) == (f"{KEY}#shipment", f"{KEY}#invoice")
    assert sorted(i["pk"]["S"] for i in _scan(ddb, "outbox")) == [f"{KEY}#invoice", f"{KEY}#shipment"]


def test_a_sort_key_table_takes_one_item_per_sort_key_and_replays_each(ddb: Any) -> None:
    def put(sk: str, total: int) -> dict[str, Any]:
        return put_item(
            client=ddb,
            table_name="events",
            key_attribute="pk",
            sort_key=("sk", sk),
            item={"total": total},
            idempotency_key=KEY,
            name=sk,  # two calls of one adapter in one effect still take a name each
        )

    put("shipped", 1)
    put("billed", 2)
    again = put_item(
        client=ddb, table_name="events", key_attribute="pk", sort_key=("sk", "billed"), item={"total": 2},
        idempotency_key=KEY, name="billed",
    )  # fmt: skip

    assert again == {"pk": f"{KEY}#billed", "sk": "billed", "total": Decimal(2)}
    assert len(_scan(ddb, "events")) == 2


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"item": {"pk": "x"}}, InvalidEffectCall, r"item must not hold the key attributes \['pk'\]"),
        (
            {"item": {"a": 1}, "compare": ("b",)},
            InvalidEffectCall,
            r"compare names attributes that are not in the item",
        ),
        ({"item": {"a": 1}, "compare": "a"}, TypeError, r"compare must be a collection of attribute names"),
        ({"item": {"a": 1}, "volatile": "a"}, TypeError, r"volatile must be a collection of attribute names"),
        ({"item": {"a": 1.5}}, TypeError, r"Float types are not supported"),
        (
            {"item": {"a": 1}, "idempotency_key": "k" * 2049},
            InvalidEffectCall,
            r"over DynamoDB's 2048-byte partition key",
        ),
        ({"item": {"a": 1}, "sort_key": ("pk", "x")}, InvalidEffectCall, r"sort_key names the partition key attribute"),
    ],
)
def test_fails_arguments_that_cannot_make_a_keyed_put(
    ddb: Any, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    item = options.pop("item")
    with pytest.raises(error, match=match):
        _put(ddb, item, **options)
    assert _scan(ddb, "outbox") == []


def _stubbed() -> tuple[Any, Stubber]:
    client = boto3.client("dynamodb", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


def test_a_store_without_all_old_is_read_back_with_a_consistent_get_and_a_vanished_item_is_transient() -> None:
    client, stub = _stubbed()
    refused = {"service_error_code": "ConditionalCheckFailedException", "http_status_code": 400}
    key = {"pk": {"S": KEY}}
    stub.add_client_error("put_item", **refused)
    read = {"TableName": "outbox", "Key": key, "ConsistentRead": True}
    stub.add_response("get_item", {"Item": {"pk": {"S": KEY}, "a": {"N": "1"}}}, read)
    stub.add_client_error("put_item", **refused)
    stub.add_response("get_item", {}, read)

    with stub:
        replayed = _put(client, {"a": 1})
        with pytest.raises(StoredItemGone, match="exists in table 'outbox' but its item is gone") as caught:
            _put(client, {"a": 1})
        stub.assert_no_pending_responses()

    assert replayed == {"pk": KEY, "a": Decimal(1)}
    assert not isinstance(caught.value, PermanentError)


# --- transactional variant: the condition path (moto) ---------------------------------------------------------------
def _order_transaction(total: int = 100, at: str = "10:00") -> list[Any]:
    return [
        TransactPut("outbox", "pk", {"total": total, "at": at}, volatile=("at",)),
        TransactPut("events", "pk", {"kind": "ordered"}, sort_key=("sk", "ordered")),
        {
            "Update": {
                "TableName": "stock",
                "Key": {"pk": {"S": "sku-1"}},
                "UpdateExpression": "ADD reserved :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
    ]


def _reserved(ddb: Any) -> int:
    return int(ddb.get_item(TableName="stock", Key={"pk": {"S": "sku-1"}})["Item"]["reserved"]["N"])


def test_a_transaction_writes_its_keyed_puts_and_entries_together(ddb: Any) -> None:
    written = transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)

    assert written == [
        {"pk": KEY, "total": Decimal(100), "at": "10:00"},
        {"pk": KEY, "sk": "ordered", "kind": "ordered"},
    ]
    assert _reserved(ddb) == 1
    assert len(_scan(ddb, "outbox")) == len(_scan(ddb, "events")) == 1


def test_a_transaction_replayed_within_the_token_window_is_answered_by_dynamodb(ddb: Any) -> None:
    # The same request, so the same ClientRequestToken: DynamoDB answers it as a success and writes nothing.
    first = transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)

    replayed = transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)

    assert replayed == first
    assert _reserved(ddb) == 1, "the Update in the same transaction did not run again"


def test_a_transaction_replayed_outside_the_token_window_is_answered_by_its_conditions(
    ddb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DynamoDB forgets a token 10 minutes after its transaction completed: only the conditions stand between the
    # replay and a second reservation.
    now = [0.0]
    monkeypatch.setattr(moto_dynamodb_refusals, "_clock", lambda: now[0])
    transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)
    now[0] += TOKEN_WINDOW_SECONDS + 1

    replayed = transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)

    assert replayed == [
        {"pk": KEY, "total": Decimal(100), "at": "10:00"},
        {"pk": KEY, "sk": "ordered", "kind": "ordered"},
    ]
    assert _reserved(ddb) == 1, "the Update in the same transaction did not run again"


def test_a_transaction_replayed_with_another_volatile_value_is_answered_by_its_conditions(ddb: Any) -> None:
    # Another request, so another token, within the window too: the conditions answer it.
    transact_write(client=ddb, items=_order_transaction(at="10:00"), idempotency_key=KEY)

    replayed = transact_write(client=ddb, items=_order_transaction(at="10:11"), idempotency_key=KEY)

    assert replayed == [
        {"pk": KEY, "total": Decimal(100), "at": "10:00"},
        {"pk": KEY, "sk": "ordered", "kind": "ordered"},
    ], "the stored items, the first timestamp"
    assert _reserved(ddb) == 1, "the Update in the same transaction did not run again"


def test_a_transaction_replayed_with_other_values_is_a_permanent_error(ddb: Any) -> None:
    transact_write(client=ddb, items=_order_transaction(total=100), idempotency_key=KEY)

    with pytest.raises(ItemMismatch, match=r"key 'shop/orders#ship#o-1' in table 'outbox' .* of total:") as caught:
        transact_write(client=ddb, items=_order_transaction(total=300), idempotency_key=KEY)

    assert caught.value.attributes == ("total",) and "300" not in str(caught.value)
    assert _reserved(ddb) == 1


def test_a_transaction_whose_key_is_stored_in_part_was_written_by_another_request(ddb: Any) -> None:
    ddb.put_item(TableName="outbox", Item={"pk": {"S": KEY}, "total": {"N": "100"}})

    with pytest.raises(ItemMismatch, match=r"stored in table\(s\) \['outbox'\] but not in all") as caught:
        transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)

    assert caught.value.attributes == ()
    assert _scan(ddb, "events") == [] and _scan(ddb, "stock") == []


def test_a_transaction_cancelled_by_a_condition_of_its_own_entries_is_raised_as_is(ddb: Any) -> None:
    items = _order_transaction()
    items[2]["Update"] |= {"ConditionExpression": "attribute_exists(pk)"}  # no such stock item

    with pytest.raises(ClientError) as caught:
        transact_write(client=ddb, items=items, idempotency_key=KEY)

    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert not isinstance(caught.value, PermanentError)
    assert _scan(ddb, "outbox") == []


@pytest.mark.parametrize(
    ("items", "error", "match"),
    [
        ([{"Put": {"TableName": "outbox", "Item": {"pk": {"S": "x"}}}}], InvalidEffectCall, "at least one TransactPut"),
        ([TransactPut("outbox", "pk", {"a": 1}), TransactPut("outbox", "pk", {"b": 1})], InvalidEffectCall, "one item"),
        ([TransactPut("outbox", "pk", {})] + [{"ConditionCheck": {}}] * 100, InvalidEffectCall, "at most 100"),
        ([TransactPut("outbox", "pk", {}), ("Put", {})], TypeError, "takes TransactPut or TransactWriteItems"),
    ],
)
def test_fails_a_transaction_that_cannot_refuse_its_replay(
    ddb: Any, items: list[Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        transact_write(client=ddb, items=items, idempotency_key=KEY)


# --- transactional variant: the token path (Stubber) -----------------------------------------------------------------
def _expected_entry(key: str) -> dict[str, Any]:
    return {
        "Put": {
            "TableName": "outbox",
            "Item": {"pk": {"S": key}, "total": {"N": "100"}},
            "ConditionExpression": "attribute_not_exists(#key)",
            "ExpressionAttributeNames": {"#key": "pk"},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
    }


def _one_put(client: Any, name: str | None = None, total: int = 100) -> list[dict[str, Any]]:
    items = [TransactPut("outbox", "pk", {"total": total})]
    return transact_write(client=client, items=items, idempotency_key=KEY, name=name)


def _token(key: str, entries: list[dict[str, Any]]) -> str:
    canonical = json.dumps(entries, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(key.encode() + b"\0" + canonical.encode()).hexdigest()[:36]


def test_the_client_request_token_hashes_the_key_and_the_request_and_a_replay_keeps_it() -> None:
    client, stub = _stubbed()
    token = _token(KEY, [_expected_entry(KEY)])
    named = _token(f"{KEY}#refund", [_expected_entry(f"{KEY}#refund")])
    for key, expected in ((KEY, token), (KEY, token), (f"{KEY}#refund", named)):
        stub.add_response(
            "transact_write_items", {}, {"TransactItems": [_expected_entry(key)], "ClientRequestToken": expected}
        )

    with stub:
        first, again, refund = _one_put(client), _one_put(client), _one_put(client, name="refund")
        stub.assert_no_pending_responses()

    assert first == again == [{"pk": KEY, "total": Decimal(100)}]
    assert refund == [{"pk": f"{KEY}#refund", "total": Decimal(100)}]
    assert client_request_token(KEY, [_expected_entry(KEY)]) == token != named
    assert len(token) == 36 and int(token, 16) >= 0


def test_two_stages_writing_other_tables_under_one_key_send_two_tokens() -> None:
    """Before the change the token was the key's alone: staging and prod of one app in one account and Region sent
    the same token for different tables, and the second got IdempotentParameterMismatchException, a permanent
    TokenMismatch (its items are not stored)."""
    sent: list[str] = []
    for table in ("orders-staging", "orders-prod"):
        client, stub = _stubbed()
        entry = {"Put": {**_expected_entry(KEY)["Put"], "TableName": table}}
        stub.add_response(
            "transact_write_items", {}, {"TransactItems": [entry], "ClientRequestToken": _token(KEY, [entry])}
        )
        with stub:
            transact_write(client=client, items=[TransactPut(table, "pk", {"total": 100})], idempotency_key=KEY)
            stub.assert_no_pending_responses()
        sent.append(_token(KEY, [entry]))

    assert sent[0] != sent[1]


def test_a_request_that_differs_gets_another_token_and_set_order_does_not_matter() -> None:
    """A Python set serializes in hash order, which differs between processes: the token must not."""
    entry = {"Put": {**_expected_entry(KEY)["Put"]}}
    entry["Put"]["Item"] = {**entry["Put"]["Item"], "tags": {"SS": ["c", "a", "b"]}}
    shuffled = {"Put": {**entry["Put"], "Item": {**entry["Put"]["Item"], "tags": {"SS": ["b", "c", "a"]}}}}
    other = {"Put": {**entry["Put"], "Item": {**entry["Put"]["Item"], "total": {"N": "101"}}}}
    binary = {"Put": {**entry["Put"], "Item": {"pk": {"S": KEY}, "blob": {"BS": [b"\xff", b"\x00"]}}}}
    binary_turned = {"Put": {**entry["Put"], "Item": {"pk": {"S": KEY}, "blob": {"BS": [b"\x00", b"\xff"]}}}}

    assert client_request_token(KEY, [entry]) == client_request_token(KEY, [shuffled])
    assert client_request_token(KEY, [entry]) != client_request_token(KEY, [other])
    assert client_request_token(KEY, [entry]) != client_request_token(f"{KEY}#x", [entry])
    assert client_request_token(KEY, [binary]) == client_request_token(KEY, [binary_turned])
    assert len(client_request_token(KEY, [binary])) == 36


def _mismatch_then_stored(stored: dict[str, Any] | None) -> tuple[Any, Stubber]:
    client, stub = _stubbed()
    stub.add_client_error(
        "transact_write_items", service_error_code="IdempotentParameterMismatchException", http_status_code=400
    )
    gets = {"TransactItems": [{"Get": {"TableName": "outbox", "Key": {"pk": {"S": KEY}}}}]}
    stub.add_response("transact_get_items", {"Responses": [{"Item": stored} if stored else {}]}, gets)
    return client, stub


def test_a_token_reused_by_another_request_whose_items_are_not_stored_is_a_permanent_error() -> None:
    client, stub = _mismatch_then_stored(None)

    with stub, pytest.raises(TokenMismatch, match="used in the last 10 minutes by another request") as caught:
        _one_put(client)

    assert isinstance(caught.value, PermanentError)
    assert isinstance(caught.value.__cause__, ClientError)


def test_a_token_mismatch_inside_the_window_is_answered_from_the_stored_items() -> None:
    client, stub = _mismatch_then_stored({"pk": {"S": KEY}, "total": {"N": "100"}, "at": {"S": "10:00"}})

    with stub:
        replayed = _one_put(client)

    assert replayed == [{"pk": KEY, "total": Decimal(100), "at": "10:00"}]


def test_a_token_mismatch_with_other_stored_values_is_an_item_mismatch() -> None:
    client, stub = _mismatch_then_stored({"pk": {"S": KEY}, "total": {"N": "100"}})

    with stub, pytest.raises(ItemMismatch) as caught:
        _one_put(client, total=101)

    assert caught.value.attributes == ("total",)


def test_a_transaction_in_progress_under_the_same_token_is_transient() -> None:
    client, stub = _stubbed()
    stub.add_client_error("transact_write_items", service_error_code="TransactionInProgressException")

    with stub, pytest.raises(ClientError) as caught:
        _one_put(client)

    assert caught.value.response["Error"]["Code"] == "TransactionInProgressException"
    assert not isinstance(caught.value, PermanentError)


# --- the cancellation reasons (issue 55, item 2) ------------------------------------------------------------------
#: What :func:`_cancelled` says is stored: the first execution's items, at 09:00 (a replay is sent at 10:00).
STORED_ITEMS = [
    {"pk": {"S": KEY}, "total": {"N": "100"}, "at": {"S": "09:00"}},
    {"pk": {"S": KEY}, "sk": {"S": "ordered"}, "kind": {"S": "ordered"}},
]
REPLAYED = [{"pk": KEY, "total": Decimal(100), "at": "09:00"}, {"pk": KEY, "sk": "ordered", "kind": "ordered"}]


def _cancelled(*codes: str, with_items: bool = True) -> tuple[Any, Stubber]:
    """A client whose ``TransactWriteItems`` of :func:`_order_transaction` (two keyed puts, one entry of the
    caller's own) is cancelled with ``codes``, one per entry; a refused keyed put's reason carries its stored item
    (:data:`STORED_ITEMS`) unless not ``with_items``."""
    client, stub = _stubbed()
    reasons = [{"Code": code, "Message": f"{code} here"} for code in codes]
    for reason, item in zip(reasons, STORED_ITEMS, strict=False):  # the keyed puts come first
        if reason["Code"] == "ConditionalCheckFailed" and with_items:
            reason["Item"] = item
    stub.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        modeled_fields={"CancellationReasons": reasons},
    )
    return client, stub


def test_a_conflict_beside_a_refused_keyed_put_during_a_replay_is_transient_not_a_mismatch() -> None:
    """The issue's scenario: one keyed item refused by its condition, the other in conflict with another write.
    The conflict proves nothing (the item may be there): before, the record went to the DLQ as ItemMismatch."""
    client, stub = _cancelled("ConditionalCheckFailed", "TransactionConflict", "None")

    with stub, pytest.raises(ClientError) as caught:
        transact_write(client=client, items=_order_transaction(), idempotency_key=KEY)

    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert not isinstance(caught.value, PermanentError)


@pytest.mark.parametrize(
    ("codes", "outcome"),
    [
        (("ConditionalCheckFailed", "ConditionalCheckFailed", "None"), "replayed"),
        (("ConditionalCheckFailed", "ConditionalCheckFailed", "TransactionConflict"), "replayed"),
        (("ConditionalCheckFailed", "ConditionalCheckFailed", "ValidationError"), "replayed"),
        (("ConditionalCheckFailed", "ConditionalCheckFailed", "ItemCollectionSizeLimitExceeded"), "replayed"),
        (("TransactionConflict", "ConditionalCheckFailed", "ValidationError"), "transient"),
        (("ConditionalCheckFailed", "None", "None"), ItemMismatch),
        (("ConditionalCheckFailed", "ThrottlingError", "None"), "transient"),
        (("ProvisionedThroughputExceeded", "ConditionalCheckFailed", "None"), "transient"),
        (("ConditionalCheckFailed", "SomeCodeNotYetDocumented", "None"), "transient"),
        (("None", "None", "ConditionalCheckFailed"), "transient"),
        (("None", "None", "TransactionConflict"), "transient"),
        (("None", "None", "ValidationError"), TransactionRefused),
        (("ItemCollectionSizeLimitExceeded", "None", "None"), TransactionRefused),
        (("ConditionalCheckFailed", "ValidationError", "None"), TransactionRefused),
    ],
)
def test_every_cancellation_reason_is_stored_absent_transient_or_permanent(
    codes: tuple[str, ...], outcome: Any
) -> None:
    """``CANCELLATION_REASONS``: only ``None`` proves a keyed item absent, ``ConditionalCheckFailed`` proves it
    stored, and the caller's own failed condition stays transient."""
    client, stub = _cancelled(*codes)

    with stub:
        if outcome == "replayed":
            assert transact_write(client=client, items=_order_transaction(), idempotency_key=KEY) == REPLAYED
            return
        with pytest.raises(ClientError if outcome == "transient" else outcome) as caught:
            transact_write(client=client, items=_order_transaction(), idempotency_key=KEY)

    assert isinstance(caught.value, PermanentError) == (outcome != "transient")
    if outcome is TransactionRefused:
        assert all(f"{code} here" in str(caught.value) for code in codes if CANCELLATION_REASONS[code] == PERMANENT)


def test_a_refused_keyed_put_without_its_item_is_read_back() -> None:
    client, stub = _cancelled("ConditionalCheckFailed", "ConditionalCheckFailed", "None", with_items=False)
    gets = [
        {"Get": {"TableName": "outbox", "Key": {"pk": {"S": KEY}}}},
        {"Get": {"TableName": "events", "Key": {"pk": {"S": KEY}, "sk": {"S": "ordered"}}}},
    ]
    stub.add_response("transact_get_items", {"Responses": [{"Item": i} for i in STORED_ITEMS]}, {"TransactItems": gets})

    with stub:
        assert transact_write(client=client, items=_order_transaction(), idempotency_key=KEY) == REPLAYED
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    "reasons",
    [[{"Code": "ConditionalCheckFailed"}], [{"Code": "ConditionalCheckFailed"}, {}, {}]],
    ids=["one of 3", "no code"],
)
def test_reasons_that_do_not_answer_each_entry_are_transient(reasons: list[dict[str, Any]]) -> None:
    """A reason missing for an entry, or a reason without a code, proves nothing: the error goes up as it is."""
    client, stub = _stubbed()
    stub.add_client_error(
        "transact_write_items",
        service_error_code="TransactionCanceledException",
        modeled_fields={"CancellationReasons": reasons},
    )

    with stub, pytest.raises(ClientError) as caught:
        transact_write(client=client, items=_order_transaction(), idempotency_key=KEY)

    assert not isinstance(caught.value, PermanentError)


def test_the_cancellation_reasons_table_names_every_code_aws_documents() -> None:
    """Amazon DynamoDB API Reference, TransactWriteItems, TransactionCanceledException: every documented code has a
    row, and nothing but ``None`` says an item is absent."""
    documented = {
        "None",
        "ConditionalCheckFailed",
        "ItemCollectionSizeLimitExceeded",
        "TransactionConflict",
        "ProvisionedThroughputExceeded",
        "ThrottlingError",
        "ValidationError",
    }
    assert set(CANCELLATION_REASONS) == documented
    assert [code for code, kind in CANCELLATION_REASONS.items() if kind == ABSENT] == ["None"]


# --- inside a declared effect ----------------------------------------------------------------------------------------
def _shipping(orders: Orders, labels: tuple[str, ...]) -> Consumer:
    """A consumer whose effect ``ship`` writes one outbox item per label with ``put_item(name=label)``, each with
    the execution's number (volatile), and returns ``[key, number]`` as stored for each."""
    create_table(orders.dynamodb, "outbox", "pk")
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, service="orders", effect_key="scoped")
    handler: Any = consumer.logger.registered_handler
    captured: Any = orders.consumer.logger.registered_handler
    handler.stream = captured.stream  # log where the test reads
    executions: list[int] = []

    @consumer.effect
    def ship(item: dict[str, Any], *, idempotency_key: str) -> list[list[Any]]:
        executions.append(1)
        stored = [
            put_item(
                client=orders.dynamodb, table_name="outbox", key_attribute="pk",
                item={"label": label, "execution": len(executions)}, volatile=("execution",),
                idempotency_key=idempotency_key, name=label,
            )
            for label in labels
        ]  # fmt: skip
        return [[s["pk"], int(s["execution"])] for s in stored]

    @consumer.record
    def handle(body: dict[str, Any]) -> list[list[Any]]:
        return ship(body["order"])

    orders.consumer = consumer
    return consumer


def test_an_effect_calling_put_item_twice_with_one_name_fails_the_record_after_the_first_write(orders: Orders) -> None:
    _shipping(orders, ("label", "label"))
    record = sqs_record(order("o-1"))

    response = orders.invoke([record])
    [line] = orders.messages(names.MSG_RECORD_FAILED)

    assert failures(response) == {record["messageId"]}
    assert line[names.FIELD_ERROR_TYPE] == "InvalidEffectCall"
    assert "dynamodb.put_item was called twice in effect 'ship' with name='label'" in line[names.FIELD_REASON]
    assert [i["pk"]["S"] for i in _scan(orders.dynamodb, "outbox")] == [f"{KEY}#label"]


def test_an_effect_re_executed_after_a_crash_before_completion_gets_its_stored_items(orders: Orders) -> None:
    _shipping(orders, ("shipment", "invoice"))
    first = orders.invoke([sqs_record(order("o-1"))])
    for stored in _scan(orders.dynamodb, IDEMPOTENCY_TABLE):  # the crash: the record never completed
        orders.dynamodb.delete_item(TableName=IDEMPOTENCY_TABLE, Key={"id": stored["id"]})

    again = orders.invoke_direct(order("o-1"))
    executed = orders.messages(names.EFFECT_EXECUTED)

    assert failures(first) == set()
    assert len(executed) == 2, "the effect ran twice"
    assert again == [[f"{KEY}#shipment", 1], [f"{KEY}#invoice", 1]], "the second execution got the first's items"
    assert len(_scan(orders.dynamodb, "outbox")) == 2


# --- each :raises condition of the docstrings (issue 55, item 6b) ---------------------------------------------------
@pytest.mark.parametrize(
    ("table", "item", "code"),
    [
        ("no-such-table", {"a": 1}, "ResourceNotFoundException"),
        ("outbox", {"blob": b"x" * (400 * 1024 + 1)}, "ValidationException"),  # an item over 400 KB
    ],
    ids=["missing-table", "item-over-400-kb"],
)
def test_put_item_raises_any_other_dynamodb_error_as_the_client_error_it_is(
    ddb: Any, table: str, item: dict[str, Any], code: str
) -> None:
    with pytest.raises(ClientError) as caught:
        put_item(client=ddb, table_name=table, key_attribute="pk", item=item, idempotency_key=KEY)

    assert caught.value.response["Error"]["Code"] == code
    assert not isinstance(caught.value, PermanentError), "transient: SQS retries it"
    assert _scan(ddb, "outbox") == []


def test_put_item_raises_throttling_as_the_client_error_it_is() -> None:
    client, stub = _stubbed()
    stub.add_client_error("put_item", service_error_code="ProvisionedThroughputExceededException")

    with stub, pytest.raises(ClientError) as caught:
        _put(client, {"a": 1})

    assert caught.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert not isinstance(caught.value, PermanentError)


def test_a_transaction_whose_refused_items_cannot_be_read_back_is_transient() -> None:
    """Every keyed put refused by its condition (a replay), the reasons without their items, and one item gone by
    the ``TransactGetItems`` read-back (a TTL deleted it): ``StoredItemGone``, never an answer made of nothing."""
    client, stub = _cancelled("ConditionalCheckFailed", "ConditionalCheckFailed", "None", with_items=False)
    stub.add_response("transact_get_items", {"Responses": [{"Item": STORED_ITEMS[0]}, {}]})

    with stub, pytest.raises(StoredItemGone, match="exists in table 'events' but its item is gone") as caught:
        transact_write(client=client, items=_order_transaction(), idempotency_key=KEY)

    assert not isinstance(caught.value, PermanentError)


@pytest.mark.parametrize(
    ("put", "options", "error", "match"),
    [
        (TransactPut("outbox", "pk", {"pk": "x"}), {}, InvalidEffectCall, "item must not hold the key attributes"),
        (TransactPut("outbox", "pk", {"a": 1}, compare=("b",)), {}, InvalidEffectCall, "compare names attributes"),
        (TransactPut("outbox", "pk", {"a": 1}), {"idempotency_key": "k" * 2049}, InvalidEffectCall, "2048-byte"),
        (TransactPut("outbox", "pk", {"a": 1}, compare="a"), {}, TypeError, "compare must be a collection"),
        (TransactPut("outbox", "pk", {"a": 1}, volatile="a"), {}, TypeError, "volatile must be a collection"),
        (TransactPut("outbox", "pk", {"a": 1.5}), {}, TypeError, "Float types are not supported"),
    ],
    ids=[
        "key-attribute-in-item",
        "compare-not-in-item",
        "key-over-2048-bytes",
        "compare-string",
        "volatile-string",
        "float",
    ],
)
def test_transact_write_refuses_what_put_item_refuses_before_any_write(
    ddb: Any, put: TransactPut, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        transact_write(client=ddb, items=[put, *_order_transaction()[2:]], **{"idempotency_key": KEY, **options})

    assert _scan(ddb, "outbox") == [] and _scan(ddb, "stock") == []


def test_transact_write_refuses_a_second_call_with_one_name_in_one_effect(ddb: Any) -> None:
    with running(EffectCall("reserve", KEY, record_key="o-1")):
        transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)
        with pytest.raises(InvalidEffectCall, match="called twice in effect 'reserve' with name=None"):
            transact_write(client=ddb, items=_order_transaction(), idempotency_key=KEY)

    assert _reserved(ddb) == 1 and len(_scan(ddb, "outbox")) == 1
