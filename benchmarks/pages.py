"""``make bench`` and ``make capacity``: the generated sections of two docs pages, from ``benchmarks/measured.json``.

- ``docs/benchmarks.md``, section "bench table": ``render.table`` of the committed measurements, every row that
  ``make bench`` measured (or ``benchmarks/run.py --only`` measured again) and the lines under it; its cost rows
  (USD per 1 million payments: arm64, x86_64, batch size 1) are computed here by ``cost_model.cost_per_million``
  from the measured DynamoDB requests of a first delivery and the measured 10-payment invocation.
- ``docs/sandbox-account.md``, section "cost of a demo-aws run": what ``make demo-aws``'s messages cost (USD), the
  cost model priced per queue type for the measured DynamoDB requests of a first delivery and of a duplicate, times
  the messages ``python -m effectively_once_local produce --stack PaymentsSandbox`` plans with its defaults
  (originals and producer duplicates per queue; the same plan ``remote.produce`` sends).

The prose around the sections stays hand-written. ``docs/capacity.md`` is ``benchmarks/capacity.py``'s, from the
same file. ``python benchmarks/pages.py`` rewrites the sections; ``--check`` exits 1 when a page differs from its
render. ``tests/unit/test_pages.py`` fails when a committed page differs.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any
from unittest import mock

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))

import cost_model  # noqa: E402
import render  # noqa: E402
import sections  # noqa: E402

MEASURED = BENCHMARKS / "measured.json"
BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"
SANDBOX_PAGE = ROOT / "docs" / "sandbox-account.md"
SCRIPT = "benchmarks/pages.py"
SOURCE = "benchmarks/measured.json"
COMMAND = "make capacity"
BENCH_TABLE = sections.begin_marker(SCRIPT, SOURCE, "bench table", COMMAND)
DEMO_AWS_COST = sections.begin_marker(SCRIPT, SOURCE, "cost of a demo-aws run", COMMAND)
#: The stack and command line ``make demo-aws`` produces with (the Makefile's ``demo-aws`` recipe).
DEMO_AWS_PRODUCE = ["produce", "--stack", "PaymentsSandbox"]


def load(path: Path = MEASURED) -> dict[str, Any]:
    """The committed measurements (``benchmarks/run.py`` writes them)."""
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _ms_per_payment(measured: dict[str, Any]) -> float:
    """The measured invocation's handler time per payment (ms): what ``cost_model.invocation_ms`` scales."""
    return float(measured["invocation_ms_inprocess_batch10"]) / int(measured["batch_size"])


def cost(measured: dict[str, Any], case: str, **options: Any) -> dict[str, Any]:
    """``cost_model.cost_per_million`` (USD per 1 million payments, by service) for the measured DynamoDB requests of
    ``case`` (``first_delivery`` or ``duplicate``) at the measured invocation time; ``options`` go to it as they
    are (``batch_size``, ``fifo``, ``architecture``)."""
    return cost_model.cost_per_million(
        ddb_operations_per_payment=measured["ddb_operations"][case], ms_per_payment=_ms_per_payment(measured), **options
    )


def table_results(measured: dict[str, Any]) -> dict[str, Any]:
    """The results ``render.table`` reads, from the committed measurements: their table figures, those kept under
    the capacity model's name (``render.MEASURED_NAMES``) under the table's, and the three cost rows."""
    results = {**measured, **{key: measured[name] for key, name in render.MEASURED_NAMES.items()}}
    results["cost_per_million_usd"] = cost(measured, "first_delivery")
    results["cost_per_million_usd_x86_64"] = cost(measured, "first_delivery", architecture="x86_64")
    results["cost_per_million_usd_batch_size_1"] = cost(measured, "first_delivery", batch_size=1)
    return results


def demo_aws_messages() -> tuple[Path, dict[str, tuple[int, int]]]:
    """(the payments file, {queue type: (originals, producer duplicates)}) of ``make demo-aws``'s ``produce`` line
    with its defaults: its command line parsed by ``effectively_once_local``'s own entry point, ``remote.produce``
    (the AWS calls) replaced by a recorder, the recorded file and chaos planned by ``payments_input.plan_messages``."""
    from effectively_once_local.cli import main as cli
    from effectively_once_local.payments import remote
    from effectively_once_local.payments.payments_input import load_payments, plan_messages

    seen: list[tuple[Path, Any]] = []

    def record(opts: Any) -> int:
        seen.append((opts.payments, opts.chaos))
        return 0

    with contextlib.chdir(ROOT), mock.patch.object(remote, "produce", record):
        if cli.main(DEMO_AWS_PRODUCE) != 0 or len(seen) != 1:
            raise RuntimeError(f"`python -m effectively_once_local {' '.join(DEMO_AWS_PRODUCE)}` was not planned")
        payments, chaos = seen[0]
        plan = plan_messages(load_payments(payments), chaos)
    counts = {}
    for queue, messages in plan.items():
        originals = sum(1 for m in messages if m.kind == "original")
        counts[queue] = (originals, len(messages) - originals)
    return payments, counts


def demo_aws_cost(measured: dict[str, Any], payments: Path, counts: dict[str, tuple[int, int]]) -> str:
    """The paragraph "What it costs" of ``docs/sandbox-account.md``: ``counts`` ({queue type: (originals,
    duplicates)}, :func:`demo_aws_messages`) priced per million by :func:`cost`, each queue type at its SQS price."""
    per_million: dict[tuple[str, str, str], float] = {}
    for queue in ("standard", "fifo"):
        for case in ("first_delivery", "duplicate"):
            for arch in cost_model.LAMBDA_PER_GB_SECOND:
                total = cost(measured, case, fifo=queue == "fifo", architecture=arch)["total"]
                per_million[queue, case, arch] = total
    arch = cost_model.DEFAULT_ARCHITECTURE
    run_total = sum(
        (originals * per_million[q, "first_delivery", arch] + duplicates * per_million[q, "duplicate", arch]) / 1e6
        for q, (originals, duplicates) in counts.items()
    )
    originals = sum(o for o, _ in counts.values())
    duplicates = sum(d for _, d in counts.values())
    other = next(a for a in cost_model.LAMBDA_PER_GB_SECOND if a != arch)
    duplicate_requests = ", ".join(f"{n} `{op}`" for op, n in measured["ddb_operations"]["duplicate"].items())

    def pair(case: str, architecture: str) -> tuple[float, float]:
        return per_million["standard", case, architecture], per_million["fifo", case, architecture]

    first, first_other, duplicate = pair("first_delivery", arch), pair("first_delivery", other), pair("duplicate", arch)
    return (
        f"**What it costs.** About **${run_total:.4f}** for the run's messages: `benchmarks/cost_model.py` "
        f"(us-east-1 list prices read {cost_model.PRICES_AS_OF.split()[0]}, each with its source page; re-check "
        f"before quoting) for the {originals:,} messages of `{payments}` at batch size {measured['batch_size']} on "
        f"{arch} (${first[0]:.2f} per million payments on the standard queue, ${first[1]:.2f} on FIFO: SQS, Lambda "
        f"requests and compute, DynamoDB writes; ${first_other[0]:.2f} / ${first_other[1]:.2f} on {other}) plus the "
        f"{duplicates} duplicates (the measured DynamoDB requests of a duplicate, {duplicate_requests} each: "
        f"${duplicate[0]:.2f} / ${duplicate[1]:.2f} per million), at the measured duration of a "
        f"{measured['batch_size']}-payment invocation ({measured['invocation_ms_inprocess_batch10']} ms, "
        f"`benchmarks/measured.json`)."
    )


def render_pages(measured: dict[str, Any]) -> dict[Path, str]:
    """{page: its whole text with its generated sections rendered from ``measured``}, from the pages as they are."""
    payments, counts = demo_aws_messages()
    bench = sections.replace(
        BENCHMARKS_PAGE.read_text(encoding="utf-8"), BENCH_TABLE, render.table(table_results(measured))
    )
    sandbox = sections.replace(
        SANDBOX_PAGE.read_text(encoding="utf-8"), DEMO_AWS_COST, demo_aws_cost(measured, payments, counts)
    )
    return {BENCHMARKS_PAGE: bench, SANDBOX_PAGE: sandbox}


def main(argv: list[str]) -> int:
    pages = render_pages(load())
    stale = [page for page, text in pages.items() if page.read_text(encoding="utf-8") != text]
    if "--check" in argv:
        for page in stale:
            print(f"{page.relative_to(ROOT)} is out of date: run `{COMMAND}`", file=sys.stderr)
        return 1 if stale else 0
    for page in stale:
        page.write_text(pages[page], encoding="utf-8")
    print("written " + ", ".join(str(p.relative_to(ROOT)) for p in stale) if stale else "pages current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
