"""The producer and the report against a stack deployed with ``cdk deploy`` into a real AWS account, where the
Lambda function runs in AWS. Credentials and region come from the usual AWS chain (profile, environment).

Only what AWS itself keeps is reported: ledger items and DLQ messages (deliveries, duplicates suppressed and
provider calls live in CloudWatch there: see the processor's dashboard and Logs Insights query definitions).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .chaos import ChaosConfig
from .deploy import discover
from .demo import _in_queue, _validity_check
from .producer import load_payments, plan_messages, send
from .report import build_report, render, verdict
from .server import LocalAwsError


def _session():  # type: ignore[no-untyped-def]
    import boto3

    return boto3.session.Session()


def produce(stack: str, payments: Path, chaos: ChaosConfig) -> int:
    lines = load_payments(payments)
    session = _session()
    pipelines = discover(session, stack)
    plan = plan_messages(lines, chaos)
    urls = {label: p.mapping.queue_url for label, p in pipelines.items()}
    sent = send(session.client("sqs"), urls, {q: plan.get(q, []) for q in urls}, lambda n: None)
    print(f"sent {sum(sent.values())} messages: " + ", ".join(f"{q} {n}" for q, n in sorted(sent.items())))
    return 0


def report(stack: str, payments: Path, handler_root: Path, wait_seconds: int, out: Path) -> int:
    lines = load_payments(payments)
    session = _session()
    pipelines = discover(session, stack)
    sqs = session.client("sqs")
    urls = [p.mapping.queue_url for p in pipelines.values()]
    deadline = time.monotonic() + wait_seconds
    while _in_queue(sqs, urls) > 0:
        if time.monotonic() > deadline:
            raise LocalAwsError(f"queues of {stack} not drained after {wait_seconds}s")
        time.sleep(5)
    result = build_report(session, pipelines, lines, None, _validity_check(handler_root))
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
