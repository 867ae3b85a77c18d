"""Forced strikes (issue 57, item 1): a small chaos run proves something, and its exit code is no matter of chance.

The kills and stalls are drawn per invocation (``fault_model.InvocationChaos``), and a poller takes a whole batch per
invocation: 20 keys in batches of 10 are two or three invocations, and the default fractions (a few percent each)
mostly strike nothing there. A handler whose declared effect writes a fresh item per execution then passes with
``0 kills struck``. So for the classes whose strike point an invocation reaches for sure once it runs its records,
the *forcible* ones (:data:`FORCIBLE`: a kill at the runtime's effect line, a kill after a watched write, a stall at
the first write or effect line, a kill after the handler returned), the run tops the draw up:

- The chaos run writes a plan into its run folder before the first send (:func:`write_plan`): the forcible fates it
  asked for (a fraction above 0) and its *tail*, the input's last ``3 x`` that many keys in their order (a tail key
  may be a line the app refuses: an invocation of it spends a try with no place to strike).
- An invocation whose batch holds a tail key, none of whose keys was forced on yet, takes a forced fate instead of
  its draw (:meth:`ForcedStrikes.choose`): among the forcible fates its poller's chaos asks for (a redrive's calm
  pollers ask for none) with fewer than :data:`MIN_STRIKES` tries so far (the drawn strikes of every invocation and
  the invocations forced on, struck or not), the one with the fewest, in the table's order. It strikes at its point
  for sure (a kill after the first watched write, not one write in two).
- The pollers share markers in the run folder's ``forced/``: a drawn strike leaves one; a forced fate is claimed
  before the invocation runs (``claim-<fate>-<n>``, created with ``O_EXCL``, so two pollers never take one try) and
  marks its batch's keys then, so a batch is forced on once, and never sent towards its DLQ by force.

The kill record carries ``forced``; the report counts them per class (``proof/faults_struck.py``, ``faults.forced``)
and says which classes of the crash window still never struck (the verdict line: ``OK, crash window untested``).
Only the chaos command writes a plan (the folder's runs clear it, ``engine/pipeline.RUN_FILES``): the demo's
thousands of payments strike every class by their draw.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .fault_classes import CLASS_OF_PHASE, FAULT_CLASSES, ChaosConfig, FaultClass

#: How many strikes (or tries) each forcible class the run asked for gets at least, when the run has the keys.
MIN_STRIKES = 3
#: The fault classes whose strike point an invocation reaches for sure once it runs its records (module docstring),
#: in the order a forced fate is picked among equals. A random moment is not one: it strikes only if the invocation
#: still runs then.
FORCIBLE: tuple[str, ...] = ("after_effect", "after_write", "stall", "after_complete")
#: The plan's file in the run folder, and the folder of the markers.
PLAN_FILE = "forced-strikes.json"
MARKERS = "forced"


def forcible_classes() -> tuple[FaultClass, ...]:
    """The :data:`FORCIBLE` rows of ``fault_classes.FAULT_CLASSES``, in :data:`FORCIBLE`'s order."""
    by_name = {c.name: c for c in FAULT_CLASSES}
    return tuple(by_name[name] for name in FORCIBLE)


def fate_of(phase: str) -> str:
    """The fate a kill in ``phase`` is a strike of (``fault_classes.CLASS_OF_PHASE``: a kill at the runtime's effect
    line, ``after_effect``, is one of the ``after_charge`` fate; a phase of no class is its own fate)."""
    cls = CLASS_OF_PHASE.get(phase)
    return str(cls.fate) if cls is not None and cls.fate is not None else phase


def write_plan(run_dir: Path, chaos: ChaosConfig, keys: Sequence[str]) -> dict[str, Any] | None:
    """Write the run's plan (module docstring) into ``run_dir`` and return it: the forcible fates ``chaos`` asks for
    and the tail of ``keys`` (the input's keys in their order, repeats kept once, where they first come). ``None``,
    and no plan left in ``run_dir``, when it asks for none or there are no keys."""
    path = run_dir / PLAN_FILE
    path.unlink(missing_ok=True)
    shutil.rmtree(run_dir / MARKERS, ignore_errors=True)  # a run before in this folder counts for nothing here
    fates = [str(c.fate) for c in forcible_classes() if getattr(chaos, c.field) > 0]
    distinct = list(dict.fromkeys(keys))
    if not fates or not distinct:
        return None
    plan = {"min_strikes": MIN_STRIKES, "fates": fates, "tail_keys": distinct[-MIN_STRIKES * len(fates) :]}
    (run_dir / MARKERS).mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan, indent=1), encoding="utf-8")
    return plan


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def _touch(path: Path) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


class ForcedStrikes:
    """The plan as a poller process reads it (:meth:`load`), and the markers all processes share."""

    def __init__(self, folder: Path, fates: Sequence[str], tail_keys: Iterable[str], min_strikes: int) -> None:
        self.folder = folder
        self.fates = list(fates)
        self.tail = set(tail_keys)
        self.min_strikes = min_strikes

    @classmethod
    def load(cls, run_dir: Path) -> ForcedStrikes | None:
        """The plan of the run in ``run_dir``; ``None`` when there is none (not a chaos run, or nothing forcible)."""
        try:
            plan = json.loads((run_dir / PLAN_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cls(run_dir / MARKERS, plan["fates"], plan["tail_keys"], int(plan["min_strikes"]))

    def tries(self, fate: str) -> int:
        """``fate``'s tries so far: its drawn strikes, and the invocations it was forced on (struck or not)."""
        return sum(1 for kind in ("struck", "claim") for _ in self.folder.glob(f"{kind}-{fate}-*"))

    def _claim(self, fate: str) -> bool:
        """Take one of ``fate``'s tries left, atomically among the pollers: the first free ``claim-<fate>-<n>``
        created with ``O_EXCL``. ``False``: none left (another poller took the last one)."""
        drawn = sum(1 for _ in self.folder.glob(f"struck-{fate}-*"))
        for n in range(max(0, self.min_strikes - drawn)):
            try:
                os.close(os.open(self.folder / f"claim-{fate}-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            except FileExistsError:
                continue
            return True
        return False

    def choose(self, batch_keys: Sequence[str], asked: Mapping[str, float]) -> str | None:
        """The fate to force on an invocation of ``batch_keys`` (module docstring), ``None`` for the draw's. Only a
        fate the poller's own chaos asks for (``asked``: ``ChaosConfig.fates()``; a redrive's calm pollers ask for
        none). The fate is claimed and the batch's keys marked here, before the invocation runs, so two pollers
        never force one batch, nor one class past its tries."""
        if not self.tail.intersection(batch_keys):
            return None
        if any((self.folder / f"key-{_digest(k)}").exists() for k in batch_keys):
            return None
        tries = {fate: self.tries(fate) for fate in self.fates if asked.get(fate, 0.0) > 0}
        for fate in sorted(tries, key=lambda f: (tries[f], self.fates.index(f))):
            if tries[fate] < self.min_strikes and self._claim(fate):
                for key in batch_keys:
                    _touch(self.folder / f"key-{_digest(key)}")
                return fate
        return None

    def struck(self, phase: str) -> None:
        """A drawn kill in ``phase``: one of its fate's tries (a forced one counts by its claim)."""
        fate = fate_of(phase)
        if fate in self.fates:
            _touch(self.folder / f"struck-{fate}-{uuid.uuid4().hex}")
