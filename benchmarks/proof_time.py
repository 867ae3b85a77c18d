"""Where ``make proof``'s time goes: each test file's wall time against the CPU time it used, waiting or working.

Runs ``pytest -m proof FILE`` for each file with proof tests, one file at a time in a fresh process (the way
``make proof`` without workers runs them), and reads the CPU time (user + system) of that pytest and of every
process it waited for (its local AWS, its pollers, the CDK CLI) from ``getrusage(RUSAGE_CHILDREN)``. A file whose
CPU time is a small part of its wall time mostly waits (visibility timeouts, redrive rounds, drain polls) and can
share the machine with another; one near 100 % of a core works. Prints a table and writes
``reports/proof-time.json``; ``--files`` measures some files alone. Numbers, no assertions; note the load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def proof_files() -> list[str]:
    """The test files that hold tests marked ``proof``, as ``pytest --collect-only`` lists them."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "proof", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    files = {line.split("::", 1)[0] for line in out.splitlines() if "::" in line}
    return sorted(files)


def measure(path: str) -> dict[str, object]:
    """One file's run: wall seconds, CPU seconds (user, system) of pytest and its children, the exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    code = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "proof", "-q", "-p", "no:cacheprovider", path], cwd=ROOT
    ).returncode
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    return {
        "file": path,
        "wall_s": round(wall, 1),
        "user_s": round(user, 1),
        "system_s": round(system, 1),
        "cpu_share": round((user + system) / wall, 3),
        "exit_code": code,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].replace("``", ""))  # no reST in --help
    parser.add_argument("--files", nargs="*", help="test files to measure (default: every file with proof tests)")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "proof-time.json")
    args = parser.parse_args()
    rows = [measure(path) for path in (args.files or proof_files())]
    wall = sum(float(str(r["wall_s"])) for r in rows)
    cpu = sum(float(str(r["user_s"])) + float(str(r["system_s"])) for r in rows)
    print(f"\n{'file':48} {'wall s':>8} {'user s':>8} {'sys s':>8} {'cpu/wall':>9}")
    for r in sorted(rows, key=lambda r: -float(str(r["wall_s"]))):
        print(f"{r['file']:48} {r['wall_s']:>8} {r['user_s']:>8} {r['system_s']:>8} {r['cpu_share']:>9}")
    print(f"{'total':48} {wall:>8.1f} {'':>8} {'':>8} {cpu / wall if wall else 0:>9.3f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"files": rows, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}, indent=2) + "\n")
    return 1 if any(r["exit_code"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
