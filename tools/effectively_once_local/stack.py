"""Read back every SQS event source mapping of a deployed stack, whatever the app: what the local runner needs to
play each mapping (queue, batch size, window, function handler, timeout, memory, environment, code folder) and what
the report reads (the DLQ from the queue's redrive policy). The payments profile's view of them is ``sandbox.py``.

The code folder comes from the synthesized template in the deploy's ``cdk.out``: the function's ``aws:asset:path``
metadata (the CDK CLI writes it), else the ``asset.<hash>`` folder named by its ``Code.S3Key`` (shared/LOCAL_AWS.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .deploy import DeployError
from .esm import MappingConfig


@dataclass(frozen=True)
class DeployedMapping:
    """One deployed SQS event source mapping and what it connects.

    ``label``: the source queue's logical id (stable, and what an input line's ``queue`` names); ``queue_name``;
    ``fifo``; ``dlq_url`` (``None`` when the queue has no redrive policy); ``code_dir``: the function's code
    (``None`` when discovered without a ``cdk.out``, e.g. in a real account).
    """

    label: str
    queue_name: str
    fifo: bool
    mapping: MappingConfig
    mapping_uuid: str
    dlq_url: str | None
    code_dir: Path | None


def _resources(cfn: Any, stack: str) -> list[dict[str, Any]]:
    return [
        summary
        for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack)
        for summary in page["StackResourceSummaries"]
    ]


def code_dir(cdk_out: Path, stack: str, logical_id: str) -> Path:
    """The code folder of function ``logical_id`` in ``cdk_out``.

    :raises DeployError: the template or the folder is missing, or the function's code is not an asset.
    """
    template_path = cdk_out / f"{stack}.template.json"
    if not template_path.is_file():
        raise DeployError(f"no synthesized template {template_path} (was the stack deployed from {cdk_out}?)")
    resource = json.loads(template_path.read_text(encoding="utf-8"))["Resources"].get(logical_id, {})
    asset = resource.get("Metadata", {}).get("aws:asset:path")
    if not asset:
        key = resource.get("Properties", {}).get("Code", {}).get("S3Key")
        asset = f"asset.{key.split('.')[0]}" if isinstance(key, str) else None
    folder: Path | None = cdk_out / asset if asset else None
    if folder is None or not folder.is_dir():
        raise DeployError(f"function {logical_id} of {stack}: no asset folder in {cdk_out} (inline or image code?)")
    return folder


def discover_mappings(session: Any, stack: str, cdk_out: Path | None) -> list[DeployedMapping]:
    """Every SQS event source mapping of ``stack``, in the order of their queues' logical ids; ``cdk_out``: the
    folder the stack was deployed from, to find each function's code (``None``: no code folders).

    :raises DeployError: the stack has no SQS event source mapping, or a function's code folder is not found.
    """
    cfn, lam, sqs = session.client("cloudformation"), session.client("lambda"), session.client("sqs")
    resources = _resources(cfn, stack)
    by_physical = {r.get("PhysicalResourceId", ""): r["LogicalResourceId"] for r in resources}
    queues = [r for r in resources if r.get("ResourceType") == "AWS::SQS::Queue"]
    found: list[DeployedMapping] = []
    for res in resources:
        if res.get("ResourceType") != "AWS::Lambda::EventSourceMapping":
            continue
        esm = lam.get_event_source_mapping(UUID=res["PhysicalResourceId"])
        queue_arn = esm["EventSourceArn"]
        if ":sqs:" not in queue_arn:
            continue
        queue_name = queue_arn.split(":")[5]
        queue_url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
        # The queue's physical id is its URL on AWS; match on the name, whatever form the emulator keeps.
        label = next(
            (
                q["LogicalResourceId"]
                for q in queues
                if q.get("PhysicalResourceId", "").rstrip("/").split("/")[-1] == queue_name
                or q.get("PhysicalResourceId") == queue_arn
            ),
            queue_name,
        )
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attrs.get("RedrivePolicy", "{}"))
        dlq_url = (
            sqs.get_queue_url(QueueName=redrive["deadLetterTargetArn"].split(":")[5])["QueueUrl"]
            if "deadLetterTargetArn" in redrive
            else None
        )
        fn = lam.get_function_configuration(FunctionName=esm["FunctionArn"])
        fn_logical = by_physical.get(fn["FunctionName"])
        if fn_logical is None and cdk_out is not None:
            raise DeployError(f"the function of {label} ({fn['FunctionName']}) is not a resource of {stack}")
        mapping = MappingConfig(
            label=label,
            queue_url=queue_url,
            queue_arn=queue_arn,
            batch_size=int(esm.get("BatchSize", 10)),
            batching_window_seconds=int(esm.get("MaximumBatchingWindowInSeconds", 0) or 0),
            visibility_timeout_seconds=int(attrs["VisibilityTimeout"]),
            max_receive_count=int(redrive.get("maxReceiveCount", 0)),
            function_name=fn["FunctionName"],
            function_timeout_seconds=int(fn.get("Timeout", 3)),
            function_memory_mb=int(fn.get("MemorySize", 128)),
            function_env=dict(fn.get("Environment", {}).get("Variables", {})),
            handler=fn["Handler"],
        )
        found.append(
            DeployedMapping(
                label=label,
                queue_name=queue_name,
                fifo=queue_name.endswith(".fifo"),
                mapping=mapping,
                mapping_uuid=esm["UUID"],
                dlq_url=dlq_url,
                code_dir=code_dir(cdk_out, stack, fn_logical) if cdk_out is not None and fn_logical else None,
            )
        )
    if not found:
        raise DeployError(f"stack {stack} has no SQS event source mapping")
    return sorted(found, key=lambda m: m.label)


def disable(session: Any, mappings: list[DeployedMapping]) -> None:
    """Switch moto's own mappings off: it would hand every message to its Lambda stand-in (which cannot run the code
    without Docker) and delete it. The local runner plays their part."""
    lam = session.client("lambda")
    for m in mappings:
        lam.update_event_source_mapping(UUID=m.mapping_uuid, Enabled=False)
