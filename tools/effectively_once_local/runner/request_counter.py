"""The poller's count of its own AWS requests and invocations (opt-in, for the benchmarks: the folder named by
``poller_spec.COUNT_REQUESTS_ENV``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any


class RequestCounter:
    """Counts this process's AWS requests by ``service.Operation`` with a botocore ``before-call`` hook registered
    on every boto3 session created from now on (the default session, and the one Powertools builds), plus
    ``lambda.Invoke`` (handler invocations), ``sqs.ReceiveMessage.empty``, and for each invocation that returned
    or raised, ``lambda.Invoke.timed`` (one) and ``lambda.Invoke.duration_us`` (its wall time in microseconds:
    the handler call alone, as Lambda bills it), written as JSON at every count."""

    def __init__(self, path: Path) -> None:
        import boto3.session

        self.path = path
        self.counts: Counter[str] = Counter()
        original = boto3.session.Session.__init__

        def init(session: Any, *args: Any, **kwargs: Any) -> None:
            original(session, *args, **kwargs)
            session.events.register("before-call", self._count)

        boto3.session.Session.__init__ = init

    def _count(self, event_name: str, **_: Any) -> None:  # event_name: before-call.<service>.<Operation>
        self.add(event_name.split(".", 1)[1])

    def add(self, key: str, n: int = 1) -> None:
        """Add ``n`` to ``key`` and write the counts at once: a killed process keeps every request it made."""
        self.counts[key] += n
        self.flush()

    def flush(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dict(self.counts)), encoding="utf-8")
        tmp.replace(self.path)
