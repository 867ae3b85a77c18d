"""A long run reuses process ids: the runner's logs are per pid, so two pollers can share one provider log and one
chaos log. Found by the 10,000-payment soak (issue 15): a kill of the first poller with a pid was booked to the last
provider call of a later poller with the same pid and the same invocation number, and the payment it had really
interrupted came back as an "unexplained" provider replay (the run failed with 0 lost and 0 double-charged).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from effectively_once_local.chaos import fault_model as chaos_module
from effectively_once_local.chaos.fault_model import DEADLINE, ChaosConfig, EventLog, InvocationChaos
from effectively_once_local.payments.payments_report import run_log_counts
from effectively_once_local.payments.payments_view import ChaosGateway


class _Provider:
    def __init__(self, replayed: bool = False) -> None:
        self.replayed = replayed

    def charge(self, payment: Any, *, idempotency_key: str | None = None) -> Any:
        return SimpleNamespace(charge_id=payment.payment_id, replayed=self.replayed)


def _poller_killed_in_first_invocation(run_dir: Path, pid: int, request_id: str, payment_id: str) -> None:
    """One poller process with ``pid``: its first invocation charges ``payment_id`` and is killed at the deadline."""
    chaos = InvocationChaos(ChaosConfig(), EventLog(run_dir / f"chaos-standard-{pid}.jsonl"), "standard")
    gateway = ChaosGateway(_Provider(), chaos, EventLog(run_dir / f"provider-standard-{pid}.jsonl"))
    chaos.begin(time.monotonic() + 2, None, request_id)
    gateway.charge(SimpleNamespace(payment_id=payment_id), idempotency_key=payment_id)
    chaos.crash(DEADLINE)


def test_a_reused_pid_does_not_move_a_kill_to_the_later_pollers_payment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chaos_module, "kill_self", lambda: None)  # the record is what matters, not the SIGKILL
    pid = os.getpid()  # crash() books the kill to this process's pid: both "pollers" share it, as after reuse
    _poller_killed_in_first_invocation(tmp_path, pid, "request-1", "pay-A")
    _poller_killed_in_first_invocation(tmp_path, pid, "request-2", "pay-C")
    # Both payments are redelivered to another poller; the provider answers each from its idempotency key.
    other = ChaosGateway(
        _Provider(replayed=True),
        InvocationChaos(ChaosConfig(), EventLog(tmp_path / "x.jsonl"), "standard"),
        EventLog(tmp_path / "provider-standard-1.jsonl"),
    )
    for payment_id in ("pay-A", "pay-C"):
        other.charge(SimpleNamespace(payment_id=payment_id), idempotency_key=payment_id)

    counts = run_log_counts(tmp_path, "standard")

    assert counts["kills"][DEADLINE] == 2
    assert counts["provider_replays"] == 2
    assert counts["kills_between_charge_and_completion"] == 2
    assert counts["unexplained_replays"] == 0
