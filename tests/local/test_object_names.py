"""A bucket store's object-name template (issue 30, item 5; ``proof/object_names.py``): ``{key}`` is matched
against the business keys the run sent and ``{effect_key}`` against the runtime's scoped effect keys, and a template
that can match a name two ways for the input is refused before the run, saying why."""

from __future__ import annotations

import pytest

from effectively_once_local.proof.object_names import TemplateError, check_template, matcher
from effectively_once_local.traffic.chaos_input import InputFileError
from effectively_once_runtime import effect_keys

KEYS = {"inv-001", "inv-002", "inv-010"}


def test_a_key_holding_the_templates_separator_is_read_whole() -> None:
    """The issue's case: ``invoices/{key}-*.json`` with ids holding ``-`` read ``inv`` before."""
    key_of = matcher("invoices/{key}-*.json", KEYS)

    assert key_of("invoices/inv-001-5f0c.json") == "inv-001"
    assert key_of("invoices/inv-010-aa-bb.json") == "inv-010"
    assert key_of("invoices/inv-999-5f0c.json") is None, "a key the run never sent is no effect of it"
    assert key_of("invoices/inv-001.json") is None


def test_an_effect_key_template_reads_the_business_key_from_the_scoped_key() -> None:
    key_of = matcher("receipts/{effect_key}.json", KEYS)

    assert key_of(f"receipts/{effect_keys.scoped('shop/orders', 'store_receipt', 'inv-002')}.json") == "inv-002"
    assert key_of("receipts/inv-002.json") is None, "not a scoped key"


def test_without_keys_any_characters_stand_for_the_key() -> None:
    assert matcher("receipts/{key}/*")("receipts/a/b/c") == "a"


def test_a_template_that_can_match_a_name_two_ways_for_the_input_is_refused_saying_why() -> None:
    with pytest.raises(TemplateError) as refused:
        check_template("invoices/{key}-*.json", {"inv-1", "inv-1-2"})

    message = str(refused.value)
    assert "'invoices/inv-1-2-x.json' is the object of key 'inv-1-2' and of key 'inv-1'" in message
    assert isinstance(refused.value, InputFileError), "one line, exit code 2"


@pytest.mark.parametrize(
    "template",
    ["invoices/{key}-*.json", "invoices/{key}.json", "receipts/{effect_key}.json", "r/*/{key}/*"],
)
def test_templates_that_cannot_mislead_pass(template: str) -> None:
    check_template(template, KEYS)


def test_a_key_prefix_of_another_is_fine_when_nothing_can_absorb_the_rest() -> None:
    check_template("invoices/{key}.json", {"inv-1", "inv-1-2"})
