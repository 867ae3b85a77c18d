"""The one pipeline every run of the local tooling goes through: a local AWS and a ``cdk deploy`` into it (or a
local AWS where the stack is deployed already), the deployed SQS event source mappings discovered and moto's own
switched off, one poller pool playing them, the producer's originals sent before polling starts and its resends
while it runs, the queues drained; then the profile reads back and checks what happened.

Two profiles use it: the payments demo (``payments/demo.py``: ``make demo``, ``make soak``) and the chaos run for any
stack (``any_stack/chaos_run.py``: ``python -m effectively_once_local chaos``). Each step is a function here, so that
neither profile has a producer, a drain loop, a deploy-or-reuse step or a progress bar of its own.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ..aws.deploy import DeployError, deploy
from ..aws.discovery import DeployedMapping
from ..aws.lambda_imports import check_imports
from ..aws.readback import queues_depth
from ..aws.server import MotoServer, local_endpoint, local_session
from ..aws.skipped_resources import failure_hint, skipped_line, skipped_resources
from ..aws.stack_template import DeployedStack
from ..chaos.fault_model import ChaosConfig, EventLog
from ..chaos.forced_strikes import PLAN_FILE
from ..report.page import RunClock, page_path
from ..runner.mapping_runner import PollerPool, PollerSpec
from ..traffic.producer import LATE_RESEND, RESEND, L, Outgoing, Sender, send
from .drain_limit import DrainTimeout, left_in

#: The files a run writes into its folder (``runner/batch_poller.py``, ``chaos/fault_model.py``, :func:`drive`): a
#: new run removes the previous run's, and nothing else (the folder may hold the input file, or be the working folder).
RUN_FILES = (
    "deliveries-*.jsonl",
    "provider-*.jsonl",
    "chaos-*.jsonl",
    "function-*.log",
    "sent-*.jsonl",
    "standin-calls.jsonl",
    PLAN_FILE,  # a chaos run's forced strikes (chaos/forced_strikes.py): no other run of the folder reads them
)


def clear_run_dir(run_dir: Path) -> None:
    """The previous run's logs in ``run_dir`` (:data:`RUN_FILES`) removed before a run: the folder is the new run's
    from its start (its deploy writes ``cdk.log`` and ``moto.log`` there). Its report stays until the run starts
    sending (:func:`clear_report`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for pattern in RUN_FILES:
        for stale in run_dir.glob(pattern):
            stale.unlink()


def clear_report(report_path: Path) -> None:
    """The previous run's JSON report at ``report_path`` and the page beside it removed, as a run starts sending
    (:func:`drive`): a run stopped before (a usage error, exit 2) keeps the last report, and one stopped after never
    leaves it looking like its own."""
    for stale in (report_path, page_path(report_path)):
        stale.unlink(missing_ok=True)


def progress_bar(total: int, desc: str, quiet: bool) -> Any:
    """A tqdm bar on stderr (``quiet``: none drawn)."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="msg", disable=quiet, file=sys.stderr, mininterval=0.5, leave=True)


@dataclass(frozen=True)
class Deployment:
    """Where a run's stack lives: the local AWS's ``endpoint``, the ``cdk_out`` the stack was deployed from, and
    whether this run deployed it (``fresh``) or found it deployed; ``skipped``: the template's resources the local
    AWS skipped, by type, that a run may miss (``aws/skipped_resources.py``). :default: none."""

    endpoint: str
    cdk_out: Path
    fresh: bool
    skipped: dict[str, list[str]] = field(default_factory=dict)


def _skipped(endpoint: str, stack: str, cdk_out: Path, log: Callable[[str], None]) -> dict[str, list[str]]:
    """The stack's resources the local AWS skipped (its template against its listed resources), said in a line."""
    try:
        with local_endpoint(endpoint):
            deployed = DeployedStack(local_session(endpoint), stack, cdk_out)
            found = skipped_resources(deployed.template, set(deployed.physical))
    except (DeployError, ClientError, BotoCoreError) as exc:  # a diagnosis only: never the run's end
        log(f"could not compare stack {stack} with its template for skipped resources: {exc}")
        return {}
    line = skipped_line(stack, found)
    if line is not None:
        log(line)
    return found.types


@contextmanager
def local_deployment(
    *,
    app_dir: Path,
    stack: str,
    context: dict[str, str],
    run_dir: Path,
    log: Callable[[str], None],
    endpoint: str | None = None,
    cdk_out: Path | None = None,
    check: Callable[[Path], None] | None = None,
    allowed_imports: Collection[str] = (),
) -> Iterator[Deployment]:
    """A fresh local AWS (moto on loopback, its log in ``run_dir/moto.log``) with ``stack`` of ``app_dir`` deployed
    by the CDK CLI with ``-c`` ``context`` (``cdk.out`` in ``run_dir``), stopped when the block ends; or, given
    ``endpoint``, the local AWS there, where ``stack`` was deployed from ``cdk_out`` already (tests deploy several
    stacks at once), left running. ``check``: called with the synthesized ``cdk.out`` before the deploy
    (``deploy.deploy``); not called given ``endpoint``.

    Before it yields, a line names the template's resources the local AWS skipped (``aws/skipped_resources.py``), and
    a failed deploy's error names the ones its log says it skipped. Before the deploy (given ``endpoint``: before it
    yields), each Python function's imports are resolved against what it has on Lambda (``aws/lambda_imports.py``;
    ``allowed_imports``: the run's ``--allow-import`` names).

    :raises MissingImports: a function imports a module Lambda would not find (a ``DeployError``).
    :raises DeployError: ``endpoint`` without ``cdk_out``, or the deploy failed.
    :raises LocalAwsError: the local AWS did not start.
    """
    if endpoint is not None:
        if cdk_out is None:
            raise DeployError("a run on an existing local AWS (endpoint) needs the cdk.out it was deployed from")
        check_imports(cdk_out, stack, allowed_imports)
        yield Deployment(endpoint, cdk_out, fresh=False, skipped=_skipped(endpoint, stack, cdk_out, log))
        return

    def checks(synthesized: Path) -> None:
        check_imports(synthesized, stack, allowed_imports)
        if check is not None:
            check(synthesized)

    with MotoServer(log_path=run_dir / "moto.log") as aws:
        log(f"local AWS (moto) on {aws.endpoint}")
        started = time.monotonic()
        try:
            deploy(aws.endpoint, app_dir, stack, context, run_dir / "cdk.log", check=checks)
        except DeployError as exc:
            hint = failure_hint(run_dir / "cdk.out" / f"{stack}.template.json", run_dir / "moto.log")
            if hint is None:
                raise
            raise DeployError(f"{exc}; {hint}") from exc
        log(f"deployed {stack} with the CDK CLI in {time.monotonic() - started:.0f}s")
        out = run_dir / "cdk.out"
        yield Deployment(aws.endpoint, out, fresh=True, skipped=_skipped(aws.endpoint, stack, out, log))


def describe(mapping: DeployedMapping) -> str:
    """One line on what the runner found for a mapping: its queue, function, handler and the settings it plays; for
    an asynchronous target, in its own terms: Lambda's retries, the maximum event age, the on-failure destination
    and what invokes it."""
    c = mapping.mapping
    if c.async_config is not None:
        a = c.async_config
        sources = ", ".join(s.rule_name or s.topic_arn or s.kind for s in mapping.sources) or "direct Invoke (Event)"
        return (
            f"{mapping.label} ({mapping.queue_name}) -> {c.function_name} [{c.handler}]: asynchronous, retries"
            f" {a.max_retry_attempts}, maximum event age {a.max_event_age_seconds}s, on failure"
            f" {mapping.on_failure_url or 'none'}, invoked by {sources}, function timeout {c.function_timeout_seconds}s"
        )
    # A queue without a redrive policy has no maxReceiveCount: SQS redelivers until the retention period ends.
    dead_letters = (
        f"maxReceiveCount {c.max_receive_count}, then its DLQ"
        if mapping.dlq_url is not None
        else "no DLQ (SQS redelivers a failing message until its retention period ends)"
    )
    return (
        f"{mapping.label} ({mapping.queue_name}) -> {c.function_name} [{c.handler}]: batch size {c.batch_size}, "
        f"visibility timeout {c.visibility_timeout_seconds}s, {dead_letters}, "
        f"function timeout {c.function_timeout_seconds}s"
    )


def poller_specs(
    mappings: list[DeployedMapping],
    *,
    run_dir: Path,
    aws_env: dict[str, str],
    chaos: ChaosConfig,
    concurrency: int,
    handler_root: Path | None = None,
    key_expression: str | None = None,
    key_normalize: tuple[str, ...] = (),
    seam: str | None = None,
    env_overrides: dict[str, str] | None = None,
) -> list[tuple[PollerSpec, int]]:
    """``concurrency`` pollers per mapping. ``handler_root``: the folder the handler is imported from.

    :default: each mapping's own code folder (its function's asset in the ``cdk.out``).
    :raises DeployError: no ``handler_root`` and a mapping discovered without a ``cdk.out``.
    """
    specs = []
    for m in mappings:
        root = handler_root or m.code_dir
        if root is None:
            raise DeployError(f"no code folder for the function of {m.label}: discover it with the cdk.out")
        spec = PollerSpec(
            mapping=m.mapping,
            run_dir=str(run_dir),
            handler_root=str(root),
            aws_env=aws_env,
            chaos=chaos,
            key_expression=key_expression,
            key_normalize=key_normalize,
            seam=seam,
            env_overrides=dict(env_overrides or {}),
        )
        specs.append((spec, concurrency))
    return specs


def drain(
    pool: PollerPool, sqs: Any, urls: list[str], total: int, *, timeout_seconds: int, run_dir: Path, quiet: bool
) -> None:
    """Supervise the pollers (a dead one is replaced) until the queues hold nothing twice in a row.

    :raises DrainTimeout: not drained within ``timeout_seconds`` (``engine/drain_limit.py``).
    """
    deadline = time.monotonic() + timeout_seconds
    settled_polls = 0
    with progress_bar(total, "processing", quiet) as bar:
        while settled_polls < 2:
            if time.monotonic() > deadline:
                raise DrainTimeout(timeout_seconds, left_in(sqs, urls), run_dir)
            time.sleep(1)
            pool.supervise()
            remaining = queues_depth(sqs, urls)
            bar.n = max(0, total - remaining)
            bar.refresh()
            settled_polls = settled_polls + 1 if remaining == 0 else 0


@dataclass(frozen=True)
class Drive:
    """What :func:`drive` did: the messages it sent, and when sending started and the queues were drained
    (``time.monotonic()``)."""

    messages_sent: int
    sending_started: float
    drained: float


def drive(
    sqs: Any,
    pool: PollerPool,
    urls: dict[str, str],
    fifo: dict[str, bool],
    outgoing: dict[str, list[Outgoing[L]]],
    *,
    clock: RunClock,
    run_dir: Path,
    drain_timeout_seconds: int,
    quiet: bool,
    report_path: Path,
    fresh_deploy: bool = True,
    senders: dict[str, Sender] | None = None,
) -> Drive:
    """Remove the previous run's report (``report_path``, :func:`clear_report`), send the originals, start the
    pollers, send the resends while they run (a producer retrying), drain, stop the pollers. Every message SQS
    accepted is in the run's send log (``sent-<label>.jsonl``). Sending while pollers run is slow on moto: every
    SendMessage scans the whole queue (``Queue.attributes``, docs/moto-bugs.md).

    :raises SendError: SQS rejected a message. :raises DrainTimeout: not drained in time.
    """
    clear_report(report_path)
    total = sum(len(v) for v in outgoing.values())
    sent_logs = {label: EventLog(run_dir / f"sent-{label}.jsonl") for label in outgoing}
    sending_started = time.monotonic()
    try:
        with progress_bar(total, "sending", quiet) as bar:
            clock.mark("deployed: sending" if fresh_deploy else "sending")
            for label, msgs in outgoing.items():
                first = {label: [o for o in msgs if o.kind not in (RESEND, LATE_RESEND)]}
                send(sqs, urls, fifo, first, clock.progress(label, bar.update), sent_logs[label].write, senders)
            pool.start()
            clock.mark("polling")
            for label, msgs in outgoing.items():
                resends = {label: [o for o in msgs if o.kind in (RESEND, LATE_RESEND)]}
                send(sqs, urls, fifo, resends, clock.progress(label, bar.update), sent_logs[label].write, senders)
        drain(
            pool, sqs, list(urls.values()), total, timeout_seconds=drain_timeout_seconds, run_dir=run_dir, quiet=quiet
        )
        drained = time.monotonic()
    finally:
        pool.stop()
    return Drive(messages_sent=total, sending_started=sending_started, drained=drained)
