"""The per-call context the runtime hands effect adapters: ``EffectCall``, set by ``Consumer.effect`` around each
execution of a declared effect and read with ``current()``. Standard library only (Powertools' types are named for
type checking only).

An adapter reads everything it needs of the consumer from the context, never from the ``Consumer`` itself: the
effect's name and keys, the deadline, the marker table, the logger and the metrics. Outside a declared effect
``current()`` is ``None``, and an adapter works on its arguments alone.

An adapter is called inside a declared effect with the key the effect was handed (``idempotency_key=``). It writes
under that key, or under ``<effect key>#<name>`` when the effect calls it more than once (``name=``): one effect
calling the same adapter twice with the same name would write both under one key, and the second would be answered
as a replay of the first, so that is a ``ValueError`` (``adapter_key``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import effect_keys, names
from ..errors import InvalidEffectCall
from ..settings import parse_key_prefix

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics


@dataclass(frozen=True)
class MarkerTable:
    """The DynamoDB table un-keyed effects keep their markers in (``effects.unkeyed``). Inside a ``Consumer`` it is
    the consumer's idempotency table (``EffectCall.markers``, with its persistence layer's client and key layout);
    outside one, pass it as ``markers=``.

    :param table_name: a DynamoDB table with a string partition key ``id`` and the TTL attribute ``expiration``
        (an ``IdempotencyTable``), by name or ARN.
    :param key_prefix: the prefix of every marker id (the rules of ``IDEMPOTENCY_KEY_PREFIX``).
    :param client: a boto3 DynamoDB client. :default: ``None``: one built in the Region of ``table_name`` (an ARN) or
        the default Region, and shared.
    :param expiry_seconds: how long a marker answers replays, in seconds. :default: ``names.DEFAULT_EXPIRY_SECONDS``
        (3600).
    :param key_attr: the partition key attribute. :default: ``"id"`` (Powertools' default).
    :param expiry_attr: the TTL attribute (epoch seconds). :default: ``"expiration"`` (Powertools' default).
    :param sort_key_attr: the sort key attribute of a table with a composite key: the partition key then holds
        ``static_pk_value`` and the sort key the marker id. :default: ``None``: the marker id is the partition key.
    :param static_pk_value: the partition key value with ``sort_key_attr``. :default: ``None``.
    :raises ValueError: ``key_prefix`` breaks the key prefix rules; ``expiry_seconds`` is not a positive integer.
    """

    table_name: str
    key_prefix: str
    client: Any = None
    expiry_seconds: int = names.DEFAULT_EXPIRY_SECONDS
    key_attr: str = "id"
    expiry_attr: str = "expiration"
    sort_key_attr: str | None = None
    static_pk_value: str | None = None

    def __post_init__(self) -> None:
        parse_key_prefix("key_prefix", self.key_prefix)
        if not isinstance(self.expiry_seconds, int) or self.expiry_seconds <= 0:
            raise ValueError(f"expiry_seconds must be a positive integer, but {self.expiry_seconds!r} was given")


@dataclass(frozen=True)
class EffectCall:
    """One execution of a declared effect, as the runtime hands it to the adapters it calls (``current()``).

    :ivar effect: (``str``) the effect's name (``@consumer.effect(name=...)``, else the function's ``__name__``).
    :ivar effect_key: (``str``) the effect's idempotency key: the key the effect was called with
        (``idempotency_key=``), scoped or the business key (``Consumer(effect_key=...)``).
    :ivar record_key: (``Any``) the record's idempotency key, as the log lines' ``idempotency_key`` carries it
        (the business key, normalised with ``normalize``). :default: ``None``.
    :ivar deadline: (``float | None``) when the effect must be done, as a ``time.monotonic()`` value in seconds: the
        invocation's end less the consumer's deadline margin (``deadline.Deadline.monotonic``), taken when the effect
        started. The seconds left are ``deadline - time.monotonic()`` (``seconds_left()``). :default: ``None``:
        no deadline (outside a ``Consumer``, or a ``Consumer`` invoked without a Lambda context).
    :ivar markers: (``MarkerTable | None``) where un-keyed effects keep their markers: the consumer's idempotency
        table. :default: ``None`` (outside a ``Consumer``: ``unkeyed`` then needs ``markers=``).
    :ivar logger: (``aws_lambda_powertools.Logger | None``) the consumer's logger, for the lines an adapter writes
        (``effect possibly lost``, ...). :default: ``None`` (outside a ``Consumer``).
    :ivar metrics: (``aws_lambda_powertools.Metrics | None``) the consumer's metrics, for what an adapter counts.
        :default: ``None`` (outside a ``Consumer``).
    :ivar used: the ``(adapter, name)`` pairs already called in this execution (``adapter_key`` adds to it): the one
        part that changes while the effect runs.
    """

    effect: str
    effect_key: str
    record_key: Any = None
    deadline: float | None = None
    markers: MarkerTable | None = None
    logger: Logger | None = None
    metrics: Metrics | None = None
    used: set[tuple[str, str | None]] = field(default_factory=set, compare=False, repr=False)

    def seconds_left(self) -> float | None:
        """The seconds left before ``deadline`` (negative once it passed); ``None`` without a deadline."""
        return None if self.deadline is None else self.deadline - time.monotonic()


_CURRENT: ContextVar[EffectCall | None] = ContextVar("effectively_once_effect", default=None)


@contextmanager
def running(call: EffectCall) -> Iterator[EffectCall]:
    """Make ``call`` the current effect execution for the duration of the block."""
    token = _CURRENT.set(call)
    try:
        yield call
    finally:
        _CURRENT.reset(token)


def current() -> EffectCall | None:
    """The effect execution the caller runs in, or ``None`` outside a declared effect."""
    return _CURRENT.get()


def adapter_key(adapter: str, idempotency_key: str, name: str | None = None) -> str:
    """The key one adapter call writes under: ``idempotency_key`` as is, or ``<idempotency_key>#<name>`` with
    ``name=`` (``effect_keys.form`` applied: at most 128 printable ASCII characters).

    :raises InvalidEffectCall: ``idempotency_key`` is empty or not a string; ``name`` is empty; inside a declared
        effect, the same adapter was already called with the same ``name`` in this execution.
    """
    if not isinstance(idempotency_key, str) or not idempotency_key:
        raise InvalidEffectCall(f"{adapter}: idempotency_key must be the non-empty key the effect was called with")
    if name is not None and not name:
        raise InvalidEffectCall(f"{adapter}: name must be a non-empty string or None")
    call = current()
    if call is not None:
        if (adapter, name) in call.used:
            raise InvalidEffectCall(
                f"{adapter} was called twice in effect {call.effect!r} with name={name!r}: give each call its own "
                "name= (both would write under one key, and the second would be answered as a replay of the first)"
            )
        call.used.add((adapter, name))
    return idempotency_key if name is None else effect_keys.form(f"{idempotency_key}#{name}")
