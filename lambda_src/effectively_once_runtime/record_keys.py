"""The record's idempotency key: its text, the JMESPath function that normalises it inside Powertools' own search,
and the check that it is not a delivery's own id (``Consumer(key=..., normalize=...)``).

The key is the ``key`` JMESPath over the payload (``events.compile_expression``). With ``normalize`` the key Powertools
hashes is the normalised one: its key expression becomes ``effectively_once_normalize(<key>)``, a function of
``NormalizingFunctions`` only, so a user's ``key`` cannot call it.
"""

from __future__ import annotations

import json
from typing import Any

import jmespath
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.jmespath_utils import PowertoolsFunctions
from jmespath import functions as jmespath_functions

from . import events, identity

#: The JMESPath function Powertools' key expression is wrapped in when ``normalize`` is on:
#: ``effectively_once_normalize(<key>)``. Not among ``events.FUNCTIONS``, so a ``key`` cannot call it.
NORMALIZE_FUNCTION = "effectively_once_normalize"
#: The JMESPath function Powertools' validation expression is wrapped in: ``effectively_once_canonical(<validate>)``,
#: numbers canonical (``identity.canonical_numbers``) and nothing else. Not callable from a user's expression either.
CANONICAL_FUNCTION = "effectively_once_canonical"
#: Keys that name a delivery's own id in AWS's event shapes, not the business object's: an EventBridge event's
#: ``id`` and an SQS record's ``messageId``. A producer's retry, a second ``PutEvents`` or a resend gets a new one.
DELIVERY_ID_KEYS = ("id", "messageId")
#: The one WARNING an execution environment logs at state set-up when ``key`` is one of them (field ``reason``).
MSG_KEY_IS_DELIVERY_ID = "idempotency key is a delivery id"


class NormalizingFunctions(PowertoolsFunctions):
    """Powertools' JMESPath functions plus ``effectively_once_normalize``: ``identity.normalize_key`` with one
    consumer's steps, so the key Powertools hashes is the normalised one."""

    def __init__(self, steps: tuple[str, ...]) -> None:
        super().__init__()
        self.steps = steps

    @jmespath_functions.signature({"types": []})  # type: ignore[untyped-decorator]  # jmespath ships no types
    def _func_effectively_once_normalize(self, value: Any) -> Any:
        return identity.normalize_key(value, self.steps)

    @jmespath_functions.signature({"types": []})  # type: ignore[untyped-decorator]  # jmespath ships no types
    def _func_effectively_once_canonical(self, value: Any) -> Any:
        return identity.canonical_numbers(value)


def key_text(value: Any) -> str | None:
    """The idempotency key as text: a string as is, any other JSON value as compact sorted JSON with its numbers
    canonical (``identity.canonical_numbers``: ``1234.0`` is ``1234``); ``None`` when the key JMESPath found nothing
    (Powertools' rule: ``None``, ``""``, or only ``None`` in a multi-select)."""
    if BasePersistenceLayer.is_missing_idempotency_key(value):
        return None
    if isinstance(value, str):
        return value
    return json.dumps(identity.canonical_numbers(value), sort_keys=True, separators=(",", ":"))


def is_delivery_id(key: events.Expression) -> bool:
    """Whether the key expression is exactly a field named in ``DELIVERY_ID_KEYS`` (``id``, ``"id"``,
    ``messageId``), not a path to one inside the payload (``detail.id``) nor another field."""
    tree = key.parsed.parsed
    return bool(tree.get("type") == "field" and tree.get("value") in DELIVERY_ID_KEYS)


def delivery_id_reason(key: str) -> str:
    """The ``reason`` of the ``MSG_KEY_IS_DELIVERY_ID`` line for the key expression ``key``."""
    return (
        f"key {key!r} names the delivery's own id (an EventBridge event's id, an SQS record's messageId): a producer "
        "retry or a second EventBridge put of the same payment gets a new one, so it runs twice; key on a business id "
        "(e.g. payment_id)"
    )


def normalizing_expression(key: events.Expression, function: str = NORMALIZE_FUNCTION, prop: str = "key") -> str:
    """``effectively_once_normalize(<key>)``: Powertools searches it over the payload it is given (the one
    ``validate`` and the record function get too), so the key it hashes is the normalised one (its numbers canonical,
    then the consumer's steps). With ``function=CANONICAL_FUNCTION``, ``effectively_once_canonical(<validate>)``: the
    validation hash over canonical numbers. Checked to parse as that call around the expression's own tree, its
    result the only argument.

    :raises ValueError: the wrapped expression does not parse as that call.
    """
    wrapped = f"{function}({key.expression})"
    tree = jmespath.compile(wrapped).parsed
    if tree != {"type": "function_expression", "children": [key.parsed.parsed], "value": function}:
        raise ValueError(f"{prop} {key.expression!r} cannot be normalised: {wrapped!r} does not parse as a call on it")
    return wrapped


def canonical_expression(validate: events.Expression) -> str:
    """``effectively_once_canonical(<validate>)``: the payload validation Powertools hashes, numbers canonical.

    :raises ValueError: the wrapped expression does not parse as that call.
    """
    return normalizing_expression(validate, CANONICAL_FUNCTION, "validate")
