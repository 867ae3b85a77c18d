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
