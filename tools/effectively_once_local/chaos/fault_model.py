"""Chaos for the local event source mapping runner: which invocations crash, time out or deliver duplicates.

The runner injects faults from outside the handler. Any handler on ``effectively_once_runtime``: the poller reads the
handler's stdout (``runner.execution_environment.EffectTap``), and on the runtime's effect line (written and flushed
after the effect returned, before the idempotency record is completed) it kills the process there ("after the effect,
before completion") or stalls past the deadline. A profile may name a seam of its own instead (the payments sample's
gateway, ``payments_view.ChaosGateway``: a crash after the charge; a stall before the charge). Around the invocation:
a crash after the handler completed, before the response reaches the event source mapping. A crash is a real
``SIGKILL`` of the poller process, as nothing survives a killed execution environment.

Attribution is exact: a kill record names its process, invocation and Lambda request id, and the key it interrupted
is derived after the run from what that process logged before it died: the last effect line of the killed request
in its function log (the runtime's line carries ``function_request_id``), or for the payments seam the last provider
call of the killed invocation. Never from a variable in memory: the watchdog thread could read one while the
handler already logged the effect of the next record, and book the kill to the previous one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

from .fault_classes import ChaosConfig as ChaosConfig  # its home is the table of fault classes; read from here too
from .faults import KILL_POINT_ROLES
from .forced_strikes import ForcedStrikes, fate_of

# Phases a kill can hit; the report checks provider replays against the first.
AFTER_CHARGE = "after_charge"  # after the side effect (the payments charge), before the record is completed
#: The same kill point for any handler on the runtime: at its effect line, before the record is completed.
AFTER_EFFECT = "after_effect"
AFTER_COMPLETE = "after_complete"
TIMEOUT = "timeout"
DEADLINE = "deadline"  # not injected: the watchdog killed an invocation that ran past its deadline
#: From outside the app (``chaos/faults.py``): a kill right after a write the local AWS accepted (an effect of any kind,
#: declared or not, or a send to the DLQ), and a kill at a random moment inside an invocation.
AFTER_WRITE = "after_write"
RANDOM_MOMENT = "random_moment"
#: The shortest window a random-moment kill is drawn in (``InvocationChaos.random_window``), in seconds: the first
#: invocation of an environment, with no duration seen yet, and invocations shorter than half of it.
RANDOM_WINDOW_FLOOR_SECONDS = 1.0
#: Every phase a kill record can carry, in the reports' order: the kill kinds. :meth:`InvocationChaos.crash` refuses
#: any other, so a new kind is added here first; ``tests/local/test_fault_kinds.py`` then fails until the reports
#: (``proof/key_check.KILL_KINDS``: the JSON's ``total.kills`` and the terminal's ``kills:`` line) and
#: docs/extending.md name it. ``AFTER_CHARGE`` is the payments seam's, counted by the payments report.
KILL_PHASES: tuple[str, ...] = (
    AFTER_CHARGE,
    AFTER_EFFECT,
    AFTER_WRITE,
    RANDOM_MOMENT,
    AFTER_COMPLETE,
    TIMEOUT,
    DEADLINE,
)


class EventLog:
    """Append-only JSON Lines file, one per process, flushed per line so a SIGKILL loses nothing written. Every line
    carries ``ts``, the wall-clock time it was written (epoch seconds, a float; the run's picture,
    ``report/page.py``, plots it), after the record's own fields."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "a", buffering=1, encoding="utf-8")

    def write(self, **record: Any) -> None:
        self._fh.write(json.dumps({**record, "ts": time.time()}, separators=(",", ":")) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())


def pick_fate(fates: dict[str, float], roll: float) -> str | None:
    """The fate a ``roll`` in 0..1 draws among ``fates`` (:meth:`ChaosConfig.fates`, in its order): the first whose
    running sum of fractions passes the roll; ``None`` past them all (no fault this invocation)."""
    bound = 0.0
    for fate, fraction in fates.items():
        bound += fraction
        if roll < bound:
            return fate
    return None


def kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class InvocationChaos:
    """Decides each invocation's fate and carries it to the gateway wrapper."""

    def __init__(
        self,
        config: ChaosConfig,
        log: EventLog,
        queue: str,
        *,
        at_effect_line: bool = False,
        forcing: ForcedStrikes | None = None,
    ) -> None:
        self.config = config
        #: The chaos run's plan of forced strikes (``chaos/forced_strikes.py``); ``None``: every fate is drawn.
        self.forcing = forcing
        #: This invocation's fate when it was forced, not drawn (``None``: drawn).
        self.forced: str | None = None
        #: Inject "after the effect" kills and stalls at the runtime's effect line (any handler), not in a gateway.
        self.at_effect_line = at_effect_line
        self.invocation = 0
        self.request_id: str | None = None
        self.batch_keys: list[str] = []
        self.log = log
        self.queue = queue
        self.rng = random.Random(f"{config.seed}-{os.getpid()}-{time.time_ns()}")
        self.fate: str | None = None
        self.deadline: float = 0.0
        # The payment whose provider call started last in this invocation; its idempotency record may not be
        # completed yet, so a kill now can make its redelivery a provider replay.
        self.inflight_payment: str | None = None
        self.stalling = False
        #: The one counter of this environment's accepted writes and kills (``chaos/faults.py``).
        self.seq = 0
        self.last_write: dict[str, Any] | None = None
        self.effect_line_key: str | None = None
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._started = time.monotonic()
        #: The longest invocation of this environment so far, in seconds (:meth:`random_window`).
        self.longest = 0.0
        #: Between :meth:`begin` and :meth:`end`: the handler's calls, not the runner's own (receive, delete, an
        #: on-failure record), get SDK faults (``chaos/sdk_faults.py``).
        self.running = False

    def begin(self, deadline: float, batch_keys: list[str] | None = None, request_id: str | None = None) -> None:
        """An invocation starts: logged (``invocation``, with its request id and its batch's keys, so the stores
        can hold a key's new items against its deliveries: ``proof/executions.py``), then its fate drawn."""
        self.invocation += 1
        self.running = True
        self.request_id = request_id
        self.batch_keys = list(batch_keys or [])
        self.log.write(
            event="invocation", invocation=self.invocation, request_id=request_id, batch_keys=self.batch_keys
        )
        self.deadline = deadline
        self.inflight_payment = None
        self.stalling = False
        self.last_write = None
        self.effect_line_key = None
        self.fate = pick_fate(self.config.fates(), self.rng.random())
        self.forced = self.forcing.choose(self.batch_keys, self.config.fates()) if self.forcing is not None else None
        if self.forced is not None:
            self.fate = self.forced  # the draw is still made: a seed draws the fates it drew before
        self._started = time.monotonic()
        if self.fate == RANDOM_MOMENT:
            # A moment drawn in the time the invocation is likely to run (:meth:`random_window`): it strikes wherever
            # the code is then, or not at all if the invocation ends first (end() cancels it).
            delay = self.rng.uniform(0.0, min(max(0.0, deadline - self._started), self.random_window()))
            self._timer = threading.Timer(delay, self.crash, args=(RANDOM_MOMENT,))
            self._timer.daemon = True
            self._timer.start()

    def random_window(self) -> float:
        """Seconds from an invocation's start within which a random-moment kill is drawn (never past its deadline):
        twice the longest invocation this environment ran, at least :data:`RANDOM_WINDOW_FLOOR_SECONDS`. A moment
        drawn over the whole function timeout would almost never fall inside the work when the timeout is long
        (a 300 s timeout over half a second of work: one draw in 600), and the fate would be spent on nothing."""
        return max(RANDOM_WINDOW_FLOOR_SECONDS, 2.0 * self.longest)

    def end(self) -> None:
        """The invocation returned: its duration kept (:meth:`random_window`), and a random-moment kill not struck
        yet called off."""
        self.running = False
        self.longest = max(self.longest, time.monotonic() - self._started)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def on_return(self) -> None:
        """The handler returned (or raised) and the runner has not acted on it yet (the batch not deleted, the
        asynchronous attempt not settled): the kill this invocation drew, if it strikes here (``after_complete``).
        Both loops call it (``runner/batch_poller.py``, ``runner/async_poller.py``), so a kind that strikes around
        the handler is added here alone."""
        if self.fate == AFTER_COMPLETE:
            self.crash(AFTER_COMPLETE)

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def crash(self, phase: str) -> None:
        """Log the kill and ``SIGKILL`` this process.

        :raises ValueError: ``phase`` is not in :data:`KILL_PHASES` (nothing is logged or killed).
        """
        if phase not in KILL_PHASES:
            raise ValueError(f"kill phase {phase!r} is not one of {KILL_PHASES}: add it to fault_model.KILL_PHASES")
        forced = self.forced is not None and fate_of(phase) == self.forced
        with self._lock:
            self.log.write(
                event="kill",
                seq=self._next(),
                phase=phase,
                queue=self.queue,
                pid=os.getpid(),
                invocation=self.invocation,
                request_id=self.request_id,
                inflight_payment=self.inflight_payment,
                batch_keys=self.batch_keys,
                last_write=self.last_write,
                # A stall struck at the runtime's effect line: the key of that line, read in the handler's thread.
                effect_line_key=self.effect_line_key,
                # Struck by force (``chaos/forced_strikes.py``), not by the draw.
                forced=forced,
            )
            if self.forcing is not None and not forced:
                self.forcing.struck(phase)
            kill_self()

    def on_write(self, write: dict[str, Any]) -> None:
        """An accepted write (``faults.WriteWatch``): numbered and logged, then the kill or stall this invocation drew,
        if it strikes here. Only writes in ``faults.KILL_POINT_ROLES`` are kill points."""
        with self._lock:
            record = {"seq": self._next(), **write, "invocation": self.invocation, "request_id": self.request_id}
            self.log.write(event="write", pid=os.getpid(), **record)
            self.last_write = record
        if write.get("role") not in KILL_POINT_ROLES:
            return
        if self.fate == AFTER_WRITE and (self.forced == AFTER_WRITE or self.rng.random() < 0.5):
            self.fate = None
            self.crash(AFTER_WRITE)
        elif self.fate == TIMEOUT and self.at_effect_line:
            self._stall()

    def on_sdk_fault(self, fault: dict[str, Any]) -> None:
        """An SDK fault injected into one of the handler's calls (``chaos/sdk_faults.py``): numbered with the writes and
        logged (``sdk_fault``), so a key it cost shows what hit it."""
        with self._lock:
            record = {"seq": self._next(), **fault, "invocation": self.invocation, "request_id": self.request_id}
            self.log.write(event="sdk_fault", pid=os.getpid(), **record)

    def on_batch_call(self, call: dict[str, Any]) -> None:
        """A batch call of the handler's answered per entry (``chaos/sdk_faults.py``, while per-entry failures are
        asked for): logged (``batch_call``), so a run that struck none can tell whether it made any."""
        with self._lock:
            self.log.write(event="batch_call", pid=os.getpid(), invocation=self.invocation, **call)

    def _stall(self) -> None:
        self.fate = None
        self.stalling = True
        # The runner's watchdog kills the process at the invocation's deadline, the record still in progress.
        time.sleep(max(0.0, self.deadline - time.monotonic()) + 5)

    def on_effect(self, key: str | None, effect: str | None) -> None:
        """The runtime's effect line was written: the effect for ``key`` returned, its record is not completed yet.
        The line itself is already in the function log (the tap writes it through first): that is what the report
        books a kill by. Then the kill or stall this invocation drew, if it is to happen here."""
        if not self.at_effect_line:
            return
        if self.fate == AFTER_CHARGE:
            self.fate = None
            self.crash(AFTER_EFFECT)
        elif self.fate == TIMEOUT:
            self.effect_line_key = key
            self._stall()
