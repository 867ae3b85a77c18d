"""The orders domain of the generic runtime's tests (``test_runtime.py``, ``test_dead_letter.py``): a record function
and an effect that are not the payment sample's, keyed on a nested JMESPath; the ``orders`` fixture is in conftest."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from effectively_once_runtime import Consumer, PermanentError

from .conftest import IDEMPOTENCY_TABLE, FakeLambdaContext, is_record

KEY_PREFIX = "shop/orders"


class Unfulfillable(PermanentError):
    """A business rule of the orders domain: never retried into success."""


class Killed(BaseException):
    """The process dying inside the record function (an order with ``"kill": true``): no ``Exception``, so nothing
    catches it as one and Powertools leaves the claim in place."""


@dataclass
class Orders:
    consumer: Consumer
    dynamodb: Any
    capsys: pytest.CaptureFixture[str]
    #: The idempotency key of every executed confirmation (the provider's view).
    confirmed: list[str | None] = field(default_factory=list)

    def invoke(self, records: list[dict[str, Any]], context: Any = None) -> dict[str, Any]:
        return self.consumer.handler({"Records": records}, context or FakeLambdaContext())  # type: ignore[no-any-return]

    def invoke_direct(self, event: Any, context: Any = None) -> Any:
        return self.consumer.handler(event, context or FakeLambdaContext())

    def stored_keys(self) -> list[str]:
        """The ids of the Powertools records in the idempotency table (not the effects' result markers)."""
        return [i["id"]["S"] for i in self.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] if is_record(i)]

    def result_markers(self) -> list[str]:
        """The ids of the items of the idempotency table that are not records: un-keyed effects' markers, and result
        markers (``<prefix>#effect-result#...``, which no version writes any more: ``effect_results.py``)."""
        return [i["id"]["S"] for i in self.dynamodb.scan(TableName=IDEMPOTENCY_TABLE)["Items"] if not is_record(i)]

    def log_lines(self) -> list[dict[str, Any]]:
        out = self.capsys.readouterr().out
        return [json.loads(line) for line in out.splitlines() if line.startswith("{") and "_aws" not in line]

    def messages(self, message: str) -> list[dict[str, Any]]:
        return [line for line in self.log_lines() if line.get("message") == message]


def order(order_id: Any, total: int = 100, currency: str = "EUR", **extra: Any) -> dict[str, Any]:
    return {"order": {"id": order_id, "total": total, "currency": currency, **extra}}


def build_consumer(confirmed: list[str | None], **options: Any) -> Consumer:
    options.setdefault("effect_key", "business")  # the provider's view below is the idempotency key itself
    consumer = Consumer(
        key="order.id", validate="[order.total, order.currency]", key_prefix=KEY_PREFIX, service="orders", **options
    )

    @consumer.effect
    def confirm(item: dict[str, Any], *, idempotency_key: str | None) -> dict[str, Any]:
        if item.get("fail"):
            raise RuntimeError(f"confirmation service unavailable for {item['id']}")
        confirmed.append(idempotency_key)
        return {"confirmation": f"c-{idempotency_key}", "total": item["total"]}

    @consumer.record
    def handle(body: dict[str, Any]) -> dict[str, Any]:
        item = body["order"]
        if item.get("kill"):
            raise Killed(f"killed while processing {item['id']}")
        if item.get("unfulfillable"):
            raise Unfulfillable(f"order {item['id']} cannot be fulfilled")
        return confirm(item)

    return consumer


def _stored_key(order_id: str, prefix: str = KEY_PREFIX) -> str:
    """Powertools' stored key, computed independently: prefix, ``#``, md5 of ``json.dumps(key, sort_keys=True)``."""
    return f"{prefix}#{hashlib.md5(json.dumps(order_id, sort_keys=True).encode()).hexdigest()}"
