"""effectively-once: AWS CDK constructs for effectively-once SQS + Lambda processing.

Queue + DLQ (:class:`ProcessingQueue`, or a queue you already have: :class:`ExistingQueue`), Powertools
idempotency table (:class:`IdempotencyTable`), the event source mapping and least-privilege wiring between them
(:class:`IdempotentQueueConsumer`), a function's asynchronous invocation path (:class:`IdempotentEventConsumer`:
EventBridge, SNS, S3, ``InvocationType="Event"``), the runtime and Powertools layers for your own function
(:class:`RuntimeLayer`), and the sample pattern composed of all of them (:class:`PaymentProcessor`, which takes
its queue's and consumer's props as :class:`ProcessingQueueOptions` and :class:`IdempotentQueueConsumerOptions`).
See the README's "Constructs" section; ``effectively_once.testing`` has snapshot-test helpers.

The constructs are imported on first attribute access (PEP 562), so that the CDK-free dev tooling in
``effectively_once_local`` does not pay for importing aws-cdk-lib (seconds and ~150 MB per process).

Moved modules keep their old paths until their removal, each with a ``DeprecationWarning`` naming the new one
(``_moved_modules.MOVED``): ``effectively_once.consumer`` is ``effectively_once.queue_consumer`` (removed in 0.4.0).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _moved_modules

if TYPE_CHECKING:
    from .event_consumer import EventAlarmThresholds, IdempotentEventConsumer
    from .existing_queue import ExistingQueue
    from .idempotency_table import IdempotencyTable
    from .observability import AlarmThresholds, AsyncInvocationOptions
    from .options import IdempotentQueueConsumerOptions, ProcessingQueueOptions
    from .payment_processor import PaymentProcessor
    from .processing_queue import ProcessingQueue
    from .queue_consumer import IdempotentQueueConsumer
    from .runtime_layer import RuntimeLayer

__all__ = [
    "AlarmThresholds",
    "AsyncInvocationOptions",
    "EventAlarmThresholds",
    "ExistingQueue",
    "IdempotencyTable",
    "IdempotentEventConsumer",
    "IdempotentQueueConsumer",
    "IdempotentQueueConsumerOptions",
    "PaymentProcessor",
    "ProcessingQueue",
    "ProcessingQueueOptions",
    "RuntimeLayer",
]

_MODULES = {
    "AlarmThresholds": ".observability",
    "AsyncInvocationOptions": ".observability",
    "EventAlarmThresholds": ".event_consumer",
    "ExistingQueue": ".existing_queue",
    "IdempotencyTable": ".idempotency_table",
    "IdempotentEventConsumer": ".event_consumer",
    "IdempotentQueueConsumer": ".queue_consumer",
    "IdempotentQueueConsumerOptions": ".options",
    "PaymentProcessor": ".payment_processor",
    "ProcessingQueue": ".processing_queue",
    "ProcessingQueueOptions": ".options",
    "RuntimeLayer": ".runtime_layer",
}

_moved_modules.install()


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
