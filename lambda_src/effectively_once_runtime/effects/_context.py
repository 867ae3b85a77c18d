"""The declared effect an adapter runs in (set by ``Consumer.effect`` around each execution). Standard library only.

An adapter is called inside a declared effect with the key the effect was handed (``idempotency_key=``). It writes
under that key, or under ``<effect key>#<name>`` when the effect calls it more than once (``name=``): one effect
calling the same adapter twice with the same name would write both under one key, and the second would be answered
as a replay of the first, so that is a ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .. import effect_keys


@dataclass
class EffectCall:
    """One execution of a declared effect.

    :ivar consumer: the ``Consumer`` that declared it (its ``logger``, ``metrics`` and ``state``: the idempotency
        table, key prefix and record TTL), or ``None`` for an adapter used outside a ``Consumer`` (tests).
    :ivar record_key: the record's idempotency key.
    :ivar effect: the effect's name.
    :ivar effect_key: the key the effect was called with.
    :ivar used: ``(adapter, name)`` pairs already called in this execution.
    """

    consumer: Any
    record_key: Any
    effect: str
    effect_key: str
    used: set[tuple[str, str | None]] = field(default_factory=set)


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

    :raises ValueError: ``idempotency_key`` is empty or not a string; ``name`` is empty; inside a declared effect,
        the same adapter was already called with the same ``name`` in this execution.
    """
    if not isinstance(idempotency_key, str) or not idempotency_key:
        raise ValueError(f"{adapter}: idempotency_key must be the non-empty key the effect was called with")
    if name is not None and not name:
        raise ValueError(f"{adapter}: name must be a non-empty string or None")
    call = current()
    if call is not None:
        if (adapter, name) in call.used:
            raise ValueError(
                f"{adapter} was called twice in effect {call.effect!r} with name={name!r}: give each call its own "
                "name= (both would write under one key, and the second would be answered as a replay of the first)"
            )
        call.used.add((adapter, name))
    return idempotency_key if name is None else effect_keys.form(f"{idempotency_key}#{name}")
