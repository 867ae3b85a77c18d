"""Cost per 1 million payments: SQS requests, Lambda requests and GB-seconds, DynamoDB on-demand request units.

Prices: us-east-1 (US East, N. Virginia) on-demand list prices, first price tier, free tiers ignored, each with its
source page (``PRICE_SOURCES``) and the date they were read (``PRICES_AS_OF``). They change: RE-CHECK them on the
source pages before quoting a figure. Lambda is priced per architecture (``LAMBDA_PER_GB_SECOND``): the sample
function runs on arm64 (Graviton) by default, x86_64 is kept for comparison.

The model, per payment, on a standard queue whose messages are all under 64 KB (one billed request each):

- SQS: the producer's ``SendMessageBatch`` (``PRODUCER_BATCH`` messages per request), and per invocation one
  ``ReceiveMessage`` and one ``DeleteMessageBatch`` (what the event source mapping does with full batches).
  Empty receives of idle pollers cost per hour of polling, not per payment: left out here, measured in the bench.
- Lambda: one request per invocation (``batch_size`` payments), billed duration :func:`invocation_ms` rounded up
  to 1 ms, at ``memory_mb``: the measured median of one 10-payment invocation (``benchmarks/measured.json``,
  ``invocation_ms_inprocess_batch10``, the duration the capacity model uses too), taken as proportional to the
  payments in the batch.
- DynamoDB: every write request of an item under 1 KB is 1 write request unit (a failed conditional write too),
  every strongly consistent read of an item under 4 KB 1 read request unit; counts come from the benchmark.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: The committed measurements of ``make bench`` (benchmarks/run.py writes it).
MEASURED = Path(__file__).resolve().parent / "measured.json"

# --- Prices (USD, us-east-1, on-demand list prices, first tier) -------------------------------------------------
LAMBDA_PRICING_URL = "https://aws.amazon.com/lambda/pricing/"
SQS_PRICING_URL = "https://aws.amazon.com/sqs/pricing/"
DYNAMODB_PRICING_URL = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
#: Standard queue, per million requests beyond the free tier; a request of up to 64 KB of payload is one billed
#: request, each further 64 KB chunk another. Source: SQS_PRICING_URL.
SQS_STANDARD_PER_MILLION_REQUESTS = 0.40
#: FIFO queue, per million requests (64 KB chunks as above). Source: SQS_PRICING_URL.
SQS_FIFO_PER_MILLION_REQUESTS = 0.50
#: SQS bills each 64 KB chunk of a request's payload as one request. Source: SQS_PRICING_URL.
SQS_BILLED_CHUNK_BYTES = 64 * 1024
#: Per million requests, the same on both architectures. Source: LAMBDA_PRICING_URL.
LAMBDA_PER_MILLION_REQUESTS = 0.20
#: Per GB-second of duration, by architecture (``lambda_.Architecture.name``), first tier (the first 6 billion
#: GB-seconds a month on x86, 7.5 billion on Arm). Source: LAMBDA_PRICING_URL, US East (N. Virginia).
LAMBDA_PER_GB_SECOND: dict[str, float] = {"arm64": 0.0000133334, "x86_64": 0.0000166667}
#: Kept for callers of the x86 constant.
LAMBDA_PER_GB_SECOND_X86 = LAMBDA_PER_GB_SECOND["x86_64"]
#: On-demand, per million write request units (one per write of an item up to 1 KB). Source: DYNAMODB_PRICING_URL.
DYNAMODB_PER_MILLION_WRU = 0.625
#: On-demand, per million read request units (one per strongly consistent read up to 4 KB). Source: as above.
DYNAMODB_PER_MILLION_RRU = 0.125
#: When and how the prices were read. The Lambda page renders its price table with JavaScript: the stored copy
#: read here shows the tiers' text but not the figures, which were taken from the same page as quoted by
#: cloudchipr.com/blog/aws-lambda-pricing (2025: Arm first tier $0.0000133334, x86 $0.0000166667 per GB-second;
#: $0.20 per million requests) and agree with the 20 % Arm discount the page states.
PRICES_AS_OF = "2026-11-30 (us-east-1 list prices read from the AWS pricing pages' stored copies; re-check)"
PRICE_SOURCES: dict[str, str] = {
    "lambda": LAMBDA_PRICING_URL,
    "sqs": SQS_PRICING_URL,
    "dynamodb": DYNAMODB_PRICING_URL,
}
#: The architecture the sample function runs on by default (PaymentProcessor's ``architecture``).
DEFAULT_ARCHITECTURE = "arm64"

# --- Stated assumptions ---------------------------------------------------------------------------------------------
#: PaymentProcessor's default memory size (MB).
MEMORY_MB = 256
#: The event source mapping's default batch size in PaymentProcessor.
DEFAULT_BATCH_SIZE = 10
#: Messages per producer SendMessageBatch (the API's maximum; the local producer sends full batches).
PRODUCER_BATCH = 10


def measured_invocation_ms(path: Path = MEASURED) -> tuple[float, int]:
    """(median wall time in ms, payments) of the measured invocation in ``path``.

    :raises KeyError: the file lacks the measurement (re-run ``make bench``).
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    return float(data["invocation_ms_inprocess_batch10"]), int(data["batch_size"])


def invocation_ms(payments: float, measured_ms: float | None = None, measured_payments: int | None = None) -> float:
    """Handler time (ms) of one invocation of ``payments`` payments: ``measured_ms`` for ``measured_payments``
    payments, scaled per payment. The one duration both the cost rows and the capacity model use.

    :param measured_ms: :default: the committed measurement (:func:`measured_invocation_ms`).
    :param measured_payments: payments in the measured invocation. :default: ``DEFAULT_BATCH_SIZE``, or the
        committed measurement's when ``measured_ms`` is not given.
    """
    if measured_ms is None:
        measured_ms, measured_payments = measured_invocation_ms()
    return measured_ms * payments / (measured_payments or DEFAULT_BATCH_SIZE)


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
    ms_per_payment: float | None = None,
    overhead_ms: float = 0.0,
    memory_mb: int = MEMORY_MB,
    fifo: bool = False,
    architecture: str = DEFAULT_ARCHITECTURE,
) -> dict[str, Any]:
    """USD per 1,000,000 payments, by service, for full batches of ``batch_size``.

    :param batch_size: payments per invocation (1-10 without a batching window).
    :param ddb_operations_per_payment: DynamoDB requests of one payment by operation (e.g. ``{"PutItem": 2}``).
    :param ms_per_payment: handler time per payment (ms). :default: the measured one (:func:`invocation_ms`).
    :param overhead_ms: a fixed time per invocation (ms) added to it. :default: ``0.0`` (the measurement
        includes it).
    :param architecture: ``"arm64"`` or ``"x86_64"``: picks the GB-second price. :default: ``"arm64"``.
    :raises ValueError: ``batch_size`` below 1, an architecture without a price, or an operation
        ``request_units`` cannot price.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size}: must be at least 1")
    if architecture not in LAMBDA_PER_GB_SECOND:
        raise ValueError(f"architecture={architecture!r}: priced are {sorted(LAMBDA_PER_GB_SECOND)}")
    payments = 1_000_000
    invocations = payments / batch_size
    sqs_requests = payments / PRODUCER_BATCH + 2 * invocations
    handler_ms = invocation_ms(batch_size) if ms_per_payment is None else batch_size * ms_per_payment
    billed_ms = math.ceil(overhead_ms + handler_ms)
    gb_seconds = invocations * billed_ms / 1000 * memory_mb / 1024
    wru, rru = request_units(ddb_operations_per_payment)
    sqs_price = SQS_FIFO_PER_MILLION_REQUESTS if fifo else SQS_STANDARD_PER_MILLION_REQUESTS
    costs = {
        "sqs": sqs_requests / 1e6 * sqs_price,
        "lambda_requests": invocations / 1e6 * LAMBDA_PER_MILLION_REQUESTS,
        "lambda_compute": gb_seconds * LAMBDA_PER_GB_SECOND[architecture],
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
            "architecture": architecture,
            "lambda_per_gb_second": LAMBDA_PER_GB_SECOND[architecture],
            "prices_as_of": PRICES_AS_OF,
            "price_sources": PRICE_SOURCES,
        },
    }
