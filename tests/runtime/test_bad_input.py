"""Bad input, sent on purpose (issue 12, section 8): never a second charge, never silently accepted or swallowed,
never a crash of the batch. Every bad record fails alone: without ``DEAD_LETTER_QUEUE_URL`` (the consumer's
``dead_letter_on_first_sight=False``) as a batch item failure of that record alone, with it (the default, issue 14)
sent to the DLQ on first sight and reported done, so it holds back nothing."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import pytest

from payments.gateway import ProviderKeyMismatch
from payments.model import InvalidPayment, Payment, parse_payment
from payments.persistence import LEGACY_PAYLOAD_VALIDATION_JMESPATH, PAYLOAD_VALIDATION_JMESPATH
from payments.settings import DEFAULT_KEY_PREFIX

from .conftest import (
    HANDLER_ENV,
    IDEMPOTENCY_TABLE,
    Env,
    failures,
    payment,
    queue_bodies,
    redeliver,
    sqs_record,
    use_dead_letter_queue,
)

GOOD = '"account_id": "acct-1", "amount": 1000, "currency": "EUR"'
DIGITS_5000 = "1" * 5000
NESTED = "[" * 100_000 + "]" * 100_000

#: Raw SQS bodies, each invalid. Written as JSON text so that what JSON can say but Python's json.dumps would never
#: write (repeated keys, NaN, a 5,000-digit number) reaches the handler as a producer could send it.
BAD_BODIES = {
    "payment_id trailing newline": '{"payment_id": "pay-1\\n", ' + GOOD + "}",
    "payment_id trailing CR": '{"payment_id": "pay-1\\r", ' + GOOD + "}",
    "payment_id trailing space": '{"payment_id": "pay-1 ", ' + GOOD + "}",
    "payment_id leading newline": '{"payment_id": "\\npay-1", ' + GOOD + "}",
    "payment_id inner tab": '{"payment_id": "pay\\t1", ' + GOOD + "}",
    "payment_id NUL": '{"payment_id": "pay-1\\u0000", ' + GOOD + "}",
    "payment_id unicode digit": '{"payment_id": "pay-\\u0661", ' + GOOD + "}",
    "payment_id only newline": '{"payment_id": "\\n", ' + GOOD + "}",
    "payment_id empty": '{"payment_id": "", ' + GOOD + "}",
    "payment_id number": '{"payment_id": 1, ' + GOOD + "}",
    "payment_id boolean": '{"payment_id": true, ' + GOOD + "}",
    "payment_id null": '{"payment_id": null, ' + GOOD + "}",
    "payment_id list": '{"payment_id": ["pay-1"], ' + GOOD + "}",
    "payment_id object": '{"payment_id": {"id": "pay-1"}, ' + GOOD + "}",
    "payment_id too long": '{"payment_id": "' + "p" * 129 + '", ' + GOOD + "}",
    "account_id trailing newline": '{"payment_id": "pay-1", "account_id": "acct-1\\n", '
    + '"amount": 1000, "currency": "EUR"}',
    "account_id empty": '{"payment_id": "pay-1", "account_id": "", "amount": 1000, "currency": "EUR"}',
    "account_id number": '{"payment_id": "pay-1", "account_id": 7, "amount": 1000, "currency": "EUR"}',
    "currency trailing newline": '{"payment_id": "pay-1", "account_id": "acct-1", '
    + '"amount": 1000, "currency": "EUR\\n"}',
    "currency empty": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": 1000, "currency": ""}',
    "currency lower case": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": 1000, "currency": "eur"}',
    "amount true": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": true, "currency": "EUR"}',
    "amount false": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": false, "currency": "EUR"}',
    "amount NaN": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": NaN, "currency": "EUR"}',
    "amount Infinity": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": Infinity, "currency": "EUR"}',
    "amount -Infinity": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": -Infinity, "currency": "EUR"}',
    "amount 1e400 (a float overflowing to inf)": '{"payment_id": "pay-1", "account_id": "acct-1", '
    + '"amount": 1e400, "currency": "EUR"}',
    "amount 1e3 (a float)": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": 1e3, "currency": "EUR"}',
    "amount string": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": "1000", "currency": "EUR"}',
    "amount zero": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": 0, "currency": "EUR"}',
    "amount 5000 digits": '{"payment_id": "pay-1", "account_id": "acct-1", "amount": '
    + DIGITS_5000
    + ', "currency": "EUR"}',
    "extra field 5000 digits": '{"payment_id": "pay-1", ' + GOOD + ', "note": ' + DIGITS_5000 + "}",
    "extra field NaN": '{"payment_id": "pay-1", ' + GOOD + ', "note": NaN}',
    "deeply nested extra field": '{"payment_id": "pay-1", ' + GOOD + ', "note": ' + NESTED + "}",
    "deeply nested body": NESTED,
    "repeated amount": '{"payment_id": "pay-1", "account_id": "acct-1", '
    + '"amount": 1, "amount": 100000000, "currency": "EUR"}',
    "repeated payment_id": '{"payment_id": "pay-1", "payment_id": "pay-2", ' + GOOD + "}",
    "repeated key in an extra object": '{"payment_id": "pay-1", ' + GOOD + ', "meta": {"a": 1, "a": 2}}',
    "byte order mark": '\ufeff{"payment_id": "pay-1", ' + GOOD + "}",
    "JSON null": "null",
    "JSON string": '"pay-1"',
    "empty body": "",
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_body_is_invalid_payment_with_a_short_message(body: str) -> None:
    with pytest.raises(InvalidPayment) as raised:
        parse_payment(body)

    assert type(raised.value) is InvalidPayment
    assert len(str(raised.value)) < 400, "the reason must not echo a huge value into the logs"


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
@pytest.mark.parametrize("dlq", [False, True], ids=["no dlq", "dlq on first sight"])
def test_every_bad_body_fails_alone_in_one_batch_and_none_is_charged(
    aws: Env, monkeypatch: pytest.MonkeyPatch, fifo: bool, dlq: bool
) -> None:
    # One batch (one moto setup) for all of them; the parametrized test above names each body's reason. On a FIFO
    # queue each message has its own group, so a failure may hold back nothing but itself.
    def record(body: str | dict[str, Any], n: int) -> dict[str, Any]:
        return sqs_record(body, fifo_group=f"g{n}", sequence=n) if fifo else sqs_record(body)

    queue = use_dead_letter_queue(monkeypatch, fifo=fifo) if dlq else None
    bad = {name: record(body, n) for n, (name, body) in enumerate(BAD_BODIES.items(), start=2)}
    batch = [record(payment("p-good-1"), 1), *bad.values(), record(payment("p-good-2"), 999)]

    response = aws.invoke(batch)

    if queue is None:
        assert failures(response) == {r["messageId"] for r in bad.values()}
    else:
        assert failures(response) == set(), "every bad body is in the DLQ and done"
        assert sorted(queue_bodies(*queue)) == sorted(r["body"] for r in bad.values())
    assert aws.gateway.calls == 2
    assert sorted(i["payment_id"]["S"] for i in aws.ledger()) == ["p-good-1", "p-good-2"]
    assert len(aws.idempotency_items()) == 2, "a bad body must not leave an idempotency record"


@pytest.mark.parametrize(
    "event",
    [
        payment("pay-1\n"),
        payment("pay-1", account="acct-1\n"),
        payment("pay-1", currency="EUR\n"),
        {**payment("pay-1"), "amount": True},
        {**payment("pay-1"), "amount": float("nan")},
        {**payment("pay-1"), "amount": float("inf")},
        {**payment("pay-1"), "payment_id": 1},
    ],
    ids=["id newline", "account newline", "currency newline", "amount true", "amount nan", "amount inf", "id int"],
)
def test_bad_direct_invocation_raises_invalid_payment_and_is_never_charged(aws: Env, event: dict[str, Any]) -> None:
    with pytest.raises(InvalidPayment):
        aws.invoke_direct(event)

    assert aws.gateway.calls == 0
    assert aws.idempotency_items() == []


def test_payment_behind_poison_in_its_fifo_group_is_charged_at_once_with_the_dlq(
    aws: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The point of dead-lettering on first sight: a valid payment never waits behind poison in its group.
    sqs, url = use_dead_letter_queue(monkeypatch, fifo=True)
    batch = [
        sqs_record(payment("a1", account="acct-1"), fifo_group="acct-1", sequence=1),
        sqs_record(BAD_BODIES["amount NaN"], fifo_group="acct-1", sequence=2),
        sqs_record(payment("a2", account="acct-1"), fifo_group="acct-1", sequence=3),
        sqs_record(payment("pay-1", account="acct-1"), fifo_group="acct-1", sequence=4),
    ]
    assert failures(aws.invoke([sqs_record(payment("pay-1", account="acct-2"))])) == set()

    response = aws.invoke(batch)

    assert failures(response) == set()
    assert [i["payment_id"]["S"] for i in aws.ledger()].count("pay-1") == 1
    assert sorted(i["payment_id"]["S"] for i in aws.ledger()) == ["a1", "a2", "pay-1"]
    assert sorted(queue_bodies(sqs, url)) == sorted([batch[1]["body"], batch[3]["body"]]), (
        "the invalid payment and the payment id reused for another account are both in the DLQ"
    )


def test_trailing_newline_is_not_charged_beside_the_payment(aws: Env) -> None:
    plain = sqs_record(payment("pay-1"))
    newline = sqs_record(payment("pay-1\n"))
    other = sqs_record(payment("pay-2"))

    response = aws.invoke([plain, newline, other])

    assert failures(response) == {newline["messageId"]}
    assert sorted(i["payment_id"]["S"] for i in aws.ledger()) == ["pay-1", "pay-2"]


def test_repeated_amount_key_is_rejected_not_charged_with_the_last_value(aws: Env) -> None:
    bad = sqs_record(BAD_BODIES["repeated amount"])
    good = sqs_record(payment("p-good"))

    response = aws.invoke([bad, good])

    assert failures(response) == {bad["messageId"]}
    assert [i["amount"]["N"] for i in aws.ledger()] == ["1000"]
    with pytest.raises(InvalidPayment, match="repeated key 'amount'"):
        parse_payment(BAD_BODIES["repeated amount"])


# --- a payment id reused for another account --------------------------------------------------------------------


def _key(payment_id: str) -> str:
    """The stored idempotency key, computed the way Powertools does it (BasePersistenceLayer._generate_hash: md5 of
    ``json.dumps(value, sort_keys=True)``, prefixed with the key prefix and ``#``), independently of the handler."""
    return f"{DEFAULT_KEY_PREFIX}#{hashlib.md5(json.dumps(payment_id, sort_keys=True).encode()).hexdigest()}"


def _hash(value: Any) -> str:
    return hashlib.md5(json.dumps(value, sort_keys=True).encode()).hexdigest()


def test_stored_key_of_a_known_payment_is_unchanged(aws: Env) -> None:
    aws.invoke([sqs_record(payment("pay-0001", 1250, account="acct-07"))])

    [item] = aws.idempotency_items()

    # Pinned literally as well: records already written must keep matching.
    assert item["id"]["S"] == _key("pay-0001") == "effectively-once/payments#" + hashlib.md5(b'"pay-0001"').hexdigest()
    assert item["validation"]["S"] == _hash(["acct-07", 1250, "EUR"])
    assert PAYLOAD_VALIDATION_JMESPATH == "[account_id, amount, currency]"
    assert LEGACY_PAYLOAD_VALIDATION_JMESPATH == "[amount, currency]"


@pytest.mark.parametrize(
    "changed",
    [payment("pay-1", account="acct-2"), payment("pay-1", amount=1001), payment("pay-1", currency="USD")],
    ids=["other account", "other amount", "other currency"],
)
def test_payment_id_reused_with_another_payload_is_a_validation_error(aws: Env, changed: dict[str, Any]) -> None:
    assert failures(aws.invoke([sqs_record(payment("pay-1"))])) == set()
    reused, other = sqs_record(changed), sqs_record(payment("pay-2"))

    response = aws.invoke([reused, other])

    assert failures(response) == {reused["messageId"]}
    assert aws.gateway.calls == 2
    [charge] = [i for i in aws.ledger() if i["payment_id"]["S"] == "pay-1"]
    assert (charge["account_id"]["S"], charge["amount"]["N"], charge["currency"]["S"]) == ("acct-1", "1000", "EUR")


def test_payment_id_reused_for_another_account_directly_is_a_validation_error(aws: Env) -> None:
    from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError

    aws.invoke_direct(payment("pay-1", account="acct-1"))

    with pytest.raises(IdempotencyValidationError):
        aws.invoke_direct(payment("pay-1", account="acct-2"))
    assert aws.gateway.calls == 1


def _write_legacy_record(aws: Env, body: dict[str, Any], *, status: str = "COMPLETED") -> dict[str, Any]:
    """A record as the handler wrote it just now, before account_id joined the payload validation (hash of [amount,
    currency]): its expiration is the handler's expiry from now (an older in-progress one is taken over)."""
    stored = {
        "charge_id": body["payment_id"],
        "payment_id": body["payment_id"],
        "account_id": body["account_id"],
        "amount": body["amount"],
        "currency": body["currency"],
        "charged_at": "2026-11-29T10:00:00+00:00",
    }
    aws.dynamodb.put_item(
        TableName=IDEMPOTENCY_TABLE,
        Item={
            "id": {"S": _key(body["payment_id"])},
            "status": {"S": status},
            "expiration": {"N": str(int(time.time()) + int(HANDLER_ENV["IDEMPOTENCY_EXPIRY_SECONDS"]))},
            "data": {"S": json.dumps(stored, sort_keys=True)},
            "validation": {"S": _hash([body["amount"], body["currency"]])},
        },
    )
    return stored


def test_legacy_record_still_answers_a_legitimate_resend_as_a_duplicate(aws: Env, log_lines: Any) -> None:
    stored = _write_legacy_record(aws, payment("pay-old"))
    record = sqs_record(payment("pay-old"))

    response = aws.invoke([record])
    again = aws.invoke([redeliver(record)])
    direct = aws.invoke_direct(payment("pay-old"))

    assert failures(response) == failures(again) == set()
    assert direct == stored
    assert aws.gateway.calls == 0, "a legacy duplicate must not be charged again"
    [item] = aws.idempotency_items()
    assert item["validation"]["S"] == _hash([1000, "EUR"]), "answering a duplicate must not rewrite the record"
    accepted = [line for line in log_lines() if line.get("message") == "legacy validation hash accepted"]
    assert len(accepted) == 3 and {line["correlation_id"] for line in accepted} == {"pay-old"}


def test_legacy_in_progress_record_still_holds_back_a_concurrent_duplicate(aws: Env) -> None:
    _write_legacy_record(aws, payment("pay-busy"), status="INPROGRESS")
    record = sqs_record(payment("pay-busy"))

    response = aws.invoke([record, sqs_record(payment("pay-2"))])

    assert failures(response) == {record["messageId"]}
    assert aws.charges_for("pay-busy") == 0


@pytest.mark.parametrize(
    "changed", [payment("pay-old", amount=1001), payment("pay-old", currency="USD")], ids=["amount", "currency"]
)
def test_legacy_record_still_rejects_a_changed_amount_or_currency(aws: Env, changed: dict[str, Any]) -> None:
    _write_legacy_record(aws, payment("pay-old"))
    reused, other = sqs_record(changed), sqs_record(payment("pay-2"))

    response = aws.invoke([reused, other])

    assert failures(response) == {reused["messageId"]}
    assert aws.charges_for("pay-old") == 0


def test_expired_legacy_record_is_replaced_by_a_record_with_the_new_hash(aws: Env) -> None:
    _write_legacy_record(aws, payment("pay-old"))
    aws.dynamodb.update_item(
        TableName=IDEMPOTENCY_TABLE,
        Key={"id": {"S": _key("pay-old")}},
        UpdateExpression="SET expiration = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
    )

    assert failures(aws.invoke([sqs_record(payment("pay-old"))])) == set()

    [item] = aws.idempotency_items()
    assert item["validation"]["S"] == _hash(["acct-1", 1000, "EUR"])
    assert failures(aws.invoke([sqs_record(payment("pay-old", account="acct-2")), sqs_record(payment("x"))])) != set()


def test_legacy_record_rejects_the_payment_id_for_another_account(aws: Env) -> None:
    _write_legacy_record(aws, payment("pay-old", account="acct-1"))
    reused, other = sqs_record(payment("pay-old", account="acct-2")), sqs_record(payment("pay-2"))

    response = aws.invoke([reused, other])

    assert failures(response) == {reused["messageId"]}
    assert aws.charges_for("pay-old") == 0


# --- the simulated provider's own idempotency-key check ---------------------------------------------------------


@pytest.mark.parametrize(
    "changed",
    [
        Payment("pay-1", "acct-2", 1000, "EUR"),
        Payment("pay-1", "acct-1", 1001, "EUR"),
        Payment("pay-1", "acct-1", 1000, "USD"),
    ],
    ids=["other account", "other amount", "other currency"],
)
def test_provider_refuses_its_key_reused_with_another_payload(aws: Env, changed: Payment) -> None:
    aws.gateway.charge(Payment("pay-1", "acct-1", 1000, "EUR"), idempotency_key="pay-1")

    with pytest.raises(ProviderKeyMismatch, match="pay-1"):
        aws.gateway.charge(changed, idempotency_key="pay-1")

    assert len(aws.ledger()) == 1


def test_provider_answers_its_key_reused_with_the_same_payload(aws: Env) -> None:
    first = aws.gateway.charge(Payment("pay-1", "acct-1", 1000, "EUR"), idempotency_key="pay-1")

    again = aws.gateway.charge(Payment("pay-1", "acct-1", 1000, "EUR"), idempotency_key="pay-1")

    assert again.replayed and again.charge_id == first.charge_id
    assert len(aws.ledger()) == 1
