"""What the SDK faults injected into a chaos run hit (issue 43, item 5; ``chaos/sdk_faults.py``): every fault is a line
of its environment's chaos log (``sdk_fault``: ``kind``, ``op``, ``target``, the write requests it held back or
refused, ``requests``, or the batch entries it failed, ``entries``), so the report can count them by kind and name
the business keys they cost.

A request names its key through the effect stores the run counts in: for a table store ``table:NAME:ATTRIBUTE``, the
request's item (a put's ``Item``, a delete's ``Key``) on that table with ``ATTRIBUTE`` equal to the key (a string or
a number, normalised as the run's keys are); for a queue store ``queue:NAME:JMESPATH``, a failed send entry's body
to that queue, its key the expression over it (``failed_entries``). Other faults tie no key (an S3 put, a publish to
a topic, a delete). A key lost to a fault then shows it in its evidence (``sdk_faults``: each fault with its kind,
operation, ``seq`` and request id) and in its per-key row (``sdk_faults``: how many).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict

from ..base.json_lines import read_jsonl
from ..chaos.fault_classes import ChaosConfig
from ..chaos.sdk_faults import SDK_FAULT_KINDS
from ..traffic.chaos_input import body_key, compile_key

#: The chaos log's event of an injected SDK fault (``InvocationChaos.on_sdk_fault``).
SDK_FAULT_EVENT = "sdk_fault"
#: The chaos log's event of a batch call answered per entry (``InvocationChaos.on_batch_call``).
BATCH_CALL_EVENT = "batch_call"


def read_sdk_faults(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every SDK fault of the run's chaos log ``records``, in each log's order."""
    return [r for r in records if r.get("event") == SDK_FAULT_EVENT]


def _value(attribute: Any) -> str | None:
    """A DynamoDB attribute value in its wire form as text: a string's or a number's; ``None`` for any other."""
    if isinstance(attribute, dict):
        for kind in ("S", "N"):
            if isinstance(attribute.get(kind), str):
                return str(attribute[kind])
    return None


def _entry_keys(fault: dict[str, Any], queues: Mapping[str, str]) -> set[str]:
    """The keys of a fault's failed send entries to a queue store (``queues``: its URL -> the key's JMESPath)."""
    path = queues.get(str(fault.get("target") or ""))
    if path is None:
        return set()
    expression = compile_key(path)
    found = (body_key(expression, str(e.get("body"))) for e in fault.get("entries") or [] if e.get("body") is not None)
    return {k for k in found if k}


def keys_hit(
    faults: list[dict[str, Any]],
    tables: Mapping[str, str],
    same: Callable[[str], str] = str,
    queues: Mapping[str, str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Business key -> the faults whose requests or entries held its item, each once. ``tables``: a table store's
    physical name -> its attribute holding the business key; ``queues``: a queue store's URL -> its key's JMESPath;
    ``same``: the run's key normalisation."""
    found: dict[str, list[dict[str, Any]]] = {}
    for fault in faults:
        row = {k: fault.get(k) for k in ("kind", "op", "target", "seq", "request_id")}
        keys = {same(k) for k in _entry_keys(fault, queues or {})}
        for table, requests in (fault.get("requests") or {}).items():
            attribute = tables.get(table)
            for request in requests if attribute else []:
                item = (request.get("PutRequest") or {}).get("Item") or (request.get("DeleteRequest") or {}).get("Key")
                value = _value((item or {}).get(attribute))
                if value is not None:
                    keys.add(same(value))
        for key in sorted(keys):
            found.setdefault(key, []).append(row)
    return found


def write_calls(records: list[dict[str, Any]]) -> tuple[int, int]:
    """The run's ``BatchWriteItem`` calls, and its write calls through boto3 (DynamoDB, S3, SQS, SNS: not SQL
    commits), that the local AWS accepted (the chaos log ``records``' writes)."""
    writes = [r for r in records if r.get("event") == "write"]
    batch = sum(1 for r in writes if r.get("op") == "dynamodb.BatchWriteItem")
    return batch, sum(1 for r in writes if not str(r.get("op")).startswith("sql."))


def batch_calls(records: list[dict[str, Any]]) -> int:
    """The handler's SQS and SNS batch calls answered per entry that the chaos log ``records`` hold (logged while
    ``--batch-entry-failures`` is above 0: 0 otherwise)."""
    return sum(1 for r in records if r.get("event") == BATCH_CALL_EVENT)


class DemoSdkFaults(TypedDict):
    """The demo report's ``sdk_faults`` section (:func:`demo_sdk_faults`)."""

    by_kind: dict[str, int]  # every kind of chaos/sdk_faults.SDK_FAULT_KINDS, 0 for one that never struck
    batch_calls: int  # the handler's batch calls answered per entry (counted while per-entry failures are asked)


def demo_sdk_faults(run_dir: Path) -> DemoSdkFaults:
    """The demo's ``sdk_faults`` section, from the run's chaos logs in ``run_dir``: the faults by kind and the batch
    calls answered per entry (the demo ties no key: its payments' effects are counted in the ledger)."""
    records = read_jsonl(sorted(run_dir.glob("chaos-*.jsonl")))
    by_kind = Counter(str(f.get("kind")) for f in read_sdk_faults(records))
    return {"by_kind": {kind: by_kind.get(kind, 0) for kind in SDK_FAULT_KINDS}, "batch_calls": batch_calls(records)}


class SdkFaultsSection(TypedDict):
    """The chaos report's ``sdk_faults`` section (:func:`sdk_faults`)."""

    by_kind: dict[str, int]  # every kind of chaos/sdk_faults.SDK_FAULT_KINDS, 0 for one that never struck
    batch_write_calls: int  # BatchWriteItem calls the local AWS accepted
    aws_write_calls: int  # write calls through boto3 it accepted (not SQL commits)
    batch_calls: int  # the handler's SQS and SNS batch calls answered per entry (:func:`batch_calls`)
    keys: dict[str, int]  # each key hit -> how many faults, sorted by key


def sdk_faults(
    states: Mapping[str, Any],
    run_dir: Path,
    tables: Mapping[str, str],
    same: Callable[[str], str] = str,
    queues: Mapping[str, str] | None = None,
) -> SdkFaultsSection:
    """The report's ``sdk_faults`` section (:class:`SdkFaultsSection`; ``batch_write_calls`` and
    ``aws_write_calls`` from :func:`write_calls`, ``batch_calls`` from :func:`batch_calls`), from the run's chaos logs
    in ``run_dir``; ``tables``: table name -> key attribute path, ``queues``: a queue store's URL -> its key's
    JMESPath, ``same``: the run's key normalisation. Each hit key's ``sdk_faults`` goes into the ``states`` section
    (``line_states.line_states``) the run reports with it: in its per-key row (a count) and, for a failing key, in
    its evidence (the faults)."""
    records = read_jsonl(sorted(run_dir.glob("chaos-*.jsonl")))  # read once
    faults = read_sdk_faults(records)
    hit = keys_hit(faults, tables, same, queues)
    by_kind = Counter(str(f.get("kind")) for f in faults)
    batch, aws = write_calls(records)
    for key, rows in hit.items():
        if key in (states.get("per_key") or {}):
            states["per_key"][key]["sdk_faults"] = len(rows)
        if key in (states.get("evidence") or {}):
            states["evidence"][key]["sdk_faults"] = rows
    return {
        "by_kind": {kind: by_kind.get(kind, 0) for kind in SDK_FAULT_KINDS},
        "batch_write_calls": batch,
        "aws_write_calls": aws,
        "batch_calls": batch_calls(records),
        "keys": {key: len(rows) for key, rows in sorted(hit.items())},
    }


def render_sdk_faults(block: dict[str, Any]) -> str:
    """The terminal's line: the faults by kind, and the keys they hit (the first five)."""
    kinds = ", ".join(f"{kind}={n}" for kind, n in block["by_kind"].items())
    keys = list(block["keys"])
    shown = ", ".join(keys[:5]) + (" ..." if len(keys) > 5 else "")
    return f"sdk faults: {kinds}; {len(keys)} keys hit" + (f" ({shown})" if keys else "")


def render_demo_sdk_faults(block: Mapping[str, Any], chaos: ChaosConfig) -> str:
    """The demo's terminal line for its ``sdk_faults`` section (ending in a newline), or ``""`` when no SDK fault
    was asked for (``chaos``: the run's ``ChaosConfig``) and none struck."""
    if chaos.batch_entry_failure <= 0 and not any(block["by_kind"].values()):
        return ""
    kinds = ", ".join(f"{kind}={n}" for kind, n in block["by_kind"].items() if n)
    return f"sdk faults: {kinds or 'none struck'} ({block['batch_calls']} batch calls answered per entry)\n"
