"""Business identity (``Consumer(normalize=...)``, ``effectively_once_runtime/identity.py``): one business id written
in another case, with spaces around it or in full-width characters is one record and one effect, not two; off (the
default) keys exactly as before. Against moto's DynamoDB with real-shaped SQS events (the ``orders`` fixture)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from effectively_once_runtime import Consumer, names
from effectively_once_runtime.identity import NORMALIZATIONS, check_steps, normalize_key, normalizer

from .conftest import FakeLambdaContext, failures, redeliver, sqs_record
from .orders_domain import KEY_PREFIX, Orders, _stored_key, build_consumer, order

FOLD = ("strip", "casefold")


def _build(**options: Any) -> tuple[Consumer, list[str | None]]:
    """Another orders consumer (inside the ``orders`` fixture: same table, same log stream), built with ``options``;
    and the effect keys its confirmations were called with."""
    confirmed: list[str | None] = []
    return build_consumer(confirmed, **options), confirmed


def _invoke(consumer: Consumer, records: list[dict[str, Any]]) -> dict[str, Any]:
    return consumer.handler({"Records": records}, FakeLambdaContext())  # type: ignore[no-any-return]


# --- the control: off keys on the raw id --------------------------------------------------------------------------


def test_without_normalize_case_and_spaces_are_two_records_and_two_effects(orders: Orders) -> None:
    response = orders.invoke([sqs_record(order("ABC-1")), sqs_record(order(" abc-1 "))])

    assert failures(response) == set()
    assert orders.confirmed == ["ABC-1", " abc-1 "]
    assert sorted(orders.stored_keys()) == sorted([_stored_key("ABC-1"), _stored_key(" abc-1 ")])
    assert orders.consumer.normalize == ()
    # Off: no steps, only canonical numbers; a string key hashes as the key as given (the stored keys above).
    assert orders.consumer.state.config.event_key_jmespath == "effectively_once_normalize(order.id)"


# --- on: one record across spellings --------------------------------------------------------------------------------


def test_strip_casefold_makes_the_spellings_one_record_in_one_batch_and_across_batches(orders: Orders) -> None:
    consumer, confirmed = _build(normalize=FOLD)
    batch = [sqs_record(order("ABC-1")), sqs_record(order(" abc-1 ")), sqs_record(order("abc-1"))]

    first = _invoke(consumer, batch)
    second = _invoke(consumer, [sqs_record(order("\tAbC-1\n")), redeliver(batch[0])])

    assert failures(first) == failures(second) == set()
    assert confirmed == ["abc-1"], "the effect runs once, with the normalised key"
    assert orders.stored_keys() == [_stored_key("abc-1")]
    lines = orders.log_lines()
    suppressed = [line for line in lines if line.get("message") == names.MSG_DUPLICATE_SUPPRESSED]
    assert len(suppressed) == 4
    assert {line[names.FIELD_IDEMPOTENCY_KEY] for line in suppressed} == {"abc-1"}
    assert {line[names.FIELD_CORRELATION_ID] for line in suppressed} == {"abc-1"}
    (executed,) = [line for line in lines if line.get("message") == names.EFFECT_EXECUTED]
    assert executed[names.FIELD_IDEMPOTENCY_KEY] == executed[names.FIELD_EFFECT_KEY] == "abc-1"


def test_the_record_function_still_gets_the_payload_as_it_came(orders: Orders) -> None:
    seen: list[Any] = []
    consumer = Consumer(key="order.id", key_prefix=KEY_PREFIX, effect_key="business", normalize=FOLD)

    @consumer.record
    def handle(body: dict[str, Any]) -> None:
        seen.append(body["order"]["id"])

    _invoke(consumer, [sqs_record(order(" ABC-1 "))])

    assert seen == [" ABC-1 "]


def test_scoped_effect_keys_are_derived_from_the_normalised_key(orders: Orders) -> None:
    consumer, confirmed = _build(normalize=FOLD, effect_key="scoped")

    _invoke(consumer, [sqs_record(order(" ABC-1")), sqs_record(order("abc-1 "))])

    assert confirmed == [f"{KEY_PREFIX}#confirm#abc-1"]


def test_a_direct_invocation_shares_the_normalised_record(orders: Orders) -> None:
    consumer, confirmed = _build(normalize=FOLD)

    _invoke(consumer, [sqs_record(order("abc-1"))])
    again = consumer.handler(order("  ABC-1"), FakeLambdaContext())

    assert again == {"confirmation": "c-abc-1", "total": 100}, "the stored result answers the other spelling"
    assert confirmed == ["abc-1"]


def test_nfkc_folds_full_width_characters_before_casefold(orders: Orders) -> None:
    consumer, confirmed = _build(normalize=("nfkc", "casefold"))

    _invoke(consumer, [sqs_record(order("ＡＢＣ-１")), sqs_record(order("abc-1"))])

    assert confirmed == ["abc-1"]
    assert orders.stored_keys() == [_stored_key("abc-1")]


def test_casefold_alone_leaves_full_width_characters_a_different_key(orders: Orders) -> None:
    consumer, confirmed = _build(normalize=("casefold",))

    _invoke(consumer, [sqs_record(order("ＡＢＣ-１")), sqs_record(order("abc-1"))])

    assert confirmed == ["ａｂｃ-１", "abc-1"]


def test_steps_apply_in_the_order_given(orders: Orders) -> None:
    # U+1D2C MODIFIER LETTER CAPITAL A: casefold leaves it, NFKC makes it "A"; only casefold after NFKC lowers it.
    nfkc_first, nfkc_keys = _build(normalize=("nfkc", "casefold"))
    casefold_first, casefold_keys = _build(normalize=("casefold", "nfkc"))

    _invoke(nfkc_first, [sqs_record(order("\u1d2c-1"))])
    _invoke(casefold_first, [sqs_record(order("\u1d2c-1"))])

    assert nfkc_keys == ["a-1"]
    assert casefold_keys == ["A-1"]


def test_a_key_that_is_only_whitespace_is_missing_once_stripped(orders: Orders) -> None:
    consumer, confirmed = _build(normalize=("strip",))
    blank, good = sqs_record(order("   ")), sqs_record(order("o-1"))

    response = _invoke(consumer, [blank, good])

    assert failures(response) == {blank["messageId"]}
    assert confirmed == ["o-1"]
    (line,) = orders.messages(names.MSG_INVALID_RECORD)
    assert "no idempotency key" in line[names.FIELD_REASON]
    assert orders.invoke([sqs_record(order("   "))]) == {"batchItemFailures": []}, "off: a blank id is a key"


# --- a multi-select key -------------------------------------------------------------------------------------------


def _regional(confirmed: list[str | None], **options: Any) -> Consumer:
    consumer = Consumer(
        key="[order.id, order.region, order.total]", key_prefix=KEY_PREFIX, effect_key="business", **options
    )

    @consumer.effect
    def confirm(*, idempotency_key: str | None) -> None:
        confirmed.append(idempotency_key)

    @consumer.record
    def handle(body: dict[str, Any]) -> None:
        confirm()

    return consumer


def test_a_multi_select_key_is_normalised_element_wise(orders: Orders) -> None:
    confirmed: list[str | None] = []
    consumer = _regional(confirmed, normalize=FOLD)

    _invoke(
        consumer,
        [sqs_record(order("ABC-1", region=" EU ")), sqs_record(order(" abc-1", region="eu"))],
    )

    assert confirmed == ['["abc-1","eu",100]'], "strings normalised, the number kept, compact sorted JSON"
    digest = hashlib.md5(json.dumps(["abc-1", "eu", 100], sort_keys=True).encode()).hexdigest()
    assert orders.stored_keys() == [f"{KEY_PREFIX}#{digest}"]


def test_a_multi_select_key_without_normalize_keeps_its_elements(orders: Orders) -> None:
    confirmed: list[str | None] = []
    consumer = _regional(confirmed)

    _invoke(consumer, [sqs_record(order("ABC-1", region=" EU ")), sqs_record(order(" abc-1", region="eu"))])

    assert confirmed == ['["ABC-1"," EU ",100]', '[" abc-1","eu",100]']


# --- validate still runs over the payload as it came ----------------------------------------------------------------


def test_same_normalised_key_with_another_amount_fails_validation_without_a_second_effect(orders: Orders) -> None:
    consumer, confirmed = _build(normalize=FOLD)
    _invoke(consumer, [sqs_record(order("ABC-1", total=100))])
    changed, same = sqs_record(order(" abc-1 ", total=999)), sqs_record(order(" abc-1 ", total=100))

    response = _invoke(consumer, [changed, same])

    assert failures(response) == {changed["messageId"]}
    assert confirmed == ["abc-1"]
    lines = orders.log_lines()
    (rejected,) = [line for line in lines if line.get("message") == names.MSG_IDEMPOTENCY_REJECTED]
    assert rejected[names.FIELD_IDEMPOTENCY_ERROR] == "IdempotencyValidationError"
    assert rejected[names.FIELD_CORRELATION_ID] == "abc-1"
    assert [
        line[names.FIELD_MESSAGE_ID] for line in lines if line.get("message") == names.MSG_DUPLICATE_SUPPRESSED
    ] == [same["messageId"]]


def test_validate_naming_the_key_field_compares_it_as_it_came(orders: Orders) -> None:
    # Documented: validate sees the raw payload, so a validated key field must match byte for byte.
    confirmed: list[str | None] = []
    consumer = Consumer(
        key="order.id", validate="order.id", key_prefix=KEY_PREFIX, effect_key="business", normalize=FOLD
    )

    @consumer.record
    def handle(body: dict[str, Any]) -> None:
        confirmed.append(body["order"]["id"])

    first, other = sqs_record(order("ABC-1")), sqs_record(order("abc-1"))
    response = _invoke(consumer, [first, other])

    assert failures(response) == {other["messageId"]}
    assert confirmed == ["ABC-1"]


# --- construction -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("normalize", [("lower",), ("strip", "NFKC"), "upper"])
def test_an_unknown_step_is_a_value_error_at_construction(normalize: Any) -> None:
    with pytest.raises(ValueError, match=r"unknown normalize step '(lower|NFKC|upper)'.*'casefold', 'strip', 'nfkc'"):
        Consumer(key="order.id", key_prefix=KEY_PREFIX, effect_key="business", normalize=normalize)


@pytest.mark.parametrize("normalize", [None, 3, ["strip", 1]])
def test_a_non_string_step_is_a_type_error_at_construction(normalize: Any) -> None:
    with pytest.raises(TypeError, match="normalize"):
        Consumer(key="order.id", key_prefix=KEY_PREFIX, effect_key="business", normalize=normalize)


def test_a_single_string_is_one_step_and_powertools_gets_the_wrapped_key() -> None:
    consumer = Consumer(key="order.id | @", key_prefix=KEY_PREFIX, effect_key="business", normalize="casefold")

    assert consumer.normalize == ("casefold",)
    assert consumer._powertools_key == "effectively_once_normalize(order.id | @)"


def test_a_key_cannot_call_the_normalising_function_itself() -> None:
    with pytest.raises(ValueError, match=r"unknown function effectively_once_normalize\(\)"):
        Consumer(key="effectively_once_normalize(order.id)", key_prefix=KEY_PREFIX, effect_key="business")


# --- the rules (identity.py) ---------------------------------------------------------------------------------------


def test_the_steps_and_their_functions() -> None:
    assert NORMALIZATIONS == ("casefold", "strip", "nfkc")
    assert normalizer(())(" ABC ") == " ABC "
    assert normalizer(("strip",))(" ABC\u3000") == "ABC"
    assert normalizer(("casefold",))("Straße") == "strasse"
    assert normalizer(("nfkc",))("ＡＢＣ－１ﬁ") == "ABC-1fi"
    assert check_steps("nfkc") == ("nfkc",)
    assert check_steps(["strip", "strip"]) == ("strip", "strip")


def test_strip_before_or_after_nfkc_differs_where_nfkc_makes_a_space() -> None:
    # U+00A8 DIAERESIS: NFKC gives it a leading space (U+0020 U+0308), which only a later strip removes.
    assert normalizer(("strip", "nfkc"))("\u00a8x") == " \u0308x"
    assert normalizer(("nfkc", "strip"))("\u00a8x") == "\u0308x"


def test_normalize_key_walks_lists_and_objects_and_keeps_other_values() -> None:
    value = {"Id": " ABC ", "Parts": [" X ", 1, None, True, ["Y "]], "N": 2.5}

    assert normalize_key(value, FOLD) == {"Id": "abc", "Parts": ["x", 1, None, True, ["y"]], "N": 2.5}
    assert normalize_key(value, ()) == value
    assert normalize_key(7, FOLD) == 7
    assert normalize_key(None, FOLD) is None
