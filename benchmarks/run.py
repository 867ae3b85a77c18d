"""``make bench``: measure, print a table, write ``reports/bench.json``.

Measures (each in fresh processes; medians; BENCH_RUNS runs each, default 7):

1. ``synth_ratio``: ``python app.py`` (PaymentsSandbox) over ``python benchmarks/baseline_app.py`` (the same
   resources in plain L2 constructs), whole processes, interleaved, each with an outdir in a temp folder; with CDK's
   built-in CloudFormation validation on (the 2.275 default), and ``synth_ratio_no_validation`` with
   ``CDK_VALIDATION=false``. ``--only synth`` measures this row alone (4 to 5 minutes) and updates it in
   ``reports/bench.json`` and ``benchmarks/measured.json`` (the asset size, read from the same outdir, is not
   re-measured).
2. DynamoDB requests per payment (``ddb_requests.py``, in process against moto), and over a whole clean local run
   (``python -m effectively_once_local demo --no-chaos`` on the sample's valid payments) the Lambda invocations and
   SQS requests per payment, counted by botocore hooks in every poller process (``EFFECTIVELY_ONCE_COUNT_REQUESTS``).
   The same pollers time every handler invocation (``lambda.Invoke.duration_us`` / ``lambda.Invoke.timed``: the
   handler call alone, against the local moto server over loopback): ``invocation_ms_mean``.
3. ``cost_per_million_usd`` from ``cost_model.py`` at the default batch size on arm64 (the sample's default
   architecture), the same on x86_64 for comparison, and at batch size 1.
6. ``benchmarks/measured.json`` (committed; ``reports/`` is not): the per-payment counts and the invocation
   duration that ``benchmarks/capacity.py`` turns into ``docs/capacity.md``, and every other figure the docs show
   (``render.TABLE_KEYS``) that ``benchmarks/pages.py`` turns into the generated sections of ``docs/benchmarks.md``
   and ``docs/sandbox-account.md``. ``make bench`` runs both after this script; ``make capacity`` runs them alone.
4. ``handler_import_ms`` (fresh processes, ``import payments.handler``) and ``asset_bytes`` (the staged asset zipped).
5. ``unit_tests_seconds``: wall time of ``pytest tests/unit -q``.
7. ``runtime_overhead_ratio`` (``runtime_overhead.py``, one fresh process, moto in process): CPU time of 35
   ten-record SQS batches through ``effectively_once_runtime.Consumer`` over a bare Powertools handler doing the same
   work, the sides interleaved batch by batch, median of 5 rounds. ``--only runtime-overhead`` measures this row
   alone (under a minute) and updates it in ``reports/bench.json`` and ``benchmarks/measured.json``.

Numbers, no assertions: targets are shown next to them. The machine is shared (2 cores): note the load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost_model  # noqa: E402
import render  # noqa: E402

PY = sys.executable
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
PIPELINE_FUNCTION_TIMEOUT = 10  # seconds
SEND_BATCH = 10  # the local producer's SendMessageBatch size (effectively_once_local.traffic.producer.SEND_BATCH_MAX)


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION", "CDK_VALIDATION", "AWS_ENDPOINT_URL"):
        env.pop(name, None)
    env.update(extra)
    return env


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bench_synth(tmp: Path) -> dict[str, Any]:
    apps = {"sandbox": "app.py", "baseline": "benchmarks/baseline_app.py"}
    times: dict[str, list[float]] = {f"{a}/{v}": [] for a in apps for v in ("validation", "no_validation")}
    order = list(times)
    for run in range(RUNS):
        # Interleaved, and the order rotates each round so neither app always runs right after the other.
        for key in order[run % len(order) :] + order[: run % len(order)]:
            app, mode = key.split("/")
            outdir = tmp / f"synth-{app}-{mode}-{run}"
            extra = {"CDK_OUTDIR": str(outdir)}
            if mode == "no_validation":
                extra["CDK_VALIDATION"] = "false"
            times[key].append(_timed([PY, apps[app]], _env(**extra)))
        log(f"  synth round {run + 1}/{RUNS}: " + ", ".join(f"{k} {v[-1]:.1f}s" for k, v in times.items()))
    med = {k: statistics.median(v) for k, v in times.items()}
    low = {k: min(v) for k, v in times.items()}
    return {
        # The fastest run is the least disturbed by other jobs on a shared machine: reported beside the medians.
        "synth_ratio_of_fastest": round(low["sandbox/validation"] / low["baseline/validation"], 3),
        "synth_ratio_no_validation_of_fastest": round(low["sandbox/no_validation"] / low["baseline/no_validation"], 3),
        "synth_ratio": round(med["sandbox/validation"] / med["baseline/validation"], 3),
        "synth_ratio_no_validation": round(med["sandbox/no_validation"] / med["baseline/no_validation"], 3),
        "synth_seconds_median": {k: round(v, 2) for k, v in med.items()},
        "synth_runs": RUNS,
        "_outdir": str(tmp / "synth-sandbox-validation-0"),
    }


def bench_synth_row(tmp: Path) -> dict[str, Any]:
    """The synth row alone (``--only synth``), with the 1-minute load average before and after it and the time it
    ended (``synth_measured_at``, ISO 8601 UTC): the page says the row was measured apart from the others."""
    load_before = os.getloadavg()[0]
    row = bench_synth(tmp)
    row.pop("_outdir")
    row["synth_load_average_1m"] = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    row["synth_measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return row


def bench_asset(outdir: Path) -> dict[str, Any]:
    """Zip each staged asset directory (what the CLI uploads: the function's ``payments/`` and the runtime layer's
    ``python/``) and report their total size and their files."""
    assets = sorted(p for p in outdir.glob("asset.*") if p.is_dir())
    total, names = 0, []
    for index, asset in enumerate(assets):
        files = sorted(p for p in asset.rglob("*") if p.is_file())
        target = outdir / f"asset-{index}.zip"
        with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                zf.write(path, path.relative_to(asset).as_posix())
        total += target.stat().st_size
        names.extend(p.relative_to(asset).as_posix() for p in files)
    return {"asset_bytes": total, "asset_files": sorted(names)}


def bench_import() -> dict[str, Any]:
    code = "import time; t = time.perf_counter(); import payments.handler; print((time.perf_counter() - t) * 1000)"
    env = _env(PYTHONPATH=str(ROOT / "lambda_src"))
    samples = []
    for _ in range(max(RUNS, 7)):
        out = subprocess.run([PY, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        samples.append(float(out.stdout.strip().splitlines()[-1]))
    return {"handler_import_ms": round(statistics.median(samples), 1)}


def bench_ddb(tmp: Path) -> dict[str, Any]:
    target = tmp / "ddb.json"
    subprocess.run(
        [PY, "benchmarks/ddb_requests.py", str(target)], cwd=ROOT, env=_env(), check=True, capture_output=True
    )
    return json.loads(target.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def bench_runtime_overhead(tmp: Path) -> dict[str, Any]:
    """``runtime_overhead.py`` in a fresh process: Powertools keeps per-process state (Logger handlers, the Metrics
    buffer), so the measurement starts from none."""
    target = tmp / "runtime-overhead.json"
    subprocess.run(
        [PY, "benchmarks/runtime_overhead.py", str(target)], cwd=ROOT, env=_env(), check=True, capture_output=True
    )
    return json.loads(target.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def bench_pipeline(tmp: Path) -> dict[str, Any]:
    """A whole clean local run: no chaos, no poison lines, all payments sent before polling starts."""
    sys.path.insert(0, str(ROOT / "lambda_src"))
    from payments.model import parse_payment

    payments = tmp / "payments.jsonl"
    lines = []
    for line in (ROOT / "samples" / "payments.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            parse_payment(line)
        except ValueError:
            continue
        lines.append(line)
    payments.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts_dir = tmp / "counts"
    counts_dir.mkdir()
    report_path = tmp / "demo-report.json"
    # A 10 s function timeout (the demo's default is 2 s): on a loaded machine a 2 s deadline kills invocations
    # for real, and the run would no longer be clean.
    cmd = [PY, "-m", "effectively_once_local", "demo", "--no-chaos", "--quiet", "--payments", str(payments)]
    cmd += ["--function-timeout", str(PIPELINE_FUNCTION_TIMEOUT)]
    cmd += ["--report", str(report_path), "--run-dir", str(tmp / "run")]
    start = time.perf_counter()
    subprocess.run(
        cmd, cwd=ROOT, env=_env(EFFECTIVELY_ONCE_COUNT_REQUESTS=str(counts_dir)), check=True, capture_output=True
    )
    seconds = time.perf_counter() - start
    report = json.loads(report_path.read_text(encoding="utf-8"))
    totals: dict[str, int] = {}
    for path in counts_dir.glob("requests-*.json"):
        for key, n in json.loads(path.read_text(encoding="utf-8")).items():
            totals[key] = totals.get(key, 0) + n
    n = report["total"]["valid_payments"]
    timed = totals.get("lambda.Invoke.timed", 0)
    sent = {q: report[q]["payments"] for q in report if isinstance(report[q], dict) and "payments" in report[q]}
    sent.pop("total", None)
    producer = sum(math.ceil(k / SEND_BATCH) for k in sent.values())
    consumer = sum(v for k, v in totals.items() if k.startswith("sqs.") and not k.endswith(".empty"))
    empty = totals.get("sqs.ReceiveMessage.empty", 0)
    ddb = sum(v for k, v in totals.items() if k.startswith("dynamodb."))
    return {
        "lambda_invocations_per_payment": round(totals.get("lambda.Invoke", 0) / n, 4),
        "invocation_ms_mean": round(totals.get("lambda.Invoke.duration_us", 0) / timed / 1000, 1) if timed else None,
        "invocations_timed": timed,
        "sqs_requests_per_payment": round((producer + consumer) / n, 4),
        "sqs_requests_per_payment_detail": {
            "payments": n,
            "producer_send_message_batch": producer,
            "consumer_requests": {k: v for k, v in sorted(totals.items()) if k.startswith("sqs.")},
            "of_which_empty_receives": empty,
            "without_empty_receives": round((producer + consumer - empty) / n, 4),
        },
        "sqs_requests_per_payment_by_action": {
            "SendMessageBatch": round(producer / n, 4),
            **{
                k.removeprefix("sqs."): round((v - (empty if k == "sqs.ReceiveMessage" else 0)) / n, 4)
                for k, v in sorted(totals.items())
                if k.startswith("sqs.") and not k.endswith(".empty")
            },
        },
        "ddb_requests_per_payment_whole_run": round(ddb / n, 4),
        "pipeline_lost": report["total"]["lost"],
        "pipeline_double_charged": report["total"]["double_charged"],
        "pipeline_seconds": round(seconds, 1),
        "pipeline_kills": report["total"]["kills"],
        "pipeline_poller_restarts": report["run"]["poller_restarts"],
        "pipeline_function_timeout_seconds": PIPELINE_FUNCTION_TIMEOUT,
    }


def bench_unit_tests() -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run(
        [PY, "-m", "pytest", "tests/unit", "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=_env(), capture_output=True
    )
    seconds = time.perf_counter() - start
    summary = done.stdout.decode(errors="replace").strip().splitlines()[-1:]
    return {"unit_tests_seconds": round(seconds, 1), "unit_tests_summary": " ".join(summary)}


#: The committed measurements (reports/ is git-ignored): the capacity model's inputs (benchmarks/capacity.py) and
#: the bench table's figures (benchmarks/pages.py).
MEASURED = ROOT / "benchmarks" / "measured.json"


def _table_figures(results: dict[str, Any]) -> dict[str, Any]:
    """The figures of ``results`` that the bench table shows (``render.TABLE_KEYS``), but for those kept under the
    capacity model's name (``render.MEASURED_NAMES``)."""
    return {k: results[k] for k in render.TABLE_KEYS if k in results and k not in render.MEASURED_NAMES}


def measured_inputs(results: dict[str, Any]) -> dict[str, Any]:
    """What ``benchmarks/measured.json`` holds: first what ``benchmarks/capacity.py`` reads (the per-payment counts
    and the invocation duration of this run), then every other figure of the bench table (``_table_figures``)."""
    detail = results["sqs_requests_per_payment_detail"]
    inputs = {
        "measured_at": results["machine"]["measured_at"],
        "machine": results["machine"],
        "how": (
            "make bench (benchmarks/run.py): DynamoDB requests in process against moto (benchmarks/ddb_requests.py); "
            "and the median wall time of one 10-payment invocation there (7 runs, moto in process); invocations, SQS "
            "requests and the handler's mean wall time per invocation over a whole clean local run "
            f"(demo --no-chaos, {detail['payments']} valid payments, batch size {cost_model.DEFAULT_BATCH_SIZE}, "
            "moto server on loopback), counted in every poller process"
        ),
        "batch_size": cost_model.DEFAULT_BATCH_SIZE,
        "memory_mb": cost_model.MEMORY_MB,
        "payments": detail["payments"],
        "lambda_invocations_per_payment": results["lambda_invocations_per_payment"],
        "sqs_requests_per_payment": results["sqs_requests_per_payment"],
        "sqs_requests_per_payment_without_empty_receives": detail["without_empty_receives"],
        "ddb_requests_first_delivery": results["ddb_requests_first_delivery"],
        "ddb_requests_duplicate": results["ddb_requests_duplicate"],
        "ddb_operations": {k: results["ddb_operations"][k] for k in ("first_delivery", "duplicate")},
        "ddb_operations_by_table": results["ddb_operations_by_table"],
        "sqs_requests_per_payment_by_action": results["sqs_requests_per_payment_by_action"],
        "invocation_ms_inprocess_batch10": results["handler_batch10_ms_inprocess"],
        "invocation_ms_mean": results["invocation_ms_mean"],
        "invocations_timed": results["invocations_timed"],
    }
    return {**inputs, **{k: v for k, v in _table_figures(results).items() if k not in inputs}}


#: Where every figure goes (git-ignored); ``render.py`` reads it.
REPORT = ROOT / "reports" / "bench.json"
#: Rows that ``--only`` measures alone: name, what is logged, the measuring function.
ONLY = {
    "runtime-overhead": ("runtime overhead (CPU, in process, moto) ...", bench_runtime_overhead),
    "synth": (f"synth: {RUNS} interleaved rounds of 4 processes ...", bench_synth_row),
}


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _write_report(results: dict[str, Any]) -> None:
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def main_only(row: str) -> int:
    """Measure one row (``ONLY``) and update it in the last report (a new report holds that row alone) and its table
    figures in ``MEASURED`` (when it exists): the other rows and the ``machine`` block stay those of the last whole
    run; the row carries its own time and load."""
    message, bench = ONLY[row]
    results = json.loads(REPORT.read_text(encoding="utf-8")) if REPORT.exists() else {}
    log(message)
    with tempfile.TemporaryDirectory(prefix="bench-") as name:
        figures = bench(Path(name))
    results.update(figures)
    _write_report(results)
    written = [REPORT]
    if MEASURED.exists():
        measured = json.loads(MEASURED.read_text(encoding="utf-8"))
        measured.update(_table_figures(figures))
        MEASURED.write_text(json.dumps(measured, indent=2) + "\n", encoding="utf-8")
        written.append(MEASURED)
    print(render.table(results))
    print(f"\nupdated in {' and '.join(_shown(p) for p in written)} (run `make capacity` next)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="make bench: measure, print a table, write reports/bench.json")
    parser.add_argument("--only", choices=sorted(ONLY), help="measure this row alone and update it in the report")
    args = parser.parse_args(argv)
    if args.only:
        return main_only(args.only)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-") as name:
        tmp = Path(name)
        log("unit tests (pytest tests/unit -q) ...")
        results.update(bench_unit_tests())
        log(ONLY["synth"][0])
        synth = bench_synth(tmp)
        results.update(bench_asset(Path(synth.pop("_outdir"))))
        results.update(synth)
        log("handler import ...")
        results.update(bench_import())
        log("DynamoDB requests per payment (in process, moto) ...")
        results.update(bench_ddb(tmp))
        log(ONLY["runtime-overhead"][0])
        results.update(bench_runtime_overhead(tmp))
        log("whole clean local run (deploy + 1,000 payments) ...")
        (tmp / "pipeline").mkdir()
        results.update(bench_pipeline(tmp / "pipeline"))
    per_payment = results["ddb_operations"]["first_delivery"]
    results["cost_per_million_usd"] = cost_model.cost_per_million(ddb_operations_per_payment=per_payment)
    results["cost_per_million_usd_batch_size_1"] = cost_model.cost_per_million(
        batch_size=1, ddb_operations_per_payment=per_payment
    )
    results["cost_per_million_usd_x86_64"] = cost_model.cost_per_million(
        ddb_operations_per_payment=per_payment, architecture="x86_64"
    )
    results["machine"] = {
        "cpus": os.cpu_count(),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "note": "shared 2-core machine; other CPU-heavy jobs may have run concurrently",
    }
    MEASURED.write_text(json.dumps(measured_inputs(results), indent=2) + "\n", encoding="utf-8")
    _write_report(results)
    print(render.table(results))
    print(f"\nwritten to {_shown(REPORT)} and {_shown(MEASURED)} (run `make capacity` next)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
