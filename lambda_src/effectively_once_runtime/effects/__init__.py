"""Effect adapters: each side effect made safe across the crash window (a kill after the effect and before the
record's completion replays it; only the effect's own idempotency answers the replay). Powertools + boto3 + the
standard library only: an adapter takes the caller's client or connection, never imports a driver of its own.

Each adapter is called inside a declared effect (``@consumer.effect``) with the key the effect was handed
(``idempotency_key=``), and returns the same result on a replay. One effect calling the same adapter twice gives each
call a ``name=`` (``_context.adapter_key``). Inside a declared effect an adapter reads the runtime's per-call context
(``current()``: an ``EffectCall`` with the effect's name and keys, the deadline, the marker table, the logger and the
metrics), never the ``Consumer``. See ``docs/effects.md`` for each adapter's window and trade-off.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._context import EffectCall, MarkerTable, adapter_key, current, running

# public name -> submodule (imported on first use, so one adapter's import never costs another's)
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "put_item",
            "transact_write",
            "TransactPut",
            "ItemMismatch",
            "TokenMismatch",
            "TransactionRefused",
            "StoredItemGone",
        ),
        "dynamodb",
    ),
    **dict.fromkeys(("put_object", "S3Object", "S3ContentMismatch", "S3WriteConflict"), "s3"),
    **dict.fromkeys(("insert_once", "SqlRow", "SqlRowMismatch", "SqlRowMissing"), "sql"),
    **dict.fromkeys(("post_json", "HttpResult", "HttpTransientError", "HttpPermanentError"), "http"),
    **dict.fromkeys(("unkeyed", "MarkerUnavailable", "rejected_by_aws", "AT_MOST_ONCE", "AT_LEAST_ONCE"), "unkeyed"),
    **dict.fromkeys(("send_fifo", "publish_fifo", "send_message", "publish", "MessageRejected"), "messaging"),
}

__all__ = ["EffectCall", "MarkerTable", "adapter_key", "current", "running", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
