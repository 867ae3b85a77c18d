"""Every test session: ``--record-time MEASURE`` (the Makefile passes ``make test`` or ``make proof``) makes a session
that passed record its wall time into .local-aws/times.json, git-ignored (``benchmarks/times.py``; under
pytest-xdist the controller records, not its workers): ``make record-times`` moves it into the committed
benchmarks/times.json on purpose. An option, not an environment variable: a pytest that a test starts in a
subprocess records nothing.

Every session holds each report the tooling assembles (the chaos run's, the demo's) to its committed shape
(``effectively_once_local/report/report_shape.json``): ``EFFECTIVELY_ONCE_REPORT_SHAPE=check``, set here for the
session and every process it starts (a run that drifts raises ``ReportShapeError``)."""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from types import ModuleType

import pytest

OPTION = "--record-time"
#: ``report_shape.CHECK_ENV`` (a test reads both): every report a test produces is held to its committed shape.
REPORT_SHAPE_ENV = "EFFECTIVELY_ONCE_REPORT_SHAPE"
os.environ[REPORT_SHAPE_ENV] = "check"
_STARTED = "_eo_session_started"


def times_module() -> ModuleType:
    """``benchmarks/times.py`` as a module (the folder is scripts, not a package)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "times.py"
    spec = importlib.util.spec_from_file_location("bench_times", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recording(config: pytest.Config) -> bool:
    """Whether this session records times (``--record-time`` given)."""
    return bool(config.getoption(OPTION))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        metavar="MEASURE",
        default=None,
        help="record this session's wall time, when it passes, as MEASURE in .local-aws/times.json (untracked; "
        "make record-times moves it into benchmarks/times.json)",
    )


def pytest_configure(config: pytest.Config) -> None:
    measure = config.getoption(OPTION)
    if measure and measure not in times_module().MEASURES:
        raise pytest.UsageError(f"{OPTION} {measure!r}: not a measure of benchmarks/times.py")


def pytest_sessionstart(session: pytest.Session) -> None:
    setattr(session.config, _STARTED, time.monotonic())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    measure = session.config.getoption(OPTION)
    if not measure or hasattr(session.config, "workerinput") or exitstatus != 0 or session.config.option.collectonly:
        return
    times_module().record(measure, time.monotonic() - getattr(session.config, _STARTED))
