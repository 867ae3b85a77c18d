"""The environment contract: the runtime's settings (idempotency table, expiry, key prefix) and the payment sample's
own (ledger, provider keys)."""

from __future__ import annotations

from typing import Any

import pytest

from effectively_once_runtime import RuntimeSettings, names
from payments.settings import DEFAULT_KEY_PREFIX, Settings

BASE = {"IDEMPOTENCY_TABLE_NAME": "idem", "LEDGER_TABLE_NAME": "ledger"}


def runtime(env: dict[str, str]) -> RuntimeSettings:
    return RuntimeSettings.from_env(default_key_prefix=DEFAULT_KEY_PREFIX, env=env)


def test_defaults() -> None:
    settings, payment = runtime(BASE), Settings.from_env(BASE)

    assert settings.expiry_seconds == names.DEFAULT_EXPIRY_SECONDS == 3600
    assert settings.key_prefix == DEFAULT_KEY_PREFIX == "effectively-once/payments"
    assert payment.provider_idempotency_keys is True


def test_fails_without_table_names() -> None:
    with pytest.raises(ValueError, match="IDEMPOTENCY_TABLE_NAME"):
        runtime({})
    with pytest.raises(ValueError, match="LEDGER_TABLE_NAME"):
        Settings.from_env({})


@pytest.mark.parametrize("raw", ["0", "-5", "ten", "3600\n", " 3600", "3_600", "\u0663\u0666\u0660\u0660", "9" * 5000])
def test_fails_on_bad_expiry(raw: str) -> None:
    with pytest.raises(ValueError, match="IDEMPOTENCY_EXPIRY_SECONDS must be a positive integer of seconds"):
        runtime({**BASE, "IDEMPOTENCY_EXPIRY_SECONDS": raw})


def test_fails_on_bad_flag() -> None:
    with pytest.raises(ValueError, match="PAYMENT_PROVIDER_IDEMPOTENCY_KEYS must be true or false"):
        Settings.from_env({**BASE, "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS": "maybe"})


@pytest.mark.parametrize(
    ("value", "region"),
    [
        ("idem", None),
        ("arn:aws:dynamodb:eu-west-1:999999999999:table/idem", "eu-west-1"),
        ("arn:aws-cn:dynamodb:cn-north-1:999999999999:table/idem", "cn-north-1"),
    ],
)
def test_idempotency_table_region_comes_from_its_arn(value: str, region: str | None) -> None:
    settings = runtime({**BASE, "IDEMPOTENCY_TABLE_NAME": value})

    assert settings.table_name == value
    assert settings.table_region == region


@pytest.mark.parametrize(
    "value",
    [
        "arn:aws:sqs:us-east-1:123456789012:idem",
        "arn:aws:dynamodb:us-east-1:123456789012:table/",
        "arn:aws:dynamodb::123456789012:table/idem",
        "arn:aws:dynamodb:us-east-1:123456789012:stream/idem",
    ],
)
def test_fails_on_an_arn_that_is_not_a_table(value: str) -> None:
    with pytest.raises(
        ValueError, match=f"IDEMPOTENCY_TABLE_NAME must be a table name or a DynamoDB table ARN.*'{value}'"
    ):
        runtime({**BASE, "IDEMPOTENCY_TABLE_NAME": value})


@pytest.mark.parametrize("raw", ["effectively-once/payments\n", " payments", "pay ments", "pay\tments", "pay\x00"])
def test_fails_on_key_prefix_with_whitespace_or_control_characters(raw: str) -> None:
    with pytest.raises(ValueError, match="IDEMPOTENCY_KEY_PREFIX must be printable characters without whitespace"):
        runtime({**BASE, "IDEMPOTENCY_KEY_PREFIX": raw})


@pytest.mark.parametrize("raw", ["orders/v2", "team#orders", "paiements-\u00e9t\u00e9"])
def test_key_prefix_is_kept_as_given(raw: str) -> None:
    assert runtime({**BASE, "IDEMPOTENCY_KEY_PREFIX": raw}).key_prefix == raw


@pytest.mark.parametrize("raw", ["", "orders v2", "orders\n"])
def test_consumer_fails_on_an_unusable_default_key_prefix(raw: str) -> None:
    from effectively_once_runtime import Consumer

    with pytest.raises(ValueError, match="key_prefix must be printable characters without whitespace"):
        Consumer(key="id", key_prefix=raw)


@pytest.mark.parametrize(("prop", "kwargs"), [("key", {"key": "a["}), ("validate", {"key": "id", "validate": "[a,"})])
def test_consumer_fails_on_a_path_that_is_not_jmespath(prop: str, kwargs: dict[str, Any]) -> None:
    from effectively_once_runtime import Consumer

    with pytest.raises(ValueError, match=f"{prop} must be a JMESPath expression"):
        Consumer(key_prefix="orders", **kwargs)


# --- the key prefix's length: <prefix>#<md5 hex> must fit a DynamoDB partition key (2,048 bytes) ---------------------
LONGEST_PREFIX = "p" * names.MAX_KEY_PREFIX_BYTES
LENGTH_RULE = (
    "must be at most 2015 bytes in UTF-8: every stored idempotency key is <key_prefix>#<32 hex characters of MD5>, "
    "and a DynamoDB partition key holds at most 2048 bytes, but a 2016-byte value was given (source: Amazon DynamoDB "
    "Developer Guide, Service, account, and table quotas in Amazon DynamoDB (partition key value length: 1 to 2048 "
    "bytes); Powertools for AWS Lambda (Python), Idempotency (key_prefix#hash))"
)


def test_the_longest_key_prefix_makes_a_stored_key_of_exactly_2048_bytes() -> None:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
    from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

    class Keys(BasePersistenceLayer):  # only the key is computed: no storage
        _get_record = _put_record = _update_record = _delete_record = None  # type: ignore[assignment]

    layer = Keys()
    layer.configure(IdempotencyConfig(event_key_jmespath="order_id"), key_prefix=LONGEST_PREFIX)

    assert len(layer._get_hashed_idempotency_key({"order_id": "o-1"}).encode()) == 2048


def test_key_prefix_of_2015_bytes_is_accepted() -> None:
    assert runtime({**BASE, "IDEMPOTENCY_KEY_PREFIX": LONGEST_PREFIX}).key_prefix == LONGEST_PREFIX


@pytest.mark.parametrize("raw", ["p" * 2016, "\u00e9" * 1008], ids=["ascii", "two-byte characters"])
def test_fails_on_key_prefix_longer_than_a_partition_key_allows(raw: str) -> None:
    with pytest.raises(ValueError) as raised:
        runtime({**BASE, "IDEMPOTENCY_KEY_PREFIX": raw})

    assert str(raised.value) == f"IDEMPOTENCY_KEY_PREFIX {LENGTH_RULE}"


def test_consumer_fails_on_a_default_key_prefix_longer_than_a_partition_key_allows() -> None:
    from effectively_once_runtime import Consumer

    with pytest.raises(ValueError) as raised:
        Consumer(key="id", key_prefix="p" * 2016)

    assert str(raised.value) == f"key_prefix {LENGTH_RULE}"
