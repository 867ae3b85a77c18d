"""How many effects a key's items in a store make: every delivery's writes count (issue 43, item 1a).

An effect is an execution's writes, not an item (``proof/stores.py``). Each item the run added is tied to the
write that first made it, from every environment's write log (``chaos/faults.py``: every accepted write names what it
wrote), and rewrites of one item are one item: never a duplicate.

- **The runtime's per-record boundary, kept exactly.** A write after the Powertools in-progress put of a record
  belongs to that record's execution (``<chaos log>#<invocation>#<record id>``): two records of one batch whose keys
  normalise alike are two executions, and an effect's two writes (a row and its audit row) one.
- **Elsewhere**, a handler that loops over its batch, reads every record first, writes with ``batch_write_item`` or
  threads shows no such boundary: its writes belong to the invocation only. There the new items of a key in one
  invocation are held against the key's deliveries in that invocation's batch (the chaos log's ``invocation``
  lines, ``fault_model.InvocationChaos.begin``): two deliveries of one key that leave two new items are two effects,
  whether or not they share a batch. A delivery may write more than one item (a row and its audit row): the items
  one delivery writes are learned from the run's keys delivered once (the most common count; 1 when there are none),
  and a key's items in an invocation make ``ceil(items / that figure)`` effects, at most its deliveries there. A key
  delivered once in an invocation whose items are a multiple (two or more) of the figure is flagged, never counted
  twice: one delivery cannot be told from two there.
- An item no write log names (a provider call, a write from outside the run's functions), and a write of an
  invocation whose batch the logs do not show, count as before: one effect per execution.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.json_lines import read_jsonl
from ..chaos.faults import IDEMPOTENCY_RECORD

#: The chaos log's line of an invocation's start, with its request id and batch keys (``InvocationChaos.begin``).
INVOCATION_EVENT = "invocation"


@dataclass(frozen=True)
class Writer:
    """The write that first made an item: its ``execution`` (``<chaos log>#<invocation>#<record id>``), the
    invocation's ``request_id``, and ``bounded``: a Powertools in-progress put of a record came before it in its
    invocation (the runtime's per-record boundary)."""

    execution: str
    request_id: str | None = None
    bounded: bool = True


@dataclass
class Counted:
    """A store's effects per key (:func:`count_effects`) with what the count learned: ``items_per_delivery`` (the
    figure, ``None`` when no item needed it) and ``multiples`` (the keys flagged, sorted)."""

    effects: Counter[str]
    items_per_delivery: int | None = None
    multiples: list[str] = field(default_factory=list)


def writers(run_dir: Path) -> dict[tuple[str, str], Writer]:
    """``(store name, identity)`` -> the write that first made it (:class:`Writer`), from every environment's write
    log (``chaos-*.jsonl``)."""
    first: dict[tuple[str, str], tuple[float, Writer]] = {}
    for path in sorted(run_dir.glob("chaos-*.jsonl")):
        current: dict[Any, str | None] = {}  # invocation -> the record its writes now belong to
        for record in read_jsonl([path]):
            if record.get("event") != "write":
                continue
            invocation = record.get("invocation")
            if record.get("role") == IDEMPOTENCY_RECORD and record.get("op") == "dynamodb.PutItem":
                current[invocation] = record.get("record_id")
            record_id = current.get(invocation)
            writer = Writer(f"{path.name}#{invocation}#{record_id}", record.get("request_id"), record_id is not None)
            when = float(record.get("ts") or 0.0)
            for store, identity in record.get("items") or []:
                seen = first.get((store, identity))
                if seen is None or when < seen[0]:
                    first[(store, identity)] = (when, writer)
    return {item: writer for item, (_, writer) in first.items()}


def batches(run_dir: Path, same: Callable[[str], str] = str) -> dict[str, Counter[str]]:
    """Request id -> the deliveries per business key (normalised with ``same``) in that invocation's batch, from the
    chaos logs' ``invocation`` lines; a record without a key is left out."""
    found: dict[str, Counter[str]] = {}
    for record in read_jsonl(sorted(run_dir.glob("chaos-*.jsonl"))):
        if record.get("event") == INVOCATION_EVENT and record.get("request_id"):
            found[str(record["request_id"])] = Counter(same(str(k)) for k in record.get("batch_keys") or [] if k)
    return found


def _figure(loose: Mapping[str, Counter[str]], delivered: Counter[str], bounded: Iterable[str]) -> int:
    """The items one delivery writes: the most common item count of the keys delivered once in the whole run (the
    smallest of equally common ones), 1 when there are none."""
    others = set(bounded)
    single = Counter(sum(per.values()) for key, per in loose.items() if delivered[key] == 1 and key not in others)
    if not single:
        return 1
    return max(single.items(), key=lambda kv: (kv[1], -kv[0]))[0]


def count_effects(
    items: Iterable[tuple[str, str]],
    store: str,
    written: Mapping[tuple[str, str], Writer] | None,
    invoked: Mapping[str, Counter[str]] | None,
) -> Counted:
    """Effects per key of the ``items`` a store gained (``(identity, normalised key)`` each; the module docstring):
    ``store`` is the store's name in the write logs, ``written`` :func:`writers` (``None``: every item counts alone),
    ``invoked`` :func:`batches` (``None``: every write of an invocation is one execution, as with the boundary)."""
    bounded: defaultdict[str, set[str]] = defaultdict(set)
    loose: defaultdict[str, Counter[str]] = defaultdict(Counter)  # key -> new items per request id
    for identity, key in items:
        writer = (written or {}).get((store, identity))
        if writer is None:
            bounded[key].add(f"item {identity}")
        elif writer.bounded or invoked is None or writer.request_id not in invoked:
            bounded[key].add(writer.execution)
        else:
            loose[key][str(writer.request_id)] += 1
    effects = Counter({key: len(executions) for key, executions in bounded.items()})
    if not loose or invoked is None:
        return Counted(effects)
    delivered: Counter[str] = Counter()
    for batch in invoked.values():
        delivered.update(batch)
    figure = _figure(loose, delivered, bounded)
    multiples = set()
    for key, per_request in loose.items():
        for request_id, n in per_request.items():
            deliveries = max(1, invoked[request_id][key])
            effects[key] += min(deliveries, -(-n // figure))
            if deliveries == 1 and n >= 2 * figure and n % figure == 0:
                multiples.add(key)
    return Counted(effects, figure, sorted(multiples))
