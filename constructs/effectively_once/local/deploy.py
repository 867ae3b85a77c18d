"""Deploy the CDK app with the real CDK CLI into the local AWS, and read back what was deployed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .esm import MappingConfig
from .server import ACCOUNT, REGION, aws_env


class DeployError(RuntimeError):
    """``cdk bootstrap`` or ``cdk deploy`` failed; the message is one line, the full output is in the log."""


def cdk_command(app_dir: Path) -> list[str]:
    """The CDK CLI of the app's project: ``node_modules/.bin/cdk`` in ``app_dir`` or a folder above it (an app in
    a subfolder of its repository, like ``examples/orders``), else ``cdk`` on the PATH."""
    for folder in (app_dir, *app_dir.resolve().parents):
        local = folder / "node_modules" / ".bin" / "cdk"
        if local.exists():
            return [str(local)]
    if shutil.which("cdk"):
        return ["cdk"]
    raise DeployError(f"the CDK CLI is not installed in {app_dir}/node_modules (run `npm ci` there, or `make setup`)")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path, what: str) -> None:
    with open(log_path, "ab") as log:
        log.write(f"\n$ {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        reason = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith(("❌", "‣"))), "")
        reason = reason or next((ln.strip() for ln in reversed(lines) if ln.strip()), "no output")
        raise DeployError(f"{what} failed (exit {proc.returncode}): {reason[:300]} — full output in {log_path}")


def deploy(
    endpoint: str, app_dir: Path, stack: str | Sequence[str], context: dict[str, str], log_path: Path
) -> None:
    """``cdk bootstrap`` then ``cdk deploy STACK...`` against ``endpoint``, with ``-c key=value`` context values
    (several stacks: one synth, one command).

    :raises DeployError: either command failed.
    """
    stacks = [stack] if isinstance(stack, str) else list(stack)
    env = {**os.environ, **aws_env(endpoint), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    # cdk.json runs `python3 app.py`: use this interpreter's environment (the project's .venv).
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cdk = cdk_command(app_dir)
    ctx = [arg for key, value in context.items() for arg in ("-c", f"{key}={value}")]
    # Synthesize into the run's own folder: the app's cdk.out stays free for a `cdk synth` at the same time.
    ctx += ["--output", str(log_path.parent / "cdk.out")]
    _run([*cdk, "bootstrap", f"aws://{ACCOUNT}/{REGION}", *ctx], app_dir, env, log_path, "cdk bootstrap")
    _run(
        [*cdk, "deploy", *stacks, "--require-approval", "never", "--progress", "events", *ctx],
        app_dir,
        env,
        log_path,
        f"cdk deploy {' '.join(stacks)}",
    )


@dataclass(frozen=True)
class Pipeline:
    """One deployed processor: its event source mapping and what the report reads."""

    mapping: MappingConfig
    mapping_uuid: str
    dlq_url: str
    idempotency_table: str
    ledger_table: str


def discover(session: Any, stack: str) -> dict[str, Pipeline]:
    """Find every SQS event source mapping of ``stack`` and what it connects, keyed ``standard`` / ``fifo``.

    :raises DeployError: the stack has no SQS event source mapping, or two of one queue type.
    """
    cfn, lam, sqs = session.client("cloudformation"), session.client("lambda"), session.client("sqs")
    resources = [
        summary
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for summary in page["StackResourceSummaries"]
    ]
    pipelines: dict[str, Pipeline] = {}
    for res in resources:
        if res.get("ResourceType") != "AWS::Lambda::EventSourceMapping":
            continue
        esm = lam.get_event_source_mapping(UUID=res["PhysicalResourceId"])
        queue_arn = esm["EventSourceArn"]
        if ":sqs:" not in queue_arn:
            continue
        queue_name = queue_arn.split(":")[5]
        queue_url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attrs.get("RedrivePolicy", "{}"))
        if "deadLetterTargetArn" not in redrive:
            raise DeployError(f"queue {queue_name} has no redrive policy")
        dlq_url = sqs.get_queue_url(QueueName=redrive["deadLetterTargetArn"].split(":")[5])["QueueUrl"]
        fn = lam.get_function_configuration(FunctionName=esm["FunctionArn"])
        variables = dict(fn.get("Environment", {}).get("Variables", {}))
        label = "fifo" if queue_name.endswith(".fifo") else "standard"
        if label in pipelines:
            raise DeployError(f"stack {stack} has more than one {label} SQS event source mapping")
        mapping = MappingConfig(
            label=label,
            queue_url=queue_url,
            queue_arn=queue_arn,
            batch_size=int(esm.get("BatchSize", 10)),
            batching_window_seconds=int(esm.get("MaximumBatchingWindowInSeconds", 0) or 0),
            visibility_timeout_seconds=int(attrs["VisibilityTimeout"]),
            max_receive_count=int(redrive["maxReceiveCount"]),
            function_name=fn["FunctionName"],
            function_timeout_seconds=int(fn.get("Timeout", 3)),
            function_memory_mb=int(fn.get("MemorySize", 128)),
            function_env=variables,
            handler=fn.get("Handler", "payments.handler.lambda_handler"),
        )
        pipelines[label] = Pipeline(
            mapping=mapping,
            mapping_uuid=esm["UUID"],
            dlq_url=dlq_url,
            idempotency_table=variables.get("IDEMPOTENCY_TABLE_NAME", ""),
            ledger_table=variables.get("LEDGER_TABLE_NAME", ""),
        )
    if not pipelines:
        raise DeployError(f"stack {stack} has no SQS event source mapping")
    return pipelines


def disable_mappings(session: Any, pipelines: dict[str, Pipeline]) -> None:
    """moto's own event source mapping would hand every message to its Lambda stand-in (which cannot run our code
    without Docker) and delete it: switch the deployed mappings off; the local runner plays their part."""
    lam = session.client("lambda")
    for pipeline in pipelines.values():
        lam.update_event_source_mapping(UUID=pipeline.mapping_uuid, Enabled=False)
