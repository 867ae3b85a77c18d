"""Kills are attributed exactly: a real poller-like process is SIGKILLed at the racy moments, and the report books
each kill to the key the killed process had really reached, read from that process's own logs.

The race (seen in a 10,000-payment demo with 4 pollers per queue): the watchdog thread reads the in-flight marker
and starts writing its kill record; meanwhile the handler moves on, logs the provider call (or the effect line) of
the next record, and is killed in it. Booked to the marker's record, the next record's replay looked unexplained.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from effectively_once_local.chaos.fault_model import DEADLINE, ChaosConfig, EventLog, InvocationChaos
from effectively_once_local.payments.payments_report import run_log_counts
from effectively_once_local.payments.payments_view import ChaosGateway
from effectively_once_local.proof import key_check as effects
from effectively_once_local.runner.mapping_runner import EffectTap


class _SlowKillLog(EventLog):
    """The kill record's write is slow (fsync on a busy disk): the handler's thread keeps running meanwhile."""

    def __init__(self, path: Path, marker_read: Any, next_started: Any) -> None:
        super().__init__(path)
        self.marker_read, self.next_started = marker_read, next_started

    def write(self, **record: Any) -> None:
        if record.get("event") == "kill":
            self.marker_read.set()  # the record's fields, the marker among them, are read by now
            self.next_started.wait(10)
        super().write(**record)


class _Provider:
    def __init__(self, on_call: Any = None, replayed: bool = False) -> None:
        self.on_call, self.replayed = on_call, replayed

    def charge(self, payment: Any, *, idempotency_key: str | None = None) -> Any:
        if self.on_call is not None:
            self.on_call(payment)
        return SimpleNamespace(charge_id=f"ch_{payment.payment_id}", replayed=self.replayed)


def _payments_poller(run_dir: str) -> None:
    """Charges A, then B; the watchdog fires after A and its kill lands inside B's provider call."""
    pid = os.getpid()
    marker_read, next_started = threading.Event(), threading.Event()
    chaos = InvocationChaos(
        ChaosConfig(),
        _SlowKillLog(Path(run_dir) / f"chaos-standard-{pid}.jsonl", marker_read, next_started),
        "standard",
    )
    provider_log = EventLog(Path(run_dir) / f"provider-standard-{pid}.jsonl")

    def in_call(payment: Any) -> None:
        if payment.payment_id == "B":
            next_started.set()
            time.sleep(30)  # killed here

    gateway = ChaosGateway(_Provider(in_call), chaos, provider_log)
    chaos.begin(time.monotonic() + 60)
    gateway.charge(SimpleNamespace(payment_id="A"), idempotency_key="A")
    threading.Thread(target=chaos.crash, args=(DEADLINE,), daemon=True).start()
    marker_read.wait(10)
    gateway.charge(SimpleNamespace(payment_id="B"), idempotency_key="B")


def _run_killed(target: Any, run_dir: Path) -> None:
    proc = mp.get_context("spawn").Process(target=target, args=(str(run_dir),))
    proc.start()
    proc.join(60)
    assert proc.exitcode == -9, "the process must die by SIGKILL"


def test_kill_landing_in_the_next_provider_call_is_booked_to_that_payment(tmp_path: Path) -> None:
    _run_killed(_payments_poller, tmp_path)
    kill = [
        ln for ln in (tmp_path.glob("chaos-standard-*.jsonl")).__next__().read_text().splitlines() if '"kill"' in ln
    ]
    assert '"inflight_payment":"A"' in kill[0], "the race happened: the marker still named A when the record was made"
    # B is redelivered to another poller and the provider answers it from its idempotency key.
    other = ChaosGateway(
        _Provider(replayed=True),
        InvocationChaos(ChaosConfig(), EventLog(tmp_path / "x.jsonl"), "s"),
        EventLog(tmp_path / "provider-standard-1.jsonl"),
    )
    other.charge(SimpleNamespace(payment_id="B"), idempotency_key="B")

    counts = run_log_counts(tmp_path, "standard")

    assert counts["provider_replays"] == 1
    assert counts["kills_between_charge_and_completion"] == 1
    assert counts["unexplained_replays"] == 0


def _effect_poller(run_dir: str) -> None:
    """A runtime-like handler behind the tap: effect line for A, then B's effect line; the watchdog's kill record is
    being written from before B's line, and the kill lands right after it."""
    from aws_lambda_powertools import Logger

    pid = os.getpid()
    marker_read, next_started = threading.Event(), threading.Event()
    chaos = InvocationChaos(
        ChaosConfig(),
        _SlowKillLog(Path(run_dir) / f"chaos-orders-{pid}.jsonl", marker_read, next_started),
        "orders",
        at_effect_line=True,
    )
    function_log = open(Path(run_dir) / f"function-orders-{pid}.log", "a", buffering=1, encoding="utf-8")
    sys.stdout = EffectTap(function_log, chaos.on_effect)
    logger = Logger(service="orders")
    chaos.begin(time.monotonic() + 60, ["A", "B"], "request-1")
    logger.append_keys(function_request_id="request-1")
    logger.info("effect executed", extra={"idempotency_key": "A", "effect": "confirm"})
    threading.Thread(target=chaos.crash, args=(DEADLINE,), daemon=True).start()
    marker_read.wait(10)
    logger.info("effect executed", extra={"idempotency_key": "B", "effect": "confirm"})
    next_started.set()
    time.sleep(30)  # killed here, B's record not completed


def test_kill_after_the_next_effect_line_is_booked_to_that_key(tmp_path: Path) -> None:
    _run_killed(_effect_poller, tmp_path)
    # B's effect runs again on redelivery (another process); the outbox's conditional put answers it.
    (tmp_path / "function-orders-1.log").write_text(
        '{"message":"effect executed","idempotency_key":"B","effect":"confirm","function_request_id":"request-2"}\n'
    )

    kills = effects.kills(tmp_path)
    lines = Counter(str(ln["idempotency_key"]) for ln in effects.effect_lines(tmp_path))
    report = effects.build(
        sent=Counter({"A": 1, "B": 1}),
        invalid_lines=0,
        messages_sent=2,
        dlq_keys=set(),
        dead_lettered=0,
        log_counts=lines,
        store_counts=Counter({"A": 1, "B": 1}),
        kill_records=kills,
        effect_takes_key=False,
    )

    assert [k["key"] for k in kills] == ["B"]
    assert kills[0]["batch_keys"] == ["A", "B"]
    assert report["keys"]["replayed_after_kill"] == ["B"]
    assert report["total"]["unexplained_replays"] == 0
    assert effects.verdict(report)[0] == 0


def test_kill_between_the_effect_and_its_line_books_nothing_and_hides_nothing(tmp_path: Path) -> None:
    """The process died inside B's effect, before B's line: the kill names the last line of its request (A, already
    done); B counts one line (its re-execution) and one outbox item, so nothing needs explaining."""
    (tmp_path / "function-orders-5.log").write_text(
        '{"message":"effect executed","idempotency_key":"A","effect":"confirm","function_request_id":"r1"}\n'
    )
    (tmp_path / "chaos-orders-5.jsonl").write_text(
        '{"event":"kill","phase":"deadline","pid":5,"invocation":1,"request_id":"r1","batch_keys":["A","B"]}\n'
    )
    (tmp_path / "function-orders-6.log").write_text(
        '{"message":"effect executed","idempotency_key":"B","effect":"confirm","function_request_id":"r2"}\n'
    )
    report = effects.build(
        sent=Counter({"A": 1, "B": 1}),
        invalid_lines=0,
        messages_sent=2,
        dlq_keys=set(),
        dead_lettered=0,
        log_counts=Counter({"A": 1, "B": 1}),
        store_counts=Counter({"A": 1, "B": 1}),
        kill_records=effects.kills(tmp_path),
        effect_takes_key=False,
    )

    assert report["total"]["kills_between_effect_and_completion"] == 1
    assert (report["total"]["duplicated"], report["total"]["unexplained_replays"]) == (0, 0)
    assert report["cross_check"] == {"store_items_without_log_line": 0, "log_keys_without_store_item": 0}
