"""The machine a recorded run ran on, for the pages that state it (``soak_page.py``: the soak table; ``times.py``:
the recorded times). Standard library only."""

from __future__ import annotations

from pathlib import Path


def memory_gib() -> int | None:
    """The machine's memory (``MemTotal`` of ``/proc/meminfo``, kB) in GiB, rounded down as ``free -g`` shows it;
    ``None`` where there is no ``/proc/meminfo``."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024**2
    except OSError:
        pass
    return None
