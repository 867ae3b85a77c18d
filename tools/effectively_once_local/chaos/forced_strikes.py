"""Forced strikes (issue 57, item 1): a small chaos run proves something, and its exit code is no matter of chance.

The kills and stalls are drawn per invocation (``fault_model.InvocationChaos``), and a poller takes a whole batch per
invocation: 20 keys in batches of 10 are two or three invocations, and the default fractions (a few percent each)
mostly strike nothing there. A handler whose declared effect writes a fresh item per execution then passes with
``0 kills struck``. So for the classes whose strike point an invocation reaches for sure once it runs its records,
the *forcible* ones (:data:`FORCIBLE`: a kill at the runtime's effect line, a kill after a watched write, a stall at
the first write or effect line, a kill after the handler returned), the run tops the draw up:

- The chaos run writes a plan into its run folder before the first send (:func:`write_plan`): the forcible fates it
  asked for (a fraction above 0) and its *tail*, the input's last ``3 x`` that many keys in their order.
- An invocation whose batch holds a tail key, none of whose keys a forced strike has hit yet, takes a forced fate
  instead of its draw (:meth:`ForcedStrikes.choose`): among the forcible fates with fewer than :data:`MIN_STRIKES`
  tries so far (the strikes of every invocation, drawn or forced, and the forced fates that found no place), the one
  with the fewest, in the table's order. It strikes at its point for sure (a kill after the first watched write, not
  one write in two).
- Each strike leaves a marker in the run folder's ``forced/`` (the processes share nothing else); a forced strike
  also marks its batch's keys, so a batch is struck by force once and never dead-lettered by it.

The kill record carries ``forced``; the report counts them per class (``proof/faults_struck.py``, ``faults.forced``)
and says which classes of the crash window still never struck (the verdict line: ``OK, crash window untested``).
Only the chaos command writes a plan: the demo's thousands of payments strike every class by their draw.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .fault_classes import FAULT_CLASSES, ChaosConfig, FaultClass

#: How many strikes (or tries) each forcible class the run asked for gets at least, when the run has the keys.
MIN_STRIKES = 3
#: The fault classes whose strike point an invocation reaches for sure once it runs its records (module docstring),
#: in the order a forced fate is picked among equals. A random moment is not one: it strikes only if the invocation
#: still runs then.
FORCIBLE: tuple[str, ...] = ("after_effect", "after_write", "stall", "after_complete")
#: The plan's file in the run folder, and the folder of the markers.
PLAN_FILE = "forced-strikes.json"
MARKERS = "forced"
#: A kill's phase -> the fate it is a strike of (the runtime's effect line kills as ``after_effect``, the payments
#: seam as ``after_charge``: both are the ``after_charge`` fate).
_FATE_OF_PHASE = {"after_effect": "after_charge", "after_charge": "after_charge"}


def forcible_classes() -> tuple[FaultClass, ...]:
    """The :data:`FORCIBLE` rows of ``fault_classes.FAULT_CLASSES``, in :data:`FORCIBLE`'s order."""
    by_name = {c.name: c for c in FAULT_CLASSES}
    return tuple(by_name[name] for name in FORCIBLE)


def fate_of(phase: str) -> str:
    """The fate a kill in ``phase`` is a strike of (a stall's kill is ``timeout``, as its fate)."""
    return _FATE_OF_PHASE.get(phase, phase)


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
        """``fate``'s strikes so far, drawn or forced, and its forced tries that found no place."""
        return sum(1 for kind in ("struck", "missed") for _ in self.folder.glob(f"{kind}-{fate}-*"))

    def choose(self, batch_keys: Sequence[str]) -> str | None:
        """The fate to force on an invocation of ``batch_keys`` (module docstring), ``None`` for the draw's."""
        if not self.tail.intersection(batch_keys):
            return None
        if any((self.folder / f"key-{_digest(k)}").exists() for k in batch_keys):
            return None
        tries = {fate: self.tries(fate) for fate in self.fates}
        short = [fate for fate in self.fates if tries[fate] < self.min_strikes]
        return min(short, key=lambda fate: (tries[fate], self.fates.index(fate))) if short else None

    def struck(self, phase: str, forced: bool, batch_keys: Sequence[str]) -> None:
        """A kill in ``phase``; a forced one also marks its batch's keys."""
        fate = fate_of(phase)
        if fate not in self.fates:
            return
        _touch(self.folder / f"struck-{fate}-{uuid.uuid4().hex}")
        if forced:
            for key in batch_keys:
                _touch(self.folder / f"key-{_digest(key)}")

    def missed(self, fate: str) -> None:
        """A forced ``fate`` the invocation gave no place (no effect line, no watched write)."""
        _touch(self.folder / f"missed-{fate}-{uuid.uuid4().hex}")
