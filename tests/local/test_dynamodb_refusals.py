"""DynamoDB requests the local AWS refuses, as AWS does (``aws/moto_dynamodb_refusals.py``; docs/local-aws-limits.md
lists the rules, docs/moto-bugs.md reports 21 to 24 the ones moto 5.2.5 gets wrong). Each test runs on moto as it is
and with the fixes, through boto3, and checks AWS's error code and HTTP status (and AWS's message where AWS's
documentation or a public report quotes it); the rules moto already refuses are shown refused both ways. The last
test runs the server the tooling starts."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from effectively_once_local.aws import moto_dynamodb_refusals as refusals

REGION = "us-east-1"
#: Every attribute the fixes replace: (module, class, attribute).
PATCHED = (
    ("moto.dynamodb.responses", "DynamoHandler", "batch_write_item"),
    ("moto.dynamodb.responses", "DynamoHandler", "transact_write_items"),
    ("moto.dynamodb.models.dynamo_type", "DynamoType", "size"),
    ("moto.dynamodb.models.dynamo_type", "LimitedSizeDict", "__setitem__"),
    ("moto.dynamodb.parsing.executors", "UpdateExpressionExecutor", "execute"),
)


@pytest.fixture(params=[False, True], ids=["moto-as-is", "fixed"])
def fixed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """moto as it is (the fixes taken off, should another test module have applied them), or fixed; restored after."""
    for module, name, attribute in PATCHED:
        cls = getattr(__import__(module, fromlist=[name]), name)
        current = getattr(cls, attribute)
        monkeypatch.setattr(cls, attribute, inspect.unwrap(current, stop=lambda f: not hasattr(f, refusals._MARK)))
    if request.param:
        refusals.apply_dynamodb_refusals()
        refusals.apply_dynamodb_refusals()  # a second call wraps nothing twice
    return bool(request.param)


def _tables(client: Any) -> None:
    for table in ("t", "u"):
        client.create_table(
            TableName=table,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )


@pytest.fixture
def ddb(fixed: bool, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's DynamoDB in process, tables ``t`` and ``u`` (partition key ``pk``)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        _tables(client)
        yield client


def refusal(call: Callable[[], Any]) -> tuple[str, int, str] | None:
    """``(error code, HTTP status, message)`` of a refused call; ``None`` when it succeeded."""
    try:
        call()
    except ClientError as error:
        return (
            error.response["Error"]["Code"],
            error.response["ResponseMetadata"]["HTTPStatusCode"],
            error.response["Error"]["Message"],
        )
    return None


def put(key: str, **attributes: Any) -> dict[str, Any]:
    return {"PutRequest": {"Item": {"pk": {"S": key}, **attributes}}}


def delete(key: str) -> dict[str, Any]:
    return {"DeleteRequest": {"Key": {"pk": {"S": key}}}}


def keys(client: Any, table: str = "t") -> list[str]:
    return sorted(item["pk"]["S"] for item in client.scan(TableName=table)["Items"])


# --- BatchWriteItem: at most 25 requests (report 21) ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("split", "message"),
    [((26, 0), refusals.BATCH_LIST_LENGTH_MESSAGE), ((13, 13), refusals.BATCH_TOO_MANY_MESSAGE)],
    ids=["26-in-one-table", "13-and-13-in-two-tables"],
)
def test_a_batch_write_of_more_than_25_requests_is_refused(
    ddb: Any, fixed: bool, split: tuple[int, int], message: str
) -> None:
    items = {table: [put(f"k{i}") for i in range(count)] for table, count in zip(("t", "u"), split, strict=True)}
    refused = refusal(lambda: ddb.batch_write_item(RequestItems={t: r for t, r in items.items() if r}))

    if fixed:
        assert refused == ("ValidationException", 400, message)
        assert keys(ddb) == keys(ddb, "u") == [], "nothing written"
    elif split == (26, 0):
        assert refused is None and len(keys(ddb)) == 26, "moto as is writes 26 (if this fails, moto fixed it)"
    else:
        assert refused == ("ValidationException", 400, refusals.BATCH_DUPLICATES_MESSAGE), (
            "moto as is finds 'duplicates' in one key written to two tables (report 22)"
        )


def test_a_batch_write_of_25_requests_is_accepted(ddb: Any) -> None:
    assert refusal(lambda: ddb.batch_write_item(RequestItems={"t": [put(f"k{i}") for i in range(25)]})) is None
    assert len(keys(ddb)) == 25


# --- BatchWriteItem: no two requests on one item (report 22) ----------------------------------------------------------
@pytest.mark.parametrize(
    "requests",
    [
        [put("a", note={"S": "first"}), put("a", note={"S": "second"})],
        [put("a"), delete("a")],
        [delete("a"), delete("a")],
        [put("a"), put("a")],
    ],
    ids=["two-puts-other-attributes", "put-and-delete", "two-deletes", "two-equal-puts"],
)
def test_two_requests_on_one_item_are_refused(ddb: Any, fixed: bool, requests: list[dict[str, Any]]) -> None:
    refused = refusal(lambda: ddb.batch_write_item(RequestItems={"t": [put("other"), *requests]}))

    moto_refuses = requests in ([delete("a"), delete("a")], [put("a"), put("a")])
    if fixed or moto_refuses:
        assert refused == ("ValidationException", 400, refusals.BATCH_DUPLICATES_MESSAGE)
        assert keys(ddb) == [], "nothing written"
    else:
        assert refused is None, "moto as is runs both requests (if this fails, moto fixed it)"


def test_one_key_in_two_tables_is_accepted(ddb: Any, fixed: bool) -> None:
    refused = refusal(lambda: ddb.batch_write_item(RequestItems={"t": [put("a")], "u": [put("a")]}))

    if fixed:
        assert refused is None and keys(ddb) == keys(ddb, "u") == ["a"]
    else:
        assert refused == ("ValidationException", 400, refusals.BATCH_DUPLICATES_MESSAGE), "moto as is refuses it"


# --- TransactWriteItems: moto refuses as AWS does ---------------------------------------------------------------------
def _transact_put(key: str, **attributes: Any) -> dict[str, Any]:
    return {"Put": {"TableName": "t", "Item": {"pk": {"S": key}, **attributes}}}


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ([_transact_put(f"k{i}") for i in range(101)], "Member must have length less than or equal to 100"),
        ([_transact_put("a"), _transact_put("a", note={"S": "x"})], "cannot include multiple operations on one item"),
    ],
    ids=["101-actions", "one-item-twice"],
)
def test_transactions_moto_refuses_as_aws_does(ddb: Any, actions: list[dict[str, Any]], message: str) -> None:
    refused = refusal(lambda: ddb.transact_write_items(TransactItems=actions))

    assert refused is not None and refused[:2] == ("ValidationException", 400) and message in refused[2]
    assert keys(ddb) == []


# --- TransactWriteItems: ClientRequestToken (report 23) ---------------------------------------------------------------
def _reserve(key: str) -> list[dict[str, Any]]:
    """A conditional put of ``key`` and one more reservation on the stock item ``stock``."""
    return [
        {
            "Put": {
                "TableName": "t",
                "Item": {"pk": {"S": key}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
        {
            "Update": {
                "TableName": "u",
                "Key": {"pk": {"S": "stock"}},
                "UpdateExpression": "ADD reserved :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
    ]


def _reserved(client: Any) -> int:
    return int(client.get_item(TableName="u", Key={"pk": {"S": "stock"}})["Item"]["reserved"]["N"])


def test_a_token_reused_with_another_request_is_refused(ddb: Any, fixed: bool) -> None:
    ddb.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="token-1")

    refused = refusal(lambda: ddb.transact_write_items(TransactItems=_reserve("o-2"), ClientRequestToken="token-1"))

    if fixed:
        assert refused is not None and refused[:2] == ("IdempotentParameterMismatchException", 400)
        assert keys(ddb) == ["o-1"] and _reserved(ddb) == 1, "the second request wrote nothing"
    else:
        assert refused is None and keys(ddb) == ["o-1", "o-2"], "moto as is runs it (if this fails, moto fixed it)"


def test_a_token_reused_with_the_same_request_writes_nothing(ddb: Any, fixed: bool) -> None:
    ddb.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="token-1")

    refused = refusal(lambda: ddb.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="token-1"))

    if fixed:
        assert refused is None, "AWS answers the repeat as a success"
    else:
        assert refused is not None and refused[0] == "TransactionCanceledException", "moto as is runs it again"
    assert _reserved(ddb) == 1


def test_a_token_is_forgotten_10_minutes_after_its_transaction(
    ddb: Any, fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1_000.0]
    monkeypatch.setattr(refusals, "_clock", lambda: now[0])
    ddb.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="token-1")
    now[0] += refusals.TOKEN_WINDOW_SECONDS + 1

    assert (
        refusal(lambda: ddb.transact_write_items(TransactItems=_reserve("o-2"), ClientRequestToken="token-1")) is None
    )
    repeated = refusal(lambda: ddb.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="token-2"))
    assert repeated is not None and repeated[0] == "TransactionCanceledException", "a new request: its condition"
    assert keys(ddb) == ["o-1", "o-2"] and _reserved(ddb) == 2


def test_a_failed_transaction_leaves_its_token_free(ddb: Any, fixed: bool) -> None:
    ddb.put_item(TableName="t", Item={"pk": {"S": "o-1"}})
    cancelled = refusal(lambda: ddb.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="t-1"))
    assert cancelled is not None and cancelled[0] == "TransactionCanceledException"

    assert refusal(lambda: ddb.transact_write_items(TransactItems=_reserve("o-2"), ClientRequestToken="t-1")) is None
    assert keys(ddb) == ["o-1", "o-2"] and _reserved(ddb) == 1


# --- item sizes (report 24) -------------------------------------------------------------------------------------------
LIMIT = refusals.MAX_ITEM_BYTES
SIZE_CASES = {
    # name: (item beside its key "pk": "s", AWS's size of the whole item, what moto as is answers)
    "exactly-400-KiB": ({"d": {"S": "x" * (LIMIT - 4)}}, LIMIT, "refused"),
    "one-byte-over": ({"d": {"S": "x" * (LIMIT - 3)}}, LIMIT + 1, "refused"),
    "multibyte-text": ({"d": {"S": "é" * 204_798}}, LIMIT, "refused"),
    "38-digit-numbers": (
        {"n": {"NS": [str(10**37 + 10 * i + 1) for i in range(11_000)]}},
        3 + 1 + 11_000 * 20,
        "refused",
    ),
    "binary-raw-bytes": ({"d": {"B": b"x" * (LIMIT - 4)}}, LIMIT, "refused"),
    "list-overhead": ({"l": {"L": [{"S": "a"}] * 205_000}}, 3 + 1 + 3 + 205_000 * 2, "accepted"),
    "map-overhead": (
        {"m": {"M": {f"k{i:06d}": {"NULL": True} for i in range(45_600)}}},
        3 + 1 + 3 + 45_600 * 9,
        "accepted",
    ),
}


def test_aws_size_counts_as_the_developer_guide_says() -> None:
    assert refusals.aws_size({"S": "héllo"}) == 6
    assert [refusals.aws_size({"N": text}) for text in ("0", "7", "12", "123", "1000", "-0.0012500", "1E+30")] == [
        1,
        2,
        2,
        3,
        2,
        3,
        2,
    ]
    assert refusals.aws_size({"B": b"\x00" * 10}) == 10 and refusals.aws_size({"BOOL": True}) == 1
    assert refusals.aws_size({"L": [{"S": "ab"}, {"NULL": True}]}) == 3 + (1 + 2) + (1 + 1)
    assert refusals.aws_size({"M": {"key": {"N": "12"}}}) == 3 + 1 + 3 + 2
    assert refusals.aws_size({"SS": ["a", "bc"]}) == 3


@pytest.mark.parametrize("case", list(SIZE_CASES))
def test_item_sizes_are_counted_as_aws_counts(ddb: Any, fixed: bool, case: str) -> None:
    attributes, size, moto_as_is = SIZE_CASES[case]
    item = {"pk": {"S": "s"}, **attributes}
    assert refusals.item_bytes(item.items()) == size

    refused = refusal(lambda: ddb.put_item(TableName="t", Item=item))

    aws_refuses = size > LIMIT
    if fixed or (moto_as_is == "refused") == aws_refuses:
        expected = ("ValidationException", 400, "Item size has exceeded the maximum allowed size")
        assert refused == (expected if aws_refuses else None)
    else:
        assert (refused is not None) == (moto_as_is == "refused"), f"moto as is: {moto_as_is} (if not, moto fixed it)"


def test_an_update_is_checked_as_a_whole_and_a_refused_one_changes_nothing(ddb: Any, fixed: bool) -> None:
    ddb.put_item(TableName="t", Item={"pk": {"S": "s"}, "d": {"S": "x" * 250_000}, "m": {"M": {}}})

    def update(expression: str, **values: Any) -> tuple[str, int, str] | None:
        return refusal(
            lambda: ddb.update_item(
                TableName="t",
                Key={"pk": {"S": "s"}},
                UpdateExpression=expression,
                ExpressionAttributeValues={f":{name}": value for name, value in values.items()},
            )
        )

    replaced = update("SET d = :d", d={"S": "y" * 250_000})  # the item stays at 250 KB
    partial = update("SET small = :small, big = :big", small={"S": "s"}, big={"S": "z" * 200_000})  # 450 KB
    nested = update("SET m.big = :big", big={"S": "z" * 200_000})  # 450 KB too
    stored = ddb.get_item(TableName="t", Key={"pk": {"S": "s"}})["Item"]

    too_large = ("ValidationException", 400, "Item size to update has exceeded the maximum allowed size")
    if fixed:
        assert (replaced, nested, partial) == (None, too_large, too_large)
        assert stored == {"pk": {"S": "s"}, "d": {"S": "y" * 250_000}, "m": {"M": {}}}, (
            "the refused ones changed nothing"
        )
    else:
        assert (replaced, nested, partial) == (too_large, None, too_large), "moto as is (if not, moto fixed it)"
        assert "big" in stored["m"]["M"] and "small" in stored, "moto as is keeps a refused update's first action"


def test_a_batch_with_an_item_over_the_limit_writes_nothing(ddb: Any, fixed: bool) -> None:
    refused = refusal(
        lambda: ddb.batch_write_item(RequestItems={"t": [put("a"), put("b", d={"S": "x" * (LIMIT + 1)})]})
    )

    assert refused == ("ValidationException", 400, "Item size has exceeded the maximum allowed size")
    assert keys(ddb) == ([] if fixed else ["a"]), "moto as is writes the puts before the refused one"


# --- the server the tooling starts ------------------------------------------------------------------------------------
def test_the_local_aws_server_refuses_what_aws_refuses() -> None:
    # python -m effectively_once_local.aws.moto_patches: every patch applied, in its own process.
    from effectively_once_local.aws.server import MotoServer, aws_env

    with MotoServer() as aws:
        env = aws_env(aws.endpoint)
        client = boto3.client(
            "dynamodb",
            endpoint_url=aws.endpoint,
            region_name=REGION,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        )
        _tables(client)
        too_many = refusal(lambda: client.batch_write_item(RequestItems={"t": [put(f"k{i}") for i in range(26)]}))
        twice = refusal(lambda: client.batch_write_item(RequestItems={"t": [put("a"), delete("a")]}))
        client.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="token-1")
        repeated = refusal(
            lambda: client.transact_write_items(TransactItems=_reserve("o-1"), ClientRequestToken="token-1")
        )
        mismatch = refusal(
            lambda: client.transact_write_items(TransactItems=_reserve("o-2"), ClientRequestToken="token-1")
        )
        big_list = refusal(
            lambda: client.put_item(TableName="t", Item={"pk": {"S": "s"}, **SIZE_CASES["list-overhead"][0]})
        )
        numbers = refusal(
            lambda: client.put_item(TableName="t", Item={"pk": {"S": "n"}, **SIZE_CASES["38-digit-numbers"][0]})
        )

        assert too_many == ("ValidationException", 400, refusals.BATCH_LIST_LENGTH_MESSAGE)
        assert twice == ("ValidationException", 400, refusals.BATCH_DUPLICATES_MESSAGE)
        assert repeated is None and _reserved(client) == 1
        assert mismatch is not None and mismatch[:2] == ("IdempotentParameterMismatchException", 400)
        assert big_list == ("ValidationException", 400, "Item size has exceeded the maximum allowed size")
        assert numbers is None and keys(client) == ["n", "o-1"]
