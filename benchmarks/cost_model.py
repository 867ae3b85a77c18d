"""Cost per 1 million payments: SQS requests, Lambda requests and GB-seconds, DynamoDB on-demand request units.

Prices: us-east-1 list prices as known to the author (2025). They change: RE-CHECK them on the source pages
before quoting a figure. Free tiers are ignored.

The model, per payment, on a standard queue whose messages are all under 64 KB (one billed request each):

- SQS: the producer's ``SendMessageBatch`` (``PRODUCER_BATCH`` messages per request), and per invocation one
  ``ReceiveMessage`` and one ``DeleteMessageBatch`` (what the event source mapping does with full batches).
  Empty receives of idle pollers cost per hour of polling, not per payment: left out here, measured in the bench.
- Lambda: one request per invocation (``batch_size`` payments), billed duration
  ``INVOCATION_OVERHEAD_MS + batch_size * MS_PER_PAYMENT`` rounded up to 1 ms, at ``memory_mb``.
- DynamoDB: every write request of an item under 1 KB is 1 write request unit (a failed conditional write too),
  every strongly consistent read of an item under 4 KB 1 read request unit; counts come from the benchmark.
"""

from __future__ import annotations

import math
from typing import Any

# --- Prices (USD, us-east-1, on-demand list prices; as of 2025 to the author's knowledge: re-check) ---------------
#: Source: "AWS SQS pricing" (aws.amazon.com/sqs/pricing), standard queue, per million requests beyond the free tier.
SQS_STANDARD_PER_MILLION_REQUESTS = 0.40
#: Source: "AWS SQS pricing", FIFO queue, per million requests.
SQS_FIFO_PER_MILLION_REQUESTS = 0.50
#: Source: "AWS Lambda pricing" (aws.amazon.com/lambda/pricing), per million requests.
LAMBDA_PER_MILLION_REQUESTS = 0.20
#: Source: "AWS Lambda pricing", x86, first price tier, per GB-second.
LAMBDA_PER_GB_SECOND_X86 = 0.0000166667
#: Source: "Amazon DynamoDB pricing" (aws.amazon.com/dynamodb/pricing/on-demand), per million write request units.
DYNAMODB_PER_MILLION_WRU = 0.625
#: Source: "Amazon DynamoDB pricing", on-demand, per million read request units.
DYNAMODB_PER_MILLION_RRU = 0.125
PRICES_AS_OF = "2025, author's knowledge of the list prices; re-check on the AWS pricing pages"

# --- Stated assumptions ---------------------------------------------------------------------------------------------
#: PaymentProcessor's default memory size (MB).
MEMORY_MB = 256
#: The event source mapping's default batch size in PaymentProcessor.
DEFAULT_BATCH_SIZE = 10
#: Messages per producer SendMessageBatch (the API's maximum; the local producer sends full batches).
PRODUCER_BATCH = 10
#: Stated handler time per payment (ms): three sequential DynamoDB round trips at about 10 ms each.
MS_PER_PAYMENT = 30.0
#: Stated fixed time per invocation (ms): Powertools batch processing, logging and the EMF flush.
INVOCATION_OVERHEAD_MS = 5.0

WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
READ_OPERATIONS = frozenset({"GetItem"})


def request_units(operations: dict[str, int]) -> tuple[float, float]:
    """(write units, read units) for DynamoDB requests by operation name, all items under 1 KB.

    :raises ValueError: an operation the model does not price (a Query or a Scan would need item sizes).
    """
    unknown = set(operations) - WRITE_OPERATIONS - READ_OPERATIONS
    if unknown:
        raise ValueError(
            f"operations {sorted(unknown)}: the cost model prices only {sorted(WRITE_OPERATIONS | READ_OPERATIONS)}"
        )
    writes = sum(n for op, n in operations.items() if op in WRITE_OPERATIONS)
    reads = sum(n for op, n in operations.items() if op in READ_OPERATIONS)
    return float(writes), float(reads)


def cost_per_million(
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    ddb_operations_per_payment: dict[str, int],
    ms_per_payment: float = MS_PER_PAYMENT,
    overhead_ms: float = INVOCATION_OVERHEAD_MS,
    memory_mb: int = MEMORY_MB,
    fifo: bool = False,
) -> dict[str, Any]:
    """USD per 1,000,000 payments, by service, for full batches of ``batch_size``.

    :param batch_size: payments per invocation (1-10 without a batching window).
    :param ddb_operations_per_payment: DynamoDB requests of one payment by operation (e.g. ``{"PutItem": 2}``).
    :raises ValueError: ``batch_size`` below 1, or an operation ``request_units`` cannot price.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: must be at least 1")
    payments = 1_000_000
    invocations = payments / batch_size
    sqs_requests = payments / PRODUCER_BATCH + 2 * invocations
    billed_ms = math.ceil(overhead_ms + batch_size * ms_per_payment)
    gb_seconds = invocations * billed_ms / 1000 * memory_mb / 1024
    wru, rru = request_units(ddb_operations_per_payment)
    sqs_price = SQS_FIFO_PER_MILLION_REQUESTS if fifo else SQS_STANDARD_PER_MILLION_REQUESTS
    costs = {
        "sqs": sqs_requests / 1e6 * sqs_price,
        "lambda_requests": invocations / 1e6 * LAMBDA_PER_MILLION_REQUESTS,
        "lambda_compute": gb_seconds * LAMBDA_PER_GB_SECOND_X86,
        "dynamodb": payments * (wru * DYNAMODB_PER_MILLION_WRU + rru * DYNAMODB_PER_MILLION_RRU) / 1e6,
    }
    return {
        "total": round(sum(costs.values()), 4),
        **{k: round(v, 4) for k, v in costs.items()},
        "assumptions": {
            "batch_size": batch_size,
            "sqs_requests_per_payment": round(sqs_requests / payments, 4),
            "invocations_per_payment": round(invocations / payments, 4),
            "billed_ms_per_invocation": billed_ms,
            "memory_mb": memory_mb,
            "wru_per_payment": wru,
            "rru_per_payment": rru,
            "fifo": fifo,
            "prices_as_of": PRICES_AS_OF,
        },
    }
