"""Issue 55, item 1b: a conditional write whose answer is lost after DynamoDB wrote it, sent again by botocore, meets
its own item, and that is no other attempt. Powertools' in-progress claim carries this attempt's token
(``claims``): before it, the first delivery failed as "already in progress" and its key stayed held until the
in-progress expiry. The sample's ledger and the orders example's outbox answered their own retried put as a replay.
Through a ``Consumer``'s handler (and the writers' own calls) against moto's DynamoDB in process, the loss injected
at botocore's retry handler (``lose_responses``)."""

from __future__ import annotations

import importlib.util
import time
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

from effectively_once_runtime import names
from effectively_once_runtime.claims import guard_claims
from payments.gateway import LedgerGateway
from payments.model import Payment

from .conftest import IDEMPOTENCY_TABLE, LEDGER_TABLE, REGION, create_table, failures, lose_responses, sqs_record
from .orders_domain import Orders, build_consumer, order

CLAIM = b'"INPROGRESS"'


class AuditedLayer(DynamoDBPersistenceLayer):
    """A user's subclass with its own ``_put_record``: the token wraps it, it still runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.puts: list[str] = []

    def _put_record(self, data_record: Any) -> None:
        self.puts.append(data_record.status)
        super()._put_record(data_record=data_record)


def _on(orders: Orders, client: Any, layer: type[DynamoDBPersistenceLayer] = DynamoDBPersistenceLayer) -> None:
    consumer = build_consumer(orders.confirmed, persistence_layer=partial(layer, boto3_client=client))
    consumer.logger.registered_handler.stream = orders.consumer.logger.registered_handler.stream
    orders.consumer = consumer


def _records(orders: Orders) -> list[dict[str, Any]]:
    records = orders.stored_keys()
    return [i for i in orders.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] if i["id"]["S"] in records]


def _claim_of_another_attempt(ddb: Any, record_id: str, token: str | None) -> None:
    """An unexpired in-progress record another attempt wrote (``token``: its token, ``None``: written without one)."""
    now = time.time()
    item = {
        "id": {"S": record_id},
        "status": {"S": "INPROGRESS"},
        "expiration": {"N": str(int(now) + 3600)},
        "in_progress_expiration": {"N": str(int(now * 1000) + 600_000)},
    }
    if token is not None:
        item[names.ATTEMPT_TOKEN_ATTR] = {"S": token}
    ddb.put_item(TableName=IDEMPOTENCY_TABLE, Item=item)


@pytest.mark.parametrize("layer", [DynamoDBPersistenceLayer, AuditedLayer], ids=["powertools", "subclass"])
def test_a_lost_answer_to_the_claim_still_runs_the_first_delivery(
    orders: Orders, layer: type[DynamoDBPersistenceLayer]
) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    lost = lose_responses(client, "PutItem", matching=CLAIM)
    _on(orders, client, layer)

    response = orders.invoke([sqs_record(order("o-1"))])

    assert lost == [1], "the claim's first answer was lost and botocore sent it again"
    assert failures(response) == set() and orders.confirmed == ["o-1"]
    [record] = _records(orders)
    assert record["status"]["S"] == "COMPLETED"
    assert len(record[names.ATTEMPT_TOKEN_ATTR]["S"]) == 32, "the claim's token stays on the record"
    if layer is AuditedLayer:
        assert orders.consumer._state is not None
        assert orders.consumer._state.persistence_store.puts == ["INPROGRESS"]  # type: ignore[attr-defined]


def test_a_retry_that_meets_another_attempts_claim_is_still_in_progress(orders: Orders) -> None:
    """Between the lost answer and the retry, the record was removed and another attempt claimed the key: the retry's
    refusal holds another token, so the delivery waits as it always did."""
    client = boto3.client("dynamodb", region_name=REGION)
    other = boto3.client("dynamodb", region_name=REGION)

    def another_attempt_claims() -> None:
        [record_id] = orders.stored_keys()
        other.delete_item(TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": record_id}})
        _claim_of_another_attempt(other, record_id, "another-attempt")

    lose_responses(client, "PutItem", matching=CLAIM, before_retry=another_attempt_claims)
    _on(orders, client)
    record = sqs_record(order("o-2"))

    response = orders.invoke([record])

    assert failures(response) == {record["messageId"]} and orders.confirmed == []
    [stored] = _records(orders)
    assert stored[names.ATTEMPT_TOKEN_ATTR]["S"] == "another-attempt"


@pytest.mark.parametrize("token", [None, "another-attempt"], ids=["written-without-token", "another-token"])
def test_an_unexpired_claim_of_another_attempt_holds_the_key(orders: Orders, token: str | None) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    _on(orders, client)
    first = orders.invoke([sqs_record(order("o-3"))])  # learn the record's id
    [record_id] = orders.stored_keys()
    orders.dynamodb.delete_item(TableName=IDEMPOTENCY_TABLE, Key={"id": {"S": record_id}})
    _claim_of_another_attempt(orders.dynamodb, record_id, token)
    record = sqs_record(order("o-3"))

    response = orders.invoke([record])

    assert failures(first) == set() and failures(response) == {record["messageId"]}
    assert orders.confirmed == ["o-3"], "only the first delivery ran"


def test_only_powertools_dynamodb_layers_carry_the_token() -> None:
    class Elsewhere(BasePersistenceLayer):  # a store of another kind: Powertools' behaviour, unchanged
        _get_record = _put_record = _update_record = _delete_record = None  # type: ignore[assignment]

    store = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=boto3.client("dynamodb", REGION))

    guard = partial(guard_claims, logger=Logger(service="test"), expiry_seconds=3600)
    assert guard(Elsewhere()) is False
    assert guard(store) is True and guard(store) is True


# --- the sample's ledger and the orders example's outbox: their own put sent again is no replay ---------------------
def test_the_ledgers_own_put_sent_again_is_a_new_charge_not_a_replay(orders: Orders) -> None:
    client = boto3.client("dynamodb", region_name=REGION)
    create_table(client, LEDGER_TABLE, "charge_id")
    lost = lose_responses(client, "PutItem", matching=b'"charge_id"')
    gateway = LedgerGateway(LEDGER_TABLE, client=client)

    charge = gateway.charge(Payment("pay-1", "acct-1", 1000, "EUR"), idempotency_key="pay-1")
    again = gateway.charge(Payment("pay-1", "acct-1", 1000, "EUR"), idempotency_key="pay-1")

    assert lost == [1] and not charge.replayed
    assert again.replayed and again.charged_at == charge.charged_at, "a real repeat is still a replay"
    assert gateway.replays == 1


def test_the_outboxs_own_put_sent_again_is_no_replay(orders: Orders, monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "orders" / "src" / "orders.py"
    spec = importlib.util.spec_from_file_location("examples_orders_outbox", path)
    assert spec is not None and spec.loader is not None
    outbox = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(outbox)
    client = boto3.client("dynamodb", region_name=REGION)
    create_table(client, "outbox", outbox.OUTBOX_KEY)
    monkeypatch.setenv(outbox.ENV_OUTBOX_TABLE, "outbox")
    monkeypatch.setattr(outbox, "_outbox", client)
    lost = lose_responses(client, "PutItem", matching=b'"confirmed_at"')
    order_body = {"order_id": "o-1", "customer": "c-1", "total": 5}

    first = outbox.confirm(order_body, idempotency_key="examples/orders#confirm_order#o-1")
    again = outbox.confirm(order_body, idempotency_key="examples/orders#confirm_order#o-1")

    assert lost == [1] and first == {"order_id": "o-1", "replayed": False}
    assert again == {"order_id": "o-1", "replayed": True}
