"""One rule, one place: the chaos input's "missing key" is the runtime's. A body the runtime rejects before its record
function runs (no key by Powertools' ``is_missing_idempotency_key``, or a key search that fails) is a line without a
key to the chaos input (``body_key`` is ``None``), and a body the runtime processes has the runtime's key text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from effectively_once_local.traffic.chaos_input import InputFileError, body_key, compile_key
from effectively_once_runtime import Consumer
from effectively_once_runtime.errors import InvalidRecord

from ..runtime.conftest import HANDLER_ENV, IDEMPOTENCY_TABLE, REGION, create_table

CASES = [
    ("order_id", {"order_id": "o-1"}),
    ("order_id", {"order_id": 0}),
    ("order_id", {"order_id": False}),
    ("order_id", {"order_id": {"n": 1}}),
    ("order_id", {"order_id": ""}),
    ("order_id", {"order_id": None}),
    ("order_id", {"order_id": []}),
    ("order_id", {"order_id": {}}),
    ("order_id", {}),
    ("order.id", {"order": {"id": "o-2"}}),
    ("order.id", {"order": "o-2"}),
    ("[account, order_id]", {"account": "a", "order_id": None}),
    ("[account, order_id]", {"other": 1}),  # a multi-select of nothing only: missing (it was "[null,null]" here)
    ("{a: account, o: order_id}", {"other": 1}),
    ("powertools_json(data).id", {"data": '{"id": "p-1"}'}),  # Powertools' functions, as the runtime searches
    ("powertools_json(data).id", {"data": "not json"}),  # a search that fails on the record
]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``process(expression, body)``: the runtime's key (``None`` when it rejects the body as ``InvalidRecord``)."""
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("DEAD_LETTER_QUEUE_URL", raising=False)
    with mock_aws():
        create_table(boto3.client("dynamodb", region_name=REGION), IDEMPOTENCY_TABLE, "id")

        def process(expression: str, body: dict[str, Any]) -> tuple[str | None, str]:
            consumer = Consumer(key=expression, key_prefix="test/keys", service="keys", effect_key="business")
            keys: list[str | None] = []

            @consumer.effect
            def note(*, idempotency_key: str | None) -> dict[str, Any]:
                keys.append(idempotency_key)  # "business": the record's own key
                return {}

            @consumer.record
            def handle(_body: dict[str, Any]) -> dict[str, Any]:
                return note()

            try:
                consumer.process(body)
            except InvalidRecord as exc:
                return None, str(exc)
            return keys[0], ""

        yield process


@pytest.mark.parametrize("expression, body", CASES, ids=[f"{e} {json.dumps(b)}" for e, b in CASES])
def test_a_body_without_a_key_for_the_runtime_is_a_line_without_a_key_for_the_chaos_input(
    runtime: Any, expression: str, body: dict[str, Any]
) -> None:
    runtime_key, reason = runtime(expression, body)
    chaos_key = body_key(compile_key(expression), json.dumps(body))

    assert chaos_key == runtime_key, reason
    if runtime_key is None and "failed on the record" not in reason:
        assert "no idempotency key" in reason


def test_an_expression_the_runtime_refuses_is_a_bad_key_argument() -> None:
    for expression in ("order_id[", "no_such_function(order_id)"):
        with pytest.raises(ValueError):
            Consumer(key=expression, key_prefix="test/keys")
        with pytest.raises(InputFileError, match="is not a JMESPath expression the runtime accepts") as caught:
            compile_key(expression)
        # One message: the expression once, jmespath's "Invalid jmespath expression" and its drawing left out.
        assert str(caught.value).count(expression) == 1 and "\n" not in str(caught.value), caught.value
        assert "nvalid jmespath" not in str(caught.value) and "must be a JMESPath" not in str(caught.value)
