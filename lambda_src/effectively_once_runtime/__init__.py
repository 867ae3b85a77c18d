"""effectively-once runtime: turns "a function for one record" plus "a declared side effect" into a Lambda handler
that honours the environment contract the ``effectively_once`` constructs set.

```python
from effectively_once_runtime import Consumer, PermanentError

consumer = Consumer(key="order_id", validate="[total, currency]", key_prefix="shop/orders")

@consumer.effect                      # called with idempotency_key=...; one "effect executed" line per execution
def confirm(order, *, idempotency_key): ...

@consumer.record                      # one record's domain logic, gets the parsed body
def handle(order):
    return confirm(order)

lambda_handler = consumer.handler     # SQS (standard/FIFO) and direct invocation
```

Imports Powertools, boto3 and the standard library only, never aws-cdk-lib. ``names`` (the names shared with the
constructs), ``errors``, ``body``, ``settings`` and ``deadline`` need only the standard library; Powertools is
imported when ``Consumer`` is first used (PEP 562), so ``import effectively_once_runtime.names`` works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    ConcurrencyModeRefused,
    InvalidEffectCall,
    InvalidRecord,
    PermanentError,
    UnknownRecordStatus,
    UnsupportedEvent,
)
from .settings import RuntimeSettings

if TYPE_CHECKING:
    from .consumer import Consumer, ConsumerState

__all__ = [
    "ConcurrencyModeRefused",
    "Consumer",
    "ConsumerState",
    "InvalidEffectCall",
    "InvalidRecord",
    "PermanentError",
    "RuntimeSettings",
    "UnknownRecordStatus",
    "UnsupportedEvent",
]

_LAZY = {"Consumer", "ConsumerState"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import consumer

        return getattr(consumer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
