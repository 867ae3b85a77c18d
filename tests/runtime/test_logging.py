"""The handler's log lines carry the fields the Logs Insights query definitions read (docs/observability.md)."""

from __future__ import annotations

import re
from typing import Any

from effectively_once.observability import (
    DUPLICATE_DELIVERIES_QUERY,
    IDEMPOTENCY_REJECTIONS_QUERY,
    OUTCOME_MESSAGES,
    REJECTION_MESSAGES,
)

from .conftest import Env, payment, redeliver, sqs_record


def _query_fields(query: str) -> set[str]:
    """Log fields a query reads: its ``fields`` list, plus the ``by`` field; ``@`` fields are CloudWatch's own."""
    first = query.splitlines()[0]
    assert first.startswith("fields ")
    names = {name.strip() for name in first[len("fields ") :].split(",")}
    names.update(re.findall(r"\bby (\w+)", query))
    return {name for name in names if not name.startswith("@")}


def _by_message(lines: list[dict[str, Any]], messages: tuple[str, ...]) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("message") in messages]


def test_duplicate_query_fields_are_in_every_delivery_outcome_line(aws: Env, log_lines: Any) -> None:
    record = sqs_record(payment("dup-1"))
    aws.invoke([record])
    aws.invoke([redeliver(record)])

    outcomes = _by_message(log_lines(), OUTCOME_MESSAGES)

    assert [line["message"] for line in outcomes] == ["record processed", "duplicate suppressed"]
    for line in outcomes:
        assert _query_fields(DUPLICATE_DELIVERIES_QUERY) <= set(line), line
        assert line["correlation_id"] == "dup-1" and line["message_id"] == record["messageId"]
    assert [line["receive_count"] for line in outcomes] == [1, 2]


def test_rejections_query_finds_a_validation_error_with_its_error_name(aws: Env, log_lines: Any) -> None:
    aws.invoke([sqs_record(payment("rej-1", amount=1000))])
    # A second, valid payment in the same batch: the rejected record fails alone.
    aws.invoke([sqs_record(payment("rej-1", amount=2000)), sqs_record(payment("rej-2"))])

    (rejected,) = [line for line in log_lines() if line.get("message") == "idempotency rejected"]

    assert "idempotency rejected" in REJECTION_MESSAGES
    assert rejected["idempotency_error"] == "IdempotencyValidationError"
    assert rejected["correlation_id"] == "rej-1"
    assert rejected["idempotency_key"] == "rej-1"
    assert {"correlation_id", "idempotency_key", "message_id", "receive_count", "message"} <= set(rejected)
    assert "idempotency_error" in _query_fields(IDEMPOTENCY_REJECTIONS_QUERY)
