"""How many effects a key's items in a store make: every delivery's writes count (issue 43, item 1a).

An effect is an execution's writes, not an item (``proof/stores.py``). Each item the run added is tied to the
write that first made it, from every environment's write log (``chaos/faults.py``: every accepted write names what it
wrote), and rewrites of one item are one item: never a duplicate.

- **The runtime's per-record boundary, kept exactly.** A write after the Powertools in-progress put of a record
  belongs to that record's execution (``<chaos log>#<invocation>#<record id>``): two records of one batch whose keys
  normalise alike are two executions, and an effect's two writes (a row and its audit row) one.
- **Elsewhere**, a handler that loops over its batch, reads every record first, writes with ``batch_write_item`` or
  threads shows no such boundary: its writes belong to the invocation only. There a key's new items are held against
  its deliveries (the chaos log's ``invocation`` lines give each invocation's batch,
  ``fault_model.InvocationChaos.begin``): two deliveries of one key that leave two new items are two effects,
  whether or not they share a batch. A delivery may write more than one item (a row and its audit row): the items
  one delivery writes are learned from the keys whose new items all came from one invocation that delivered them
  once (the most common count). A key's new items across the run make ``ceil(items / that figure)`` effects, at most
  its deliveries, so a kill between a row and its audit row, whose replay writes the audit row, is still one
  effect. A key delivered once whose items are a multiple (two or more) of the figure is flagged, never counted
  twice: one delivery cannot be told from two there. Without a key to learn from, the figure is unknown and each
  invocation that wrote new items of a key is one effect.
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
    #: The chaos log's file name and the write's number in it.
    log: str = ""
    seq: int = 0


@dataclass
class Counted:
    """A store's effects per key (:func:`count_effects`) with what the count learned: ``items_per_delivery`` (the
    figure, ``None`` when no item needed it) and ``multiples`` (the keys flagged, sorted)."""

    effects: Counter[str]
    items_per_delivery: int | None = None
    multiples: list[str] = field(default_factory=list)
    #: Some items had no per-record boundary (the figure was needed), and the keys it was learned from.
    loose: bool = False
    learned_from: int = 0


def all_writes(run_dir: Path) -> dict[tuple[str, str], list[Writer]]:
    """``(store name, identity)`` -> every write of it (:class:`Writer`), first first, from every environment's
    write log (``chaos-*.jsonl``)."""
    found: defaultdict[tuple[str, str], list[tuple[float, Writer]]] = defaultdict(list)
    for path in sorted(run_dir.glob("chaos-*.jsonl")):
        current: dict[Any, str | None] = {}  # invocation -> the record its writes now belong to
        for record in read_jsonl([path]):
            if record.get("event") != "write":
                continue
            invocation = record.get("invocation")
            if record.get("role") == IDEMPOTENCY_RECORD and record.get("op") == "dynamodb.PutItem":
                current[invocation] = record.get("record_id")
            record_id = current.get(invocation)
            seq = record.get("seq")
            writer = Writer(
                f"{path.name}#{invocation}#{record_id}",
                record.get("request_id"),
                record_id is not None,
                path.name,
                seq if isinstance(seq, int) else 0,
            )
            for store, identity in record.get("items") or []:
                found[(store, identity)].append((float(record.get("ts") or 0.0), writer))
    return {item: [w for _, w in sorted(writes, key=lambda tw: tw[0])] for item, writes in found.items()}


def writers(run_dir: Path) -> dict[tuple[str, str], Writer]:
    """``(store name, identity)`` -> the write that first made it (:class:`Writer`), from every environment's write
    log (``chaos-*.jsonl``)."""
    return {item: writes[0] for item, writes in all_writes(run_dir).items()}


def rewritten(
    item_keys: Mapping[tuple[str, str], str], writes: Mapping[tuple[str, str], list[Writer]], effects: Counter[str]
) -> dict[str, int]:
    """Per key, the times its items were written again beyond its effects (a redelivery after an error or a kill, a
    duplicate delivery, rewriting the same item): the invocations that wrote its items, less its effects; only keys
    with more. ``item_keys``: each item the run added and its business key (:attr:`stores.Store.item_keys`)."""
    invocations: defaultdict[str, set[str]] = defaultdict(set)
    for item, key in item_keys.items():
        for w in writes.get(item, []):
            invocations[key].add(w.execution if w.bounded else f"{w.log}#{w.request_id}")
    return {key: len(found) - effects[key] for key, found in sorted(invocations.items()) if len(found) > effects[key]}


def batch_kills(
    kill_records: Iterable[Mapping[str, Any]],
    writes: Mapping[tuple[str, str], list[Writer]],
    item_keys: Mapping[tuple[str, str], str],
) -> list[dict[str, Any]]:
    """A kill replays its whole batch: for each kill, every other key whose items its invocation wrote before it,
    where no per-record boundary shows (a handler not built on the runtime; the runtime's completed records are
    answered by their idempotency record, not run again). One record per kill and key, like the kill's own
    (``key_check.kills``), with ``proved`` and ``batch``: ``True``."""
    written: defaultdict[tuple[str, str | None], list[tuple[int, str]]] = defaultdict(list)
    for item, key in item_keys.items():
        for w in writes.get(item, []):
            if not w.bounded:
                written[(w.log, w.request_id)].append((w.seq, key))
    found = []
    for kill in kill_records:
        seq = kill.get("seq")
        if not kill.get("request_id") or not isinstance(seq, int):
            continue
        keys = {key for n, key in written.get((str(kill.get("log")), kill.get("request_id")), []) if n < seq}
        for key in sorted(keys - {kill.get("key")}):
            found.append({**kill, "key": key, "proved": True, "batch": True})
    return found


def batch_keys(run_dir: Path, same: Callable[[str], str] = str) -> dict[str, list[str]]:
    """Request id -> the business keys (normalised with ``same``) of that invocation's batch, in the batch's order,
    from the chaos logs' ``invocation`` lines; a record without a key is left out."""
    found: dict[str, list[str]] = {}
    for record in read_jsonl(sorted(run_dir.glob("chaos-*.jsonl"))):
        if record.get("event") == INVOCATION_EVENT and record.get("request_id"):
            found[str(record["request_id"])] = [same(str(k)) for k in record.get("batch_keys") or [] if k]
    return found


def batches(run_dir: Path, same: Callable[[str], str] = str) -> dict[str, Counter[str]]:
    """Request id -> the deliveries per business key in that invocation's batch (:func:`batch_keys`, counted)."""
    return {request_id: Counter(keys) for request_id, keys in batch_keys(run_dir, same).items()}


def _figure(loose: Mapping[str, Counter[str]], invoked: Mapping[str, Counter[str]]) -> tuple[int | None, int]:
    """The items one delivery writes, and the keys it was learned from: the most common item count (the smallest of
    equally common ones) of the keys whose new items all came from one invocation that delivered them once;
    ``None`` without such keys (the figure is unknown)."""
    single = Counter(
        n
        for key, per_request in loose.items()
        if len(per_request) == 1
        for request_id, n in per_request.items()
        if invoked[request_id][key] == 1
    )
    if not single:
        return None, 0
    return max(single.items(), key=lambda kv: (kv[1], -kv[0]))[0], sum(single.values())


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
    figure, samples = _figure(loose, invoked)
    multiples = set()
    for key, per_request in loose.items():
        new = sum(per_request.values())
        if figure is None:  # unknown: one effect per invocation that wrote new items of the key
            effects[key] += len(per_request)
            continue
        deliveries = max(1, delivered[key])
        effects[key] += min(deliveries, -(-new // figure))
        if deliveries == 1 and new >= 2 * figure and new % figure == 0:
            multiples.add(key)
    return Counted(effects, figure, sorted(multiples), loose=True, learned_from=samples)
