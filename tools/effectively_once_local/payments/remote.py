"""The producer and the report against a stack deployed with ``cdk deploy`` into a real AWS account, where the
Lambda function runs in AWS. Credentials and region come from the usual AWS chain (profile, environment).

Only what AWS itself keeps is reported: ledger items and DLQ messages (deliveries, duplicates suppressed and
provider calls live in CloudWatch there: see the processor's dashboard and Logs Insights query definitions).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..aws.deploy import aws_session
from ..aws.readback import queues_depth
from ..aws.server import LocalAwsError
from ..chaos.fault_model import ChaosConfig
from ..traffic.producer import send
from .payments_input import QUEUES, load_payments, plan_messages
from .payments_report import build_report, render, verdict
from .payments_view import Pipeline, discover, validity_check

#: How long the source queues must stay empty before the report reads the ledgers: SQS's ApproximateNumberOf*
#: counts "may not achieve consistency until at least 1 minute after the producers stop sending messages"
#: (SQS API reference, GetQueueAttributes), so a single zero can come too early.
SETTLE_SECONDS = 60
#: Added to the longest path through a pipeline for the default wait: Lambda's pollers and the report's own reads.
WAIT_MARGIN_SECONDS = 300
POLL_SECONDS = 5.0


def drain_wait_seconds(pipelines: dict[str, Pipeline]) -> int:
    """The default wait of ``report``: a poison message is received maxReceiveCount times, one visibility timeout
    apart, and moved to the DLQ on the next receive (so are FIFO messages held back behind it), plus the settle
    time and a margin. PaymentsSandbox's defaults (30 s function timeout, so 180 s visibility; 5 receives): 1,440 s.
    """
    longest = max((p.mapping.max_receive_count + 1) * p.mapping.visibility_timeout_seconds for p in pipelines.values())
    return longest + SETTLE_SECONDS + WAIT_MARGIN_SECONDS


def wait_for_drain(
    sqs: Any,
    urls: list[str],
    wait_seconds: float,
    settle_seconds: float = SETTLE_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once every queue in ``urls`` has read empty (visible, in flight and delayed) for ``settle_seconds``.

    :raises LocalAwsError: not so within ``wait_seconds``.
    """
    start = clock()
    empty_since: float | None = None
    poll = max(1.0, min(POLL_SECONDS, settle_seconds / 2))
    while True:
        now = clock()
        if queues_depth(sqs, urls) > 0:
            empty_since = None
        elif empty_since is None:
            empty_since = now
        if empty_since is not None and now - empty_since >= settle_seconds:
            return
        if now - start > wait_seconds:
            raise LocalAwsError(f"queues not drained after {wait_seconds:.0f}s")
        sleep(poll)


def _session() -> Any:
    return aws_session()


@dataclass(frozen=True)
class ProduceOptions:
    """``produce``'s options (``cli/remote_commands.py`` builds them from its arguments).

    :param stack: the deployed stack whose queues are sent to.
    :param payments: the payments file (JSON Lines, ``payments_input.load_payments``).
    :param chaos: the producer's duplicates: ``resend`` and ``concurrent_duplicates`` (fractions), ``seed``.
    """

    stack: str
    payments: Path
    chaos: ChaosConfig


@dataclass(frozen=True)
class ReportOptions:
    """``report``'s options (``cli/remote_commands.py`` builds them from its arguments).

    :param stack: the deployed stack to wait for and read back.
    :param payments: the payments file that was sent.
    :param handler_root: the folder holding the handler package, whose ``payments.model`` rules say what is valid.
    :param wait_seconds: seconds to wait for the queues to drain; ``None``: :func:`drain_wait_seconds`.
    :param report_path: the JSON report written.
    :param settle_seconds: seconds the queues must stay empty. :default: :data:`SETTLE_SECONDS`.
    """

    stack: str
    payments: Path
    handler_root: Path
    wait_seconds: int | None
    report_path: Path
    settle_seconds: int = SETTLE_SECONDS


def produce(opts: ProduceOptions) -> int:
    """The ``produce`` command: the payments file, with the producer's duplicates, to the stack's queues.

    :returns: ``0``.
    """
    lines = load_payments(opts.payments)
    session = _session()
    pipelines = discover(session, opts.stack)
    plan = plan_messages(lines, opts.chaos)
    urls = {label: p.mapping.queue_url for label, p in pipelines.items()}
    sent = send(session.client("sqs"), urls, QUEUES, {q: plan.get(q, []) for q in urls}, lambda n: None)
    print(f"sent {sum(sent.values())} messages: " + ", ".join(f"{q} {n}" for q, n in sorted(sent.items())))
    return 0


def report(opts: ReportOptions) -> int:
    """The ``report`` command: wait for the stack's queues to drain (``opts.wait_seconds``, default
    :func:`drain_wait_seconds`), then report from its ledgers and DLQs.

    :returns: the verdict's exit code: ``0`` or ``1``.
    :raises LocalAwsError: the queues did not drain in time.
    """
    stack, wait_seconds, settle_seconds, out = opts.stack, opts.wait_seconds, opts.settle_seconds, opts.report_path
    lines = load_payments(opts.payments)
    session = _session()
    pipelines = discover(session, stack)
    sqs = session.client("sqs")
    urls = [p.mapping.queue_url for p in pipelines.values()]
    wait = drain_wait_seconds(pipelines) if wait_seconds is None else wait_seconds
    print(f"waiting up to {wait}s for the queues of {stack} to drain (empty for {settle_seconds}s)", flush=True)
    try:
        wait_for_drain(sqs, urls, wait, settle_seconds)
    except LocalAwsError as exc:
        raise LocalAwsError(f"{stack}: {exc}") from exc
    result = build_report(session, pipelines, lines, None, validity_check(opts.handler_root))
    code, reasons = verdict(result, unsafe=False)
    result["verdict"] = {"exit_code": code, "reasons": reasons}
    print(render(result))
    for reason in reasons:
        print("FAIL: " + reason)
    # Written after it is shown: a write that fails after all (a full disk) still leaves the result on screen.
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"report written to {out}")
    return code
