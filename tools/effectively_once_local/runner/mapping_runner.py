"""A local stand-in for Lambda's SQS event source mapping (moto cannot run Lambda code without Docker).

It follows the deployed mapping's rules: receive up to the batch size, invoke the handler in process with records
shaped exactly like the real event and a Lambda context whose remaining time follows the function timeout, delete
the successes, leave batch item failures to reappear after the visibility timeout (or after the delay the runtime
set on them, the per-record backoff), and return the whole batch when
the handler raises (or reports an identifier that is not in the batch). Each poller is its own process — one
process is one execution environment, since Powertools keeps per-process state — and a poller that dies (a crash,
a deadline kill) is replaced by a fresh one, as Lambda starts a new environment.

This module runs the pollers (:class:`PollerPool`) and is the runner's front: every name below is importable from
here. The jobs sit in modules of their own: what a poller runs (``poller_spec.py``: :class:`PollerSpec`, holding the
local AWS's :class:`MappingConfig` or :class:`AsyncConfig` from ``aws/mapping_config.py``), one poller process and
its SQS batches (``batch_poller.py``: :func:`poller_main`), Lambda's asynchronous queue (``async_poller.py``:
:class:`AsyncPoller`, draining the inbox of ``aws/async_inbox.py``), the execution environment's handler, context and
stdout (``execution_environment.py``) and the request counter (``request_counter.py``).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

from ..aws.mapping_config import SQS_MAX_VISIBILITY_SECONDS, SQS_RECEIVE_MAX, AsyncConfig, MappingConfig
from .async_poller import AsyncChaos, AsyncPoller, async_event_id, async_event_key
from .batch_poller import failed_ids, poller_main, to_lambda_record
from .execution_environment import EFFECT_MESSAGE, EffectTap, LocalLambdaContext, packaged_lambda_src, runtime_root
from .poller_spec import COUNT_REQUESTS_ENV, PollerSpec
from .request_counter import RequestCounter

__all__ = [
    "COUNT_REQUESTS_ENV",
    "EFFECT_MESSAGE",
    "SQS_MAX_VISIBILITY_SECONDS",
    "SQS_RECEIVE_MAX",
    "AsyncChaos",
    "AsyncConfig",
    "AsyncPoller",
    "EffectTap",
    "LocalLambdaContext",
    "MappingConfig",
    "PollerPool",
    "PollerSpec",
    "RequestCounter",
    "async_event_id",
    "async_event_key",
    "failed_ids",
    "packaged_lambda_src",
    "poller_main",
    "runtime_root",
    "to_lambda_record",
]


class PollerPool:
    """Runs ``concurrency`` pollers per mapping, replacing any that die, until ``stop()``."""

    def __init__(self, specs: list[tuple[PollerSpec, int]]) -> None:
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._slots: list[tuple[PollerSpec, Any]] = []
        self._specs = specs
        self.restarts = 0
        #: The largest ``ru_maxrss`` any of its pollers reached (``figures``); 0 until one reports.
        self.peak_rss = self._ctx.Value("q", 0)

    def _spawn(self, spec: PollerSpec) -> Any:
        proc = self._ctx.Process(target=poller_main, args=(spec, self._stop, self.peak_rss), daemon=True)
        proc.start()
        return proc

    def start(self) -> None:
        for spec, concurrency in self._specs:
            for _ in range(concurrency):
                self._slots.append((spec, self._spawn(spec)))

    def supervise(self) -> None:
        """Replace dead pollers (call periodically)."""
        if self._stop.is_set():
            return
        for i, (spec, proc) in enumerate(self._slots):
            if not proc.is_alive():
                self.restarts += 1
                self._slots[i] = (spec, self._spawn(spec))

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for _, proc in self._slots:
            proc.join(max(0.1, deadline - time.monotonic()))
        for _, proc in self._slots:
            if proc.is_alive():
                proc.kill()
                proc.join(2)
