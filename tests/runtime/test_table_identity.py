"""The idempotency table reaches the handler as an ARN (what the constructs set) or a plain name (older
deployments): either way the handler finds it, including in another Region than the function's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from payments import gateway as gateway_module
from payments import handler as handler_module
from payments.settings import DEFAULT_KEY_PREFIX

from .conftest import (
    ACCOUNT,
    HANDLER_ENV,
    IDEMPOTENCY_TABLE,
    LEDGER_TABLE,
    REGION,
    Env,
    create_table,
    failures,
    payment,
    redeliver,
    sqs_record,
)

OTHER_REGION = "eu-west-1"


def _table_arn(region: str) -> str:
    return f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{IDEMPOTENCY_TABLE}"


@pytest.fixture
def deployed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Env, Any]]:
    """The handler with ``IDEMPOTENCY_TABLE_NAME`` as given by the parameter (table region, value) and the
    function in ``REGION``: (env, a client in the idempotency table's region)."""
    table_region, value = request.param
    for name, setting in {**HANDLER_ENV, "IDEMPOTENCY_TABLE_NAME": value}.items():
        monkeypatch.setenv(name, setting)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        ledger_client = boto3.client("dynamodb", region_name=REGION)
        table_client = boto3.client("dynamodb", region_name=table_region)
        create_table(table_client, IDEMPOTENCY_TABLE, "id")
        create_table(ledger_client, LEDGER_TABLE, "charge_id")
        gateway = gateway_module.LedgerGateway(LEDGER_TABLE, client=ledger_client, key_prefix=DEFAULT_KEY_PREFIX)
        gateway_module.set_gateway_factory(lambda settings: gateway)
        handler_module.reset()
        try:
            yield Env(dynamodb=ledger_client, gateway=gateway), table_client
        finally:
            gateway_module.set_gateway_factory(None)
            handler_module.reset()


def _charge_twice(env: Env) -> None:
    record = sqs_record(payment("p-identity"))
    assert failures(env.invoke([record])) == set()
    assert failures(env.invoke([redeliver(record)])) == set()
    assert env.gateway.calls == 1, "the redelivery must be answered from the idempotency record"
    assert env.charges_for("p-identity") == 1


@pytest.mark.parametrize("deployed", [(OTHER_REGION, _table_arn(OTHER_REGION))], indirect=True)
def test_table_in_another_region_is_reached_through_its_arn(deployed: tuple[Env, Any]) -> None:
    env, table_client = deployed
    _charge_twice(env)
    (record,) = table_client.scan(TableName=IDEMPOTENCY_TABLE)["Items"]
    assert record["status"]["S"] == "COMPLETED"
    assert handler_module.consumer.state.persistence_store.client.meta.region_name == OTHER_REGION


@pytest.mark.parametrize("deployed", [(REGION, _table_arn(REGION))], indirect=True)
def test_table_arn_in_the_functions_region_is_reached(deployed: tuple[Env, Any]) -> None:
    env, table_client = deployed
    _charge_twice(env)
    assert len(table_client.scan(TableName=IDEMPOTENCY_TABLE)["Items"]) == 1


@pytest.mark.parametrize("deployed", [(REGION, IDEMPOTENCY_TABLE)], indirect=True)
def test_plain_table_name_is_still_reached_in_the_functions_region(deployed: tuple[Env, Any]) -> None:
    env, table_client = deployed
    _charge_twice(env)
    assert len(table_client.scan(TableName=IDEMPOTENCY_TABLE)["Items"]) == 1
    assert handler_module.consumer.state.persistence_store.client.meta.region_name == REGION
