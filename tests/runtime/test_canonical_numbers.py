"""Issue 33, item 3: one number, one key. ``{"order_id": 1234}`` and ``{"order_id": 1234.0}`` are one record and one
effect, and ``validate`` compares numbers canonically, in the runtime and in the chaos tooling's inputs
(``identity.canonical_numbers``, the one canonicaliser). The migration: records written before (under the old key
or validation hash of an integral float) still answer their redeliveries while they live (``legacy_hashes``).
Against moto's DynamoDB."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError

from effectively_once_local.runner.async_poller import async_event_key
from effectively_once_local.traffic.chaos_input import body_key, compile_key
from effectively_once_runtime import Consumer, events, names
from effectively_once_runtime.identity import canonical_numbers, has_integral_float

from .conftest import IDEMPOTENCY_TABLE, FakeLambdaContext, _CurrentStdout

pytestmark = pytest.mark.usefixtures("aws")

PREFIX = "tests/numbers"


class Orders:
    """A consumer keyed on ``order_id`` whose effect ``charge`` records each key it is called with."""

    def __init__(self, validate: str | None = None) -> None:
        self.consumer = Consumer(key="order_id", key_prefix=PREFIX, validate=validate, effect_key="scoped")
        self.consumer.logger.registered_handler.stream = _CurrentStdout()  # type: ignore[attr-defined]
        self.charged: list[str] = []

        @self.consumer.effect
        def charge(order: dict[str, Any], *, idempotency_key: str) -> str:
            self.charged.append(idempotency_key)
            return f"ch-{len(self.charged)}"

        @self.consumer.record
        def handle(order: dict[str, Any]) -> Any:
            return {"charge": charge(order)}

    def __call__(self, order: dict[str, Any]) -> Any:
        return self.consumer.handler(order, FakeLambdaContext())


def test_the_canonicaliser_makes_integral_floats_integers_and_keeps_the_rest() -> None:
    value = {"a": 1234.0, "b": [-0.0, 12.5, "1234.0", True, None], "c": {"d": 1e3}}

    assert canonical_numbers(value) == {"a": 1234, "b": [0, 12.5, "1234.0", True, None], "c": {"d": 1000}}
    assert json.dumps(canonical_numbers(value)) == '{"a": 1234, "b": [0, 12.5, "1234.0", true, null], "c": {"d": 1000}}'
    assert has_integral_float(value) and not has_integral_float(canonical_numbers(value))
    assert canonical_numbers(float("inf")) == float("inf")


def test_an_integral_float_key_is_the_integer_key_one_record_one_effect() -> None:
    """Before the change: two records and two effects, ``...#1234`` and ``...#1234.0``, a provider charged twice."""
    orders = Orders()

    first, again = orders({"order_id": 1234}), orders({"order_id": 1234.0})

    assert first == again == {"charge": "ch-1"}
    assert orders.charged == [f"{PREFIX}#charge#1234"]


def test_minus_zero_is_zero() -> None:
    orders = Orders()

    orders({"order_id": -0.0})
    orders({"order_id": 0})

    assert orders.charged == [f"{PREFIX}#charge#0"]


def test_a_string_key_is_text_never_a_number() -> None:
    """Documented: ``"1234"`` and ``1234`` are two records (a producer's JSON type is part of its key); their key
    text is the same, ``1234``, so the effect's key is too: the second record calls the effect with the first's key,
    and a keyed provider answers it as a replay (effect results travel in each record, so the first's answer
    nothing for the second)."""
    orders = Orders()

    orders({"order_id": "1234"})
    orders({"order_id": 1234})

    store = orders.consumer.state.persistence_store
    assert store._generate_hash("1234") != store._generate_hash(1234), "two records"
    assert orders.charged == [f"{PREFIX}#charge#1234"] * 2, "one effect key"


def test_validate_compares_numbers_canonically() -> None:
    """Before the change: 100.0 against a stored 100 was an ``IdempotencyValidationError``."""
    orders = Orders(validate="[total]")

    orders({"order_id": "o-1", "total": 100})
    again = orders({"order_id": "o-1", "total": 100.0})

    assert again == {"charge": "ch-1"} and len(orders.charged) == 1
    with pytest.raises(IdempotencyValidationError):
        orders({"order_id": "o-1", "total": 100.5})


def test_the_chaos_tooling_keys_numbers_as_the_runtime_does() -> None:
    path = compile_key("order_id")

    assert body_key(path, '{"order_id": 1234.0}') == body_key(path, '{"order_id": 1234}') == "1234"
    assert body_key(compile_key("[order_id, line]"), '{"order_id": 7.0, "line": 2}') == "[7,2]"
    event = {"version": "0", "id": "e", "detail-type": "Order", "source": "shop", "detail": {"order_id": 5.0}}
    assert async_event_key(events.compile_expression("key", "order_id"), event) == "5"


# --- the migration: records written before the change ---------------------------------------------------------


def _write_legacy_record(order: dict[str, Any], validate: str | None, result: Any) -> None:
    """A record as 0.3 wrote it: Powertools over the key and validation as given, integral floats hashed as
    written, under the consumer's key prefix."""
    store = DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto_config=None)
    config = IdempotencyConfig(event_key_jmespath="order_id", payload_validation_jmespath=validate or "")

    @idempotent_function(data_keyword_argument="record", persistence_store=store, config=config, key_prefix=PREFIX)
    def handle(record: dict[str, Any]) -> Any:
        return result

    handle(record=order)


def test_a_record_under_the_old_key_answers_its_redelivery(capsys: pytest.CaptureFixture[str]) -> None:
    """Without the migration the redelivery ran again under the new key ``...#1234``: a second charge."""
    _write_legacy_record({"order_id": 1234.0}, None, {"charge": "ch-before"})
    orders = Orders()

    again = orders({"order_id": 1234.0})

    assert again == {"charge": "ch-before"} and orders.charged == []
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [line.get("message") for line in lines].count(names.MSG_LEGACY_HASH) == 1


def test_a_record_with_the_old_validation_hash_answers_its_redelivery() -> None:
    """Without the migration the redelivery was an ``IdempotencyValidationError``: the DLQ for a genuine repeat."""
    _write_legacy_record({"order_id": "o-2", "total": 100.0}, "[total]", {"charge": "ch-before"})
    orders = Orders(validate="[total]")

    assert orders({"order_id": "o-2", "total": 100.0}) == {"charge": "ch-before"}
    with pytest.raises(IdempotencyValidationError):
        orders({"order_id": "o-2", "total": 101.0})
    assert orders.charged == []


def test_an_old_key_record_of_another_payload_is_still_refused() -> None:
    _write_legacy_record({"order_id": 77.0, "total": 5}, "[total]", {"charge": "ch-before"})
    orders = Orders(validate="[total]")

    with pytest.raises(IdempotencyValidationError):
        orders({"order_id": 77.0, "total": 6})
    assert orders.charged == []


def test_the_legacy_read_is_only_for_keys_that_held_an_integral_float(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every other key hashes as before: no extra read for it."""
    orders = Orders()
    reads: list[str] = []
    store = orders.consumer.state.persistence_store
    real = store._get_record
    monkeypatch.setattr(store, "_get_record", lambda key: reads.append(key) or real(key))

    orders({"order_id": "o-3"})
    orders({"order_id": 12})
    assert reads == []
    orders({"order_id": 13.0})
    assert len(reads) == 1 and reads[0].startswith(f"{PREFIX}#")


def _set_legacy_record(order_id: float, status: str, written_ago: int) -> None:
    """Rewrite the record 0.3 wrote under the old key of ``order_id``: ``status``, written ``written_ago`` seconds
    ago (its expiration: that plus the handler's expiry), no in-progress expiry."""
    import hashlib
    import time

    import boto3

    from .conftest import HANDLER_ENV, REGION

    record_id = f"{PREFIX}#{hashlib.md5(json.dumps(order_id).encode()).hexdigest()}"  # noqa: S324 - Powertools' id
    expiration = int(time.time()) - written_ago + int(HANDLER_ENV["IDEMPOTENCY_EXPIRY_SECONDS"])
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=IDEMPOTENCY_TABLE,
        Item={"id": {"S": record_id}, "status": {"S": status}, "expiration": {"N": str(expiration)}},
    )


def test_a_stale_claim_under_the_old_key_holds_nothing() -> None:
    """Issue 55, item 4a, on the old key's path: a claim without an in-progress expiry, older than Lambda's longest
    timeout and the margin, no longer holds the key (before: 'in progress' until its expiration, days away)."""
    from effectively_once_runtime.claims import STALE_CLAIM_AFTER_SECONDS

    _set_legacy_record(55.0, "INPROGRESS", STALE_CLAIM_AFTER_SECONDS + 5)
    orders = Orders()

    assert orders({"order_id": 55.0}) == {"charge": "ch-1"} and len(orders.charged) == 1


def test_a_fresh_claim_under_the_old_key_still_holds_it() -> None:
    from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

    _set_legacy_record(56.0, "INPROGRESS", 30)
    orders = Orders()

    with pytest.raises(IdempotencyAlreadyInProgressError, match="written before numbers were canonical"):
        orders({"order_id": 56.0})
    assert orders.charged == []


def test_an_unknown_status_under_the_old_key_is_permanent_and_named() -> None:
    from effectively_once_runtime import UnknownRecordStatus

    _set_legacy_record(57.0, "FAILED", 30)
    orders = Orders()

    with pytest.raises(UnknownRecordStatus, match="holds status 'FAILED'"):
        orders({"order_id": 57.0})
    assert orders.charged == []
