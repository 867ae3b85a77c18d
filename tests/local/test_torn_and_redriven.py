"""What the chaos report lists without failing (issue 30, item 6): the torn moments (every kill that left a key's
effect in some of the required stores and not the others), the replays a store answered counted as replayed after a
kill, and the keys that finished only through the run's redrive, with their rounds. No AWS: write logs written here
in the shape ``chaos/faults.py`` logs them."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from effectively_once_local.chaos.faults import record_hash_candidates
from effectively_once_local.proof import key_check
from effectively_once_local.proof.torn_moments import StoreRef, torn_moments
from effectively_once_local.report.page import RunClock, write_page

TABLE, BUCKET, SQLITE = "table:Receipts:order_id", "bucket:Docs:docs/{key}.json", "sqlite:/tmp/x.db:rows:order_id"
STORES = {
    TABLE: StoreRef("table", "receipts-1"),
    BUCKET: StoreRef("bucket", "docs-1"),
    SQLITE: StoreRef("sqlite", "/tmp/x.db:rows"),
    "provider:/keyed/:order_id": StoreRef("provider", ""),
}


def _record_id(key: str) -> str:
    return "fn#" + sorted(record_hash_candidates(key))[0]


class Log:
    """One environment's chaos log: writes and kills numbered by one counter, as ``fault_model`` writes them."""

    def __init__(self, run_dir: Path, name: str, t0: float) -> None:
        self.path, self.seq, self.ts, self.invocation = run_dir / name, 0, t0, 1
        self.path.write_text("")

    def _add(self, **record: Any) -> None:
        self.seq += 1
        self.ts += 0.01
        with self.path.open("a") as fh:
            fh.write(json.dumps({**record, "seq": self.seq, "invocation": self.invocation, "ts": self.ts}) + "\n")

    def start(self, key: str) -> None:
        self._add(event="write", op="dynamodb.PutItem", role="idempotency_record", record_id=_record_id(key))

    def write(self, op: str, target: str, items: list[list[str]] | None = None) -> None:
        self._add(event="write", op=op, target=target, role="effect", record_id=None, items=items or [])

    def kill(self, key: str, phase: str = "after_write") -> dict[str, Any]:
        self._add(event="kill", phase=phase, queue="orders", batch_keys=[key], last_write={"op": "x"})
        return {
            "key": key,
            "phase": phase,
            "queue": "orders",
            "seq": self.seq,
            "ts": self.ts,
            "log": self.path.name,
            "proved": True,
        }


def test_a_kill_after_the_first_of_two_stores_is_a_torn_moment_naming_both(tmp_path: Path) -> None:
    log = Log(tmp_path, "chaos-orders-1.jsonl", 100.0)
    log.start("o-1")
    log.write("sql.commit", "sqlite3.Connection")
    kill = log.kill("o-1")

    moments = torn_moments(tmp_path, [kill], STORES, set())

    assert [(m["key"], m["written"], m["missing"]) for m in moments] == [("o-1", [SQLITE], [BUCKET, TABLE])]
    assert torn_moments(tmp_path, [{**kill, "proved": False}], STORES, set()) == [], "never on the last line's guess"
    assert "provider" not in json.dumps(moments), "HTTP calls are no watched writes: the provider is left out"


def test_a_kill_after_every_store_or_before_any_is_no_torn_moment(tmp_path: Path) -> None:
    log = Log(tmp_path, "chaos-orders-1.jsonl", 100.0)
    log.start("o-1")
    log.write("dynamodb.PutItem", "receipts-1", [["receipts-1", '["o-1"]']])
    log.write("s3.PutObject", "docs-1/docs/o-1.json", [["docs-1", "docs/o-1.json"]])
    log.write("sql.commit", "sqlite3.Connection")
    after_all = log.kill("o-1")
    log.start("o-2")
    before_any = log.kill("o-2", "random_moment")

    assert torn_moments(tmp_path, [after_all, before_any], STORES, set()) == []


def test_writes_of_an_earlier_attempt_in_another_environment_count_by_time(tmp_path: Path) -> None:
    """The first attempt wrote the row and the document, and was killed; the replay, in another process, is killed
    after the receipt: the key is whole then (its earlier writes count by their time), but torn at the first kill."""
    first, second = Log(tmp_path, "chaos-orders-1.jsonl", 100.0), Log(tmp_path, "chaos-orders-2.jsonl", 200.0)
    first.start("o-1")
    first.write("sql.commit", "sqlite3.Connection")
    first.write("s3.PutObject", "docs-1/docs/o-1.json", [["docs-1", "docs/o-1.json"]])
    torn = first.kill("o-1")
    second.start("o-1")
    second.write("dynamodb.PutItem", "receipts-1", [["receipts-1", '["o-1"]']])
    whole = second.kill("o-1")

    moments = torn_moments(tmp_path, [torn, whole], STORES, set())

    assert [(m["written"], m["missing"]) for m in moments] == [([BUCKET, SQLITE], [TABLE])]


def test_an_optional_store_is_never_missing_and_one_required_store_tears_nothing(tmp_path: Path) -> None:
    log = Log(tmp_path, "chaos-orders-1.jsonl", 100.0)
    log.start("o-1")
    log.write("sql.commit", "sqlite3.Connection")
    log.write("dynamodb.PutItem", "receipts-1", [["receipts-1", '["o-1"]']])
    kill = log.kill("o-1")

    assert torn_moments(tmp_path, [kill], STORES, {BUCKET}) == []
    assert torn_moments(tmp_path, [kill], STORES, {BUCKET, TABLE}) == []


def _build(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "sent": Counter({"a": 1, "b": 1}),
        "invalid_lines": 0,
        "messages_sent": 2,
        "dlq_keys": set(),
        "dead_lettered": 0,
        "log_counts": Counter({"a": 1, "b": 1}),
        "store_counts": Counter({"a": 1, "b": 1}),
        "kill_records": [],
        "effect_takes_key": False,
        **overrides,
    }
    return key_check.build(**args)


def test_a_replay_the_store_answered_without_a_second_line_is_replayed_after_a_kill() -> None:
    """A kill after the effect's write and before its line (or after the line): the key ran again, the store
    answered it, one line in all. Counted when the kill is proved to have struck after the effect, never on the
    last line's guess, and not for a key left in a DLQ."""
    proved = {"event": "kill", "phase": "after_write", "key": "a", "proved": True}
    guessed = {"event": "kill", "phase": "deadline", "key": "b", "proved": False}

    report = _build(kill_records=[proved, guessed])

    assert report["keys"]["replayed_after_kill"] == ["a"]
    assert key_check.verdict(report)[0] == 0
    assert _build(kill_records=[proved], dlq_keys={"a"})["keys"]["replayed_after_kill"] == []
    assert _build(kill_records=[proved], store_counts=None)["keys"]["replayed_after_kill"] == [], "nothing says so"
    assert _build(kill_records=[proved], store_counts=None, effect_takes_key=True)["total"]["replayed_after_kill"] == 1


def test_kills_say_whether_the_window_was_proved(tmp_path: Path) -> None:
    log = Log(tmp_path, "chaos-orders-1.jsonl", 100.0)
    log.invocation = 1
    log.start("o-1")
    log.write("sql.commit", "sqlite3.Connection")
    log.kill("o-1")
    rows = [json.loads(line) for line in log.path.read_text().splitlines()]
    for row in rows:
        row["request_id"] = "r1"
    rows[-1]["batch_keys"] = ["o-1"]
    log.path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    (kill,) = key_check.kills(tmp_path)

    assert (kill["key"], kill["proved"], kill["log"]) == ("o-1", True, "chaos-orders-1.jsonl")


def test_the_terminal_and_the_page_list_redriven_keys_with_their_rounds_and_the_torn_moments(tmp_path: Path) -> None:
    report = _build()
    moment = {"key": "a", "phase": "after_write", "queue": "q", "after_write": "sql.commit"}
    report["torn_moments"] = [{**moment, "written": [SQLITE], "missing": [TABLE]}]
    report["total"]["torn_moments"] = 1
    report["redriven"] = [{"key": "b", "rounds": [1, 2]}]

    text = key_check.render(report)
    page = write_page(tmp_path / "c.html", report, [], clock=RunClock(started=100.0), title="c").read_text()

    assert "redriven (listed, not failing): 1 valid keys finished only through the run's redrive" in text
    assert '"b" (round 1, 2)' in text and "--no-redrive" in text
    assert "torn moments (listed, not failing): 1 kills" in text
    assert f"a after sql.commit (in 1, not in {TABLE})" in text
    assert key_check.verdict(report)[0] == 0, "listed, never failing"
    assert "Listed, not failing" in page and 'data-key="redriven-b">round 1, 2<' in page
    assert f"not in {TABLE}" in page
