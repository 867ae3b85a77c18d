"""Torn moments (issue 30, item 6): every kill that left a key's effect in some of the run's required stores and not
in the others. Listed in the report, never failing: a key torn at a kill that ends in every store was repaired by its
replay, which is what the runtime promises; a key still torn at the end is ``incomplete`` (``stores.incomplete_keys``),
and that fails.

Read from the environments' write logs (``chaos/faults.py``), never from wall-clock guesses within one process: each
effect write belongs to the execution of the Powertools record put in progress before it in its invocation (the
record id ends in the hash of the business key, ``faults.record_hash``), and names the store it wrote (its ``items``,
or its target: a table, a bucket, a queue URL; a SQL commit writes every SQL store of its driver). A kill's moment
holds every effect write of its key before it: in its own log, the writes numbered before it (``seq``); in the other
environments' logs, the writes logged before its time (``ts``).

Only the stores whose writes the environment watches count (a kind's ``watched``, ``proof/store_kinds.py``): tables,
buckets, queues and the SQL stores. The provider stand-in's calls are HTTP calls, no watched writes: a provider store
is left out, so a run needs two required stores of the other kinds for a moment to be torn. Which stores a write
wrote to is each kind's rule (``StoreKind.wrote``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.json_lines import read_jsonl
from ..chaos.faults import EFFECT, IDEMPOTENCY_RECORD, record_hash, record_hash_candidates
from .store_kinds import STORE_KINDS

#: At most this many moments are listed in the report (all are counted).
LISTED = 100


@dataclass(frozen=True)
class StoreRef:
    """One store of the run as the write logs name it: ``kind`` (a key of ``store_kinds.STORE_KINDS``) and ``name``
    (a table's or bucket's physical name, a queue's URL, ``TARGET:TABLE`` for SQL: ``Store.name``)."""

    kind: str
    name: str


@dataclass(frozen=True)
class _Write:
    log: str
    seq: int
    ts: float
    digest: str | None
    stores: frozenset[str]


def _stores_of(write: Mapping[str, Any], stores: Mapping[str, StoreRef]) -> frozenset[str]:
    """The run's stores (by their ``--effect`` text) that one effect write wrote to (each store's kind says)."""
    return frozenset(s for s, ref in stores.items() if STORE_KINDS[ref.kind].wrote(write, ref.name))


def _effect_writes(run_dir: Path, stores: Mapping[str, StoreRef]) -> list[_Write]:
    """Every effect write of the run to one of ``stores``, with the digest of the record its execution belongs to."""
    found: list[_Write] = []
    for path in sorted(run_dir.glob("chaos-*.jsonl")):
        current: dict[Any, str | None] = {}  # invocation -> the digest of the record its writes now belong to
        for record in read_jsonl([path]):
            if record.get("event") != "write":
                continue
            invocation = record.get("invocation")
            if record.get("role") == IDEMPOTENCY_RECORD and record.get("op") == "dynamodb.PutItem":
                current[invocation] = record_hash(record.get("record_id"))
            if record.get("role") != EFFECT:
                continue
            written = _stores_of(record, stores)
            if written:
                seq = record.get("seq")
                found.append(
                    _Write(
                        path.name,
                        seq if isinstance(seq, int) else 0,
                        float(record.get("ts") or 0.0),
                        current.get(invocation),
                        written,
                    )
                )
    return found


def torn_moments(
    run_dir: Path, kill_records: list[dict[str, Any]], stores: Mapping[str, StoreRef], optional: Set[str]
) -> list[dict[str, Any]]:
    """Every kill (``key_check.kills``: each with the key it interrupted between its effect and its completion, whether
    that is ``proved`` rather than the last effect line's guess, and its ``log``) proved to have struck a key, after
    which its key's effect was in some of the required watched stores and not in the others.

    :param stores: every store of the run by its ``--effect`` text. :param optional: the ones not required.
    :returns: one row per torn moment, in the logs' order: ``key``, ``phase``, ``queue`` (the target's label),
        ``after_write`` (the write the kill followed, an ``op``), ``written`` and ``missing`` (store texts, sorted).
        Fewer than two required watched stores: none.
    """
    required = {s: ref for s, ref in stores.items() if s not in optional and STORE_KINDS[ref.kind].watched}
    if len(required) < 2:
        return []
    writes = _effect_writes(run_dir, required)
    moments = []
    for kill in kill_records:
        key = kill.get("key")
        if not key or not kill.get("proved"):
            continue
        digests = record_hash_candidates(str(key))
        log, seq, ts = kill.get("log"), kill.get("seq"), float(kill.get("ts") or 0.0)
        written: set[str] = set()
        for w in writes:
            before = w.seq < seq if w.log == log and isinstance(seq, int) else w.ts < ts
            if before and w.digest in digests:
                written |= w.stores
        if written and len(written) < len(required):
            moments.append(
                {
                    "key": key,
                    "phase": kill.get("phase"),
                    "queue": kill.get("queue"),
                    "after_write": (kill.get("last_write") or {}).get("op"),
                    "written": sorted(written),
                    "missing": sorted(set(required) - written),
                }
            )
    return moments


def render_torn(moments: list[dict[str, Any]], count: int) -> str:
    """The terminal's line of the torn moments (listed, not failing): ``count`` of them, the first of ``moments``."""
    shown = "; ".join(
        f"{m['key']} after {m['after_write'] or m['phase']} (in {len(m['written'])}, not in {', '.join(m['missing'])})"
        for m in moments[:3]
    )
    return (
        f"torn moments (listed, not failing): {count} kills left a key's effect in some of the required stores "
        f"and not the others: {shown}" + (" ..." if count > 3 else "")
    )
