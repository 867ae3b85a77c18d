"""Every effect adapter proven under kills (issue 24, ``make proof``): the effects example (``examples/effects``)
writes to a DynamoDB table, an S3 bucket, a FIFO queue, a SQLite database, PostgreSQL and the HTTP provider
stand-in through the keyed adapters, and makes un-keyed calls with ``delivery="at_most_once"`` and
``"at_least_once"``. The chaos command runs it with kills after the writes the local AWS accepts and counts each
effect in its own store: every keyed store must show 0 duplicated, and the naive twin (the same calls without the
adapters) must fail naming each store.

One deploy of ``EffectsExample`` into the session's local AWS; one ``run_chaos`` per variant (``--function-env
EFFECTS_VARIANT=...``), each on its own order ids, the stack's queues emptied before each (the stores count only
what a run added). The SQLite file lives in the run's folder; PostgreSQL is a throwaway server of this module
(``tests/postgres_server.py``), both handed to the function through ``function_env``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack.chaos_run import run_chaos
from effectively_once_local.aws.provider_stand_in import read_calls
from effectively_once_local.aws.readback import read_dlq_messages
from effectively_once_local.aws.server import local_endpoint, local_session
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.proof.stores import PROVIDER_LOG, EffectStore, parse_effect, physical_name
from tests import postgres_server

from .conftest import LocalAws

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples" / "effects"
STACK = "EffectsExample"
CONTEXT = {"function_timeout_seconds": "3", "max_receive_count": "2", "batch_size": "2", "destroy_on_delete": "true"}
KEYS = 30
# Kills after a write are drawn for 90 % of the invocations (each strikes after one of the invocation's kill-point
# writes and SQL commits, in turn with even odds); the calls turn with the order id, so each store's write comes
# first for some keys, and a kill after it (or after any later write) strikes between it and its completion.
CHAOS = ChaosConfig(resend=0.2, concurrent_duplicates=0.1, crash_after_write=0.9, crash_after_complete=0.05, seed=11)
AT_MOST_ONCE_PATH = "/unkeyed/at-most-once/"
AT_LEAST_ONCE_PATH = "/unkeyed/at-least-once/"


def _stores(run_dir: Path, dsn: str) -> tuple[EffectStore, ...]:
    """The keyed stores and the at-most-once calls' log (0 duplicated is what each must show); every store is
    required of every key but the at-most-once calls', which a kill may leave without its call (``:optional``)."""
    return (
        parse_effect("table:Receipts:order_id"),
        parse_effect("bucket:Documents:documents/{key}/*"),
        parse_effect("queue:Notices:order_id"),
        parse_effect(f"sqlite:{run_dir / 'effects.sqlite3'}:shipments:order_id"),
        parse_effect(f"postgres:{dsn}:shipments:order_id"),
        parse_effect("provider:/keyed/:order_id"),
        parse_effect(f"provider:{AT_MOST_ONCE_PATH}:order_id:optional"),
    )


def _input(path: Path, prefix: str) -> Path:
    rows: list[Any] = [
        {"order_id": f"{prefix}-{i:03d}", "customer": f"c{i % 3}", "total": 100 + i} for i in range(KEYS)
    ]
    rows.append({"body": f"not json ({prefix})"})  # must end in the DLQ, with its reason
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def postgres() -> Iterator[postgres_server.PostgresServer]:
    yield from postgres_server.fixture()


class Runs:
    """One chaos run per variant of the deployed example, made on first use: ``runs("adapters")`` gives the exit
    code, the report and the run's folder."""

    def __init__(self, local_aws: LocalAws, cdk_out: Path, tmp: Path, dsn: str) -> None:
        self.endpoint = local_aws.endpoint
        self._local_aws, self._cdk_out, self._tmp, self._dsn = local_aws, cdk_out, tmp, dsn
        self._done: dict[str, tuple[int, dict[str, Any], Path]] = {}

    def __call__(self, variant: str) -> tuple[int, dict[str, Any], Path]:
        if variant not in self._done:
            _purge_queues(self.endpoint)
            run_dir = self._tmp / variant
            opts = self._local_aws.chaos_options(
                app_dir=APP,
                stack=STACK,
                cdk_out=self._cdk_out,
                run_dir=run_dir,
                input=_input(self._tmp / f"{variant}.jsonl", variant),
                key="order_id",
                effects=_stores(run_dir, self._dsn),
                chaos=CHAOS,
                function_env={
                    "EFFECTS_VARIANT": variant,
                    "EFFECTS_SQLITE_PATH": str(run_dir / "effects.sqlite3"),
                    "EFFECTS_POSTGRES_DSN": self._dsn,
                },
                redrive_rounds=2,
            )
            code, report = run_chaos(opts, log=lambda _: None)
            self._done[variant] = (code, report, run_dir)
        return self._done[variant]

    def queue_messages(self, name: str) -> Counter[str]:
        """Messages per order id in the stack's queue ``name``, read without consuming them."""
        with local_endpoint(self.endpoint):
            session = local_session(self.endpoint)
            url = physical_name(session, STACK, EffectStore("queue", name, "order_id"))
            messages = read_dlq_messages(session.client("sqs"), url)
        return Counter(json.loads(m.body)["order_id"] for m in messages)


@pytest.fixture(scope="module")
def effects(
    local_aws: LocalAws, postgres: postgres_server.PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Runs:
    return Runs(local_aws, local_aws.deploy(APP, [STACK], CONTEXT), tmp_path_factory.mktemp("effects"), postgres.dsn)


def _purge_queues(endpoint: str) -> None:
    """Every queue of the stack emptied (the source, its DLQ, and the Notices and Announcements stores): a run
    counts only its own messages. Received and deleted, not purged (one PurgeQueue per queue a minute)."""
    sqs = local_session(endpoint).client("sqs", endpoint_url=endpoint)
    for url in sqs.list_queues(QueueNamePrefix=STACK).get("QueueUrls", []):
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)]
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)


def _reasons(report: dict[str, Any]) -> str:
    return " | ".join(report["verdict"]["reasons"])


def _executions(run_dir: Path, path: str) -> Counter[str]:
    """Executed stand-in calls under ``path``, per order id (from the stand-in's own log)."""
    return Counter(
        str(c["request"]["order_id"])
        for c in read_calls(run_dir / PROVIDER_LOG)
        if c.get("executed") and str(c.get("path")).startswith(path)
    )


def _call(report: dict[str, Any], adapter: str, delivery: str) -> dict[str, Any]:
    """The un-keyed lines of one call (``report["unkeyed"]["calls"]``), zeros when it logged none."""
    for call in report["unkeyed"]["calls"].values():
        if (call["adapter"], call["delivery"]) == (adapter, delivery):
            return dict(call)
    return {"possibly_lost": 0, "repeated": 0, "keys": {}}


def test_every_keyed_adapter_shows_0_duplicated_under_kills_after_every_write(effects: Runs) -> None:
    code, report, _ = effects("adapters")

    assert code == 0, _reasons(report)
    assert report["total"]["kills"]["after_write"] > 0, "the faults struck"
    assert report["total"]["kills_between_effect_and_completion"] > 0, "and some between an effect and completion"
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == KEYS
    per_store = report["run"]["effect_stores"]
    assert len(per_store) == 7
    for store, found in per_store.items():
        assert found["duplicated"] == [], store
    keyed = [s for s in per_store if "unkeyed" not in s]
    assert all(per_store[s]["effects"] == KEYS for s in keyed), {s: per_store[s]["effects"] for s in keyed}


def test_kills_between_the_stores_are_listed_torn_and_their_answered_replays_counted(effects: Runs) -> None:
    """Issue 30, item 6: a kill after one store's write and before another's leaves the key torn for a moment; its
    replay repairs it (the run passes) and the stores answer what was written: listed as a torn moment, never
    failing, and the key counted replayed after a kill though its replay logged no second effect line."""
    code, report, _ = effects("adapters")
    torn = report["torn_moments"]

    assert code == 0, _reasons(report)
    assert report["total"]["torn_moments"] == len(torn) > 0, "kills after a write struck between two stores"
    assert all(m["written"] and m["missing"] for m in torn), torn[:3]
    replayed = set(report["keys"]["replayed_after_kill"]) | set(report["keys"]["replayed_after_error"])
    # A key with a copy left in a DLQ (a resend SQS moved) is not counted replayed: the copy may be all that ran.
    in_dlq = {key for held in report["dlq"].values() for key in held["keys"]}
    assert {m["key"] for m in torn} - in_dlq <= replayed, "each torn key ran again, and the stores answered its replay"


def test_at_most_once_never_repeats_and_its_missing_sends_are_counted_possibly_lost(effects: Runs) -> None:
    _, report, run_dir = effects("adapters")
    executed = _executions(run_dir, AT_MOST_ONCE_PATH)
    call = _call(report, "unkeyed", "at_most_once")

    assert max(executed.values()) == 1, "never twice"
    missing = {f"adapters-{i:03d}" for i in range(KEYS)} - set(executed)
    assert len(missing) <= call["possibly_lost"], (missing, call)
    assert all(call["keys"].get(key, 0) >= 1 for key in missing), "each send missing was counted for its key"
    assert call["repeated"] == 0


def test_at_least_once_counts_every_repeat(effects: Runs) -> None:
    code, report, run_dir = effects("adapters")
    webhook = _executions(run_dir, AT_LEAST_ONCE_PATH)
    announced = effects.queue_messages("Announcements")

    assert code == 0, _reasons(report)
    for adapter, executed in (("unkeyed", webhook), ("send_message", announced)):
        call = _call(report, adapter, "at_least_once")
        assert set(executed) == {f"adapters-{i:03d}" for i in range(KEYS)}, f"{adapter}: at least once, every key"
        # Each call made again after an attempt that did not complete is one line; a line may also count an attempt
        # killed before its call (an upper bound), never the other way round.
        for key, n in executed.items():
            assert n - 1 <= call["keys"].get(key, 0), (adapter, key, n, call)
        assert sum(executed.values()) - KEYS <= call["repeated"], (adapter, call)
        assert call["possibly_lost"] == 0
    assert report["unkeyed"]["repeated"] > 0, "kills struck un-keyed calls between their attempt and completion"


def test_the_naive_twin_fails_naming_each_store_of_a_duplicate(effects: Runs) -> None:
    code, report, _ = effects("naive")

    assert code == 1
    assert report["total"]["duplicated"] > 0, _reasons(report)
    per_store = report["run"]["effect_stores"]
    assert {s for s, found in per_store.items() if found["duplicated"]} == set(per_store), per_store
    assert report["unkeyed"]["calls"] == {}, "without markers, nothing counts what the un-keyed calls did"


def test_the_torn_twin_fails_as_incomplete_not_invalid(effects: Runs) -> None:
    """Issue 30, item 6: rows committed, then the documents service refuses every order for good: each key's row is
    in the SQL stores and nothing is in the others. Refused after one of its effects was written, a key is
    incomplete, never invalid."""
    code, report, _ = effects("torn")

    assert code == 1
    assert report["total"]["incomplete"] == KEYS, _reasons(report)
    assert report["total"]["invalid_in_dlq"] == 1, "the line that is not JSON, and only it"
    assert any(reason.startswith(f"{KEYS} keys incomplete") for reason in report["verdict"]["reasons"])
    per_store = report["run"]["effect_stores"]
    assert {name: found["effects"] > 0 for name, found in per_store.items() if "shipments" in name} == {
        name: True for name in per_store if "shipments" in name
    }


def test_the_docs_sql_patterns_are_struck_after_their_commits(effects: Runs) -> None:
    """Both variants commit with the docs' patterns, sqlite3's ``with conn:`` and psycopg's ``with
    conn.transaction():`` (issue 30, item 4): the commit at the end of the block is a kill point. A run of each
    struck 4 (adapters) and 12 (naive, ``conn.commit()`` then) of its 30 to 36 kills after a write there: one run
    alone may strike none, the two together leave no real chance of it. Last in the module: the naive run fills the
    stack's queues, which the tests of the adapters' run read."""
    struck = [effects(variant)[1]["total"]["kills_after_write"] for variant in ("adapters", "naive")]

    assert sum(counts["sql_commit"] for counts in struck) > 0, struck
