"""Deploy the CDK app with the real CDK CLI into the local AWS, and read back what was deployed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

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


def deploy(endpoint: str, app_dir: Path, stack: str | Sequence[str], context: dict[str, str], log_path: Path) -> None:
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
    # Synthesize into the run's own folder: the app's cdk.out stays free for a `cdk synth` at the same time. The CLI
    # runs in app_dir and reads a relative --output from there: pass it absolute, where the caller looks for it.
    ctx += ["--output", str((log_path.parent / "cdk.out").resolve())]
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
    """The payments view of every SQS event source mapping of ``stack`` (``stack.discover_mappings``), keyed
    ``standard`` / ``fifo``, with the tables the report reads from the function's environment.

    :raises DeployError: the stack has no SQS event source mapping, two of one queue type, or a queue without a
        redrive policy.
    """
    from .stack import discover_mappings  # stack.py imports this module

    pipelines: dict[str, Pipeline] = {}
    for found in discover_mappings(session, stack, None):
        if found.dlq_url is None:
            raise DeployError(f"queue {found.queue_name} has no redrive policy")
        label = "fifo" if found.fifo else "standard"
        if label in pipelines:
            raise DeployError(f"stack {stack} has more than one {label} SQS event source mapping")
        variables = found.mapping.function_env
        pipelines[label] = Pipeline(
            mapping=replace(found.mapping, label=label, gateway_seam="payments.gateway"),
            mapping_uuid=found.mapping_uuid,
            dlq_url=found.dlq_url,
            idempotency_table=variables.get(names.ENV_TABLE_NAME, ""),
            ledger_table=variables.get("LEDGER_TABLE_NAME", ""),
        )
    return pipelines


def disable_mappings(session: Any, pipelines: dict[str, Pipeline]) -> None:
    """moto's own event source mapping would hand every message to its Lambda stand-in (which cannot run our code
    without Docker) and delete it: switch the deployed mappings off; the local runner plays their part."""
    lam = session.client("lambda")
    for pipeline in pipelines.values():
        lam.update_event_source_mapping(UUID=pipeline.mapping_uuid, Enabled=False)


def aws_session() -> Any:
    """A boto3 session on the standard credential chain, for the commands that run against a real account. The
    region comes from ``AWS_DEFAULT_REGION``, else ``AWS_REGION`` (what the CDK CLI also reads; botocore alone
    reads only the first), else the profile."""
    import boto3

    region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or None
    return boto3.session.Session(region_name=region)
