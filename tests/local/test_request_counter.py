"""The local pollers' request counter (``EFFECTIVELY_ONCE_COUNT_REQUESTS``): counts and summed amounts, written at
once, which ``make bench`` reads for requests per payment and the handler's wall time per invocation."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from effectively_once_local.runner.mapping_runner import RequestCounter


def _counter(path: Path) -> RequestCounter:
    # Built without __init__: it patches boto3's Session for the whole process, which a test must not do.
    counter = RequestCounter.__new__(RequestCounter)
    counter.path, counter.counts = path, Counter()
    return counter


def test_add_sums_amounts_and_writes_them_at_once(tmp_path: Path) -> None:
    counter = _counter(tmp_path / "requests-q-1.json")

    counter.add("lambda.Invoke.duration_us", 1500)
    counter.add("lambda.Invoke.timed")
    counter.add("lambda.Invoke.duration_us", 2500)
    counter.add("lambda.Invoke.timed")

    written = json.loads((tmp_path / "requests-q-1.json").read_text(encoding="utf-8"))
    assert written == {"lambda.Invoke.duration_us": 4000, "lambda.Invoke.timed": 2}
