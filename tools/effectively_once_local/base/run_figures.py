"""Throughput and peak memory of a local run (``make demo``, ``make soak``): the report's ``run`` block.

- ``payments_per_second``: the payments of the payments file (valid and poison lines) divided by
  ``processing_seconds``, the time from the first message sent to the queues drained (end to end: sending, polling,
  the handler, redeliveries after kills and timeouts; not the deploy, not the report, not the outage backlog).
- ``peak_rss_mib_runner``: ``ru_maxrss`` of the runner process itself (``RUSAGE_SELF``: it deploys, sends,
  supervises the pollers and builds the report).
- ``peak_rss_mib_poller``: the largest ``ru_maxrss`` of any of its poller child processes (each one execution
  environment running the handler). Each poller publishes its own ``RUSAGE_SELF`` peak into a value shared with the
  pool after loading the handler and after every invocation, so a poller killed by chaos keeps what it reached up to
  its last completed invocation. Not a sum: the pollers run side by side, ``pollers per queue x queues`` of them.

- ``load_average``: the machine's 1-minute load average (``os.getloadavg()[0]``), sampled every 5 s from the first
  send to the queues drained (``LoadSampler``): ``min``, ``mean``, ``max`` and ``samples``; with the machine's
  ``cores`` beside it, it says how loaded the run was (deadline kills and deferrals grow with the load).

The local AWS (the moto server) and the CDK CLI are other processes and are not counted.
``ru_maxrss`` is in kibibytes on Linux and in bytes on macOS (getrusage(2); Python's ``resource`` module docs).
"""

from __future__ import annotations

import os
import resource
import sys
import threading
from typing import Any

#: Seconds between two load-average samples.
LOAD_SAMPLE_SECONDS = 5.0


class LoadSampler:
    """Samples ``os.getloadavg()[0]`` every ``interval`` seconds on a daemon thread between ``start`` and ``stop``
    (or in a ``with`` block), one sample at each end too."""

    def __init__(self, interval: float = LOAD_SAMPLE_SECONDS) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(os.getloadavg()[0])

    def start(self) -> LoadSampler:
        """Take the first sample and start sampling."""
        self.samples.append(os.getloadavg()[0])
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take the last sample and stop (a second call does nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def summary(self) -> dict[str, Any]:
        """``min``, ``mean``, ``max`` (two decimals), ``samples`` and the machine's ``cores``."""
        values = self.samples or [os.getloadavg()[0]]
        return {
            "min": round(min(values), 2),
            "mean": round(sum(values) / len(values), 2),
            "max": round(max(values), 2),
            "samples": len(values),
            "cores": os.cpu_count(),
        }


def maxrss_mib(ru_maxrss: int, platform: str = sys.platform) -> float:
    """``ru_maxrss`` in MiB, one decimal: kibibytes on Linux, bytes on macOS (``darwin``)."""
    divisor = 1024 * 1024 if platform == "darwin" else 1024
    return round(ru_maxrss / divisor, 1)


def own_maxrss() -> int:
    """This process's peak resident set size, as ``getrusage(RUSAGE_SELF).ru_maxrss`` gives it."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def record_peak(shared: Any, ru_maxrss: int | None = None) -> None:
    """Raise the shared peak (a ``multiprocessing`` ``Value``) to this process's ``ru_maxrss`` when it is higher."""
    value = own_maxrss() if ru_maxrss is None else ru_maxrss
    with shared.get_lock():
        if value > shared.value:
            shared.value = value


def run_figures(
    *,
    payments: int,
    processing_seconds: float,
    runner_maxrss: int,
    poller_maxrss: int,
    platform: str = sys.platform,
    load_average: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report keys of the module docstring. ``*_maxrss``: ``ru_maxrss`` values (0: never measured -> ``None``).

    :raises ValueError: ``payments`` is negative or ``processing_seconds`` is not positive.
    """
    if payments < 0:
        raise ValueError(f"payments must be 0 or more, but {payments!r} was given")
    if not processing_seconds > 0:
        raise ValueError(f"processing_seconds must be positive, but {processing_seconds!r} was given")
    return {
        "processing_seconds": round(processing_seconds, 1),
        "payments_per_second": round(payments / processing_seconds, 2),
        "peak_rss_mib_runner": maxrss_mib(runner_maxrss, platform) if runner_maxrss > 0 else None,
        "peak_rss_mib_poller": maxrss_mib(poller_maxrss, platform) if poller_maxrss > 0 else None,
        "load_average": load_average,
    }


def render(figures: dict[str, Any]) -> str:
    """One line for the terminal."""
    return (
        f"throughput: {figures['payments_per_second']} payments/s end to end "
        f"({figures['processing_seconds']} s from the first send to drained); peak memory (ru_maxrss): runner "
        f"{figures['peak_rss_mib_runner']} MiB, largest poller {figures['peak_rss_mib_poller']} MiB"
        + _render_load(figures.get("load_average"))
    )


def _render_load(load: dict[str, Any] | None) -> str:
    if not load:
        return ""
    return f"; load average {load['min']} to {load['max']} (mean {load['mean']}, {load['cores']} cores)"
