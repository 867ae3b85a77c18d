"""The key a declared side effect is called with (``Consumer(effect_key=...)``). Standard library only.

Two modes:

- ``"scoped"``: ``<key prefix>#<effect name>#<idempotency key>``. Two effects of one record, or the same business key
  under two prefixes (``shop/deposit`` and ``shop/balance`` both keyed on ``order_id``), hand a provider different
  keys, so it never refuses the second operation as a reused key. A key that is not printable ASCII of at most
  ``MAX_EFFECT_KEY_CHARS`` characters becomes a readable head plus the SHA-256 of the whole (``form``).
- ``"business"``: the idempotency key itself, as before scoped keys existed (deprecated: see the CHANGELOG).

Why 128 printable ASCII characters: the common floor of the stores and APIs an effect key goes to: SQS and SNS FIFO
``MessageDeduplicationId`` (at most 128 characters of ``!`` to ``~``: Amazon SQS API Reference, SendMessage), Stripe's
``Idempotency-Key`` (at most 255 characters: Stripe API reference, Idempotent requests), S3 object keys and DynamoDB
partition keys (1,024 and 2,048 bytes). A space is printable ASCII but not allowed in a deduplication id, so the form
keeps ``!`` to ``~`` only.
"""

from __future__ import annotations

import hashlib
import re

SCOPED = "scoped"
BUSINESS = "business"
#: The modes of ``Consumer(effect_key=...)``.
EFFECT_KEY_MODES = (SCOPED, BUSINESS)
#: Longest effect key handed to an effect in the scoped mode.
MAX_EFFECT_KEY_CHARS = 128
#: Characters of a long or unusual key kept readable before its hash (head + ``~`` + 64 hex characters = 128).
_HEAD_CHARS = MAX_EFFECT_KEY_CHARS - 1 - 64
_PLAIN = re.compile(r"[!-~]{1,128}")
_OTHER = re.compile(r"[^!-~]")


def check_mode(value: str) -> str:
    """``value`` if it is an effect key mode.

    :raises ValueError: not one of ``EFFECT_KEY_MODES``.
    """
    if value not in EFFECT_KEY_MODES:
        raise ValueError(f"effect_key must be one of {EFFECT_KEY_MODES!r}, but {value!r} was given")
    return value


def form(key: str) -> str:
    """``key`` when it is 1 to 128 characters of ``!`` to ``~``; otherwise its first characters (others replaced by
    ``_``) plus ``~`` plus the SHA-256 hex digest of the whole key (UTF-8): 128 characters, stable, and distinct for
    distinct keys."""
    if _PLAIN.fullmatch(key):
        return key
    head = _OTHER.sub("_", key[:_HEAD_CHARS])
    return f"{head}~{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()}"


def scoped(prefix: str, effect: str, key: str) -> str:
    """The scoped effect key of ``key`` for the effect named ``effect`` under ``prefix`` (``form`` applied)."""
    return form(f"{prefix}#{effect}#{key}")
