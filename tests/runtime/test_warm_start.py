"""SDK clients built in Lambda's init phase (module level), not inside the first invocation's function timeout.

Found by the 10,000-payment soak (issue 15): on a loaded machine a fresh execution environment spent about a third of
its 2 s timeout creating its DynamoDB clients, so its first batch timed out, the environment was replaced, and the
next one timed out the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from effectively_once_runtime import Consumer

from .conftest import HANDLER_ENV

LAMBDA_SRC = Path(__file__).resolve().parents[2] / "lambda_src"


def _consumer() -> Consumer:
    consumer = Consumer(key="id", key_prefix="tests/warm")
    consumer.record(lambda body: body)
    return consumer


def test_warm_builds_the_state_before_the_first_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in HANDLER_ENV.items():
        monkeypatch.setenv(name, value)
    consumer = _consumer()
    state = consumer.warm()
    assert state is not None
    assert state.settings.table_name == HANDLER_ENV["IDEMPOTENCY_TABLE_NAME"]
    assert consumer.state is state  # the first invocation uses it: nothing is built again


def test_warm_leaves_an_incomplete_environment_to_the_first_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IDEMPOTENCY_TABLE_NAME", raising=False)
    consumer = _consumer()
    assert consumer.warm() is None
    with pytest.raises(ValueError, match="IDEMPOTENCY_TABLE_NAME"):
        consumer.state  # noqa: B018 - the first invocation raises the error, as without warm()


def test_payment_handler_import_builds_its_clients_in_the_init_phase() -> None:
    code = (
        "import json\n"
        "from payments import handler\n"
        "print(json.dumps([handler.consumer._state is not None, handler._gateway_instance is not None]))\n"
    )
    env = {**os.environ, **HANDLER_ENV, "PYTHONPATH": str(LAMBDA_SRC)}
    env.pop("AWS_ENDPOINT_URL", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, True]


def test_payment_handler_imports_without_its_environment() -> None:
    code = (
        "import json\n"
        "from payments import handler\n"
        "print(json.dumps([handler.consumer._state is None, handler._gateway_instance is None]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in HANDLER_ENV}
    env["PYTHONPATH"] = str(LAMBDA_SRC)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [True, True]
