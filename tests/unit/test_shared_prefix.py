"""Issue 55, item 3, at synth: two consumers of one app on one idempotency table with one literal ``key_prefix`` and
different functions would answer each other's messages as duplicates (a refund acknowledged by the charge's record).
Construction fails with a ``ValueError`` naming both, unless both say ``shared_prefix=True``; a prefix left to the
handler (``None``) or a deploy-time one is the runtime's to guard (``Consumer(operation=...)``). Nothing synthesizes:
every check runs at construction."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk import CfnParameter, Stack

from effectively_once import IdempotencyTable, IdempotentEventConsumer, IdempotentQueueConsumer, ProcessingQueue

from .helpers import inline_function, new_stack

TABLE_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/idempotency"


def _queue_consumer(stack: Stack, name: str, table: IdempotencyTable, function: Any = None, **props: Any) -> Any:
    function = function or inline_function(stack, f"{name}Fn")
    queue = ProcessingQueue(stack, f"{name}Queue")
    return IdempotentQueueConsumer(stack, name, queue=queue, function=function, table=table, **props)


def _event_consumer(stack: Stack, name: str, table: IdempotencyTable, function: Any = None, **props: Any) -> Any:
    function = function or inline_function(stack, f"{name}Fn")
    return IdempotentEventConsumer(stack, name, function=function, table=table, **props)


def test_two_consumers_of_one_prefix_on_one_table_fail_naming_both() -> None:
    stack = new_stack()
    table = IdempotencyTable(stack, "Table")
    _queue_consumer(stack, "Charges", table, key_prefix="payments")

    with pytest.raises(ValueError) as raised:
        _queue_consumer(stack, "Refunds", table, key_prefix="payments")

    message = str(raised.value)
    assert message.startswith(
        "key_prefix of Test/Refunds (function Test/RefundsFn) must not be the key_prefix of Test/Charges (function "
        "Test/ChargesFn) on the same idempotency table"
    )
    assert "but 'payments' was given" in message and "shared_prefix=True on both" in message


def test_a_queue_and_an_event_consumer_on_other_functions_fail_too() -> None:
    stack = new_stack()
    table = IdempotencyTable(stack, "Table")
    _event_consumer(stack, "Events", table, key_prefix="payments")

    with pytest.raises(
        ValueError, match=re.escape("must not be the key_prefix of Test/Events (function Test/EventsFn)")
    ):
        _queue_consumer(stack, "Queue", table, key_prefix="payments")


def test_a_table_imported_twice_by_its_arn_is_one_table() -> None:
    stack = new_stack()
    _queue_consumer(stack, "A", IdempotencyTable.from_table_arn(stack, "T1", TABLE_ARN), key_prefix="payments")

    with pytest.raises(ValueError, match="on the same idempotency table"):
        _queue_consumer(stack, "B", IdempotencyTable.from_table_arn(stack, "T2", TABLE_ARN), key_prefix="payments")


@pytest.mark.parametrize("first", [True, False])
def test_shared_prefix_must_be_said_by_both(first: bool) -> None:
    stack = new_stack()
    table = IdempotencyTable(stack, "Table")
    _queue_consumer(stack, "A", table, key_prefix="payments", shared_prefix=first)

    with pytest.raises(ValueError, match="shared_prefix=True on both"):
        _queue_consumer(stack, "B", table, key_prefix="payments", shared_prefix=not first)


def test_allowed_pairs() -> None:
    stack = new_stack()
    table, other_table = IdempotencyTable(stack, "Table"), IdempotencyTable(stack, "Other")
    _queue_consumer(stack, "A", table, key_prefix="payments", shared_prefix=True)
    _queue_consumer(stack, "B", table, key_prefix="payments", shared_prefix=True)  # both say so
    _queue_consumer(stack, "C", table, key_prefix="refunds")  # another prefix
    _queue_consumer(stack, "D", other_table, key_prefix="payments")  # another table
    shared = inline_function(stack, "SharedFn")
    _queue_consumer(stack, "E", table, function=shared, key_prefix="orders")
    _event_consumer(stack, "F", table, function=shared, key_prefix="orders")  # one function, two triggers
    _queue_consumer(stack, "G", table)  # the prefix left to the handler: not seen at synth
    _queue_consumer(stack, "H", table)
    mode = CfnParameter(stack, "Prefix").value_as_string
    _queue_consumer(stack, "I", table, key_prefix=mode)
    _queue_consumer(stack, "J", table, key_prefix=mode)  # a deploy-time prefix: the runtime's to guard


def test_shared_prefix_must_be_a_bool() -> None:
    stack = new_stack()

    with pytest.raises(ValueError, match="shared_prefix"):
        _queue_consumer(stack, "A", IdempotencyTable(stack, "Table"), key_prefix="p", shared_prefix="yes")


def test_a_consumer_whose_constructor_failed_holds_no_prefix() -> None:
    stack = new_stack()
    table = IdempotencyTable(stack, "Table")
    with pytest.raises(ValueError, match="batch_size"):
        _queue_consumer(stack, "Broken", table, key_prefix="payments", batch_size=0)

    _queue_consumer(stack, "Charges", table, key_prefix="payments")  # no false "shared prefix" error
