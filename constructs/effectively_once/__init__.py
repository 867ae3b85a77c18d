"""effectively-once: AWS CDK constructs for effectively-once SQS + Lambda processing.

Queue + DLQ (:class:`ProcessingQueue`), Powertools idempotency table (:class:`IdempotencyTable`), the
event source mapping and least-privilege wiring between them (:class:`IdempotentQueueConsumer`), and the
sample pattern composed of all three (:class:`PaymentProcessor`). See docs/constructs.md.
"""

from .consumer import IdempotentQueueConsumer
from .idempotency_table import IdempotencyTable
from .payment_processor import PaymentProcessor
from .processing_queue import ProcessingQueue

__all__ = [
    "IdempotencyTable",
    "IdempotentQueueConsumer",
    "PaymentProcessor",
    "ProcessingQueue",
]
