"""The chaos report's un-keyed block (``key_check.unkeyed_lines``, ``report["unkeyed"]``): the runtime's ``effect
possibly lost`` and ``effect repeated`` lines counted per call (effect, adapter read from the marker id, delivery)
and per business key, for a checker to hold against the store of each call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from effectively_once_local.proof.key_check import render, unkeyed_lines
from effectively_once_runtime import names
from effectively_once_runtime.effects.unkeyed import marker_id


def _line(message: str, key: str, adapter: str, delivery: str, **extra: Any) -> str:
    effect_key = f"shop#fulfil#{key}#sms"
    return json.dumps(
        {
            "level": "WARNING",
            names.FIELD_MESSAGE: message,
            names.FIELD_IDEMPOTENCY_KEY: key,
            names.FIELD_EFFECT: "fulfil",
            names.FIELD_EFFECT_KEY: effect_key,
            names.FIELD_EFFECT_MARKER: marker_id("shop", adapter, "fulfil", effect_key),
            names.FIELD_DELIVERY: delivery,
            **extra,
        }
    )


def test_counts_each_calls_lines_per_business_key(tmp_path: Path) -> None:
    (tmp_path / "function-q-1.log").write_text(
        "\n".join(
            [
                _line(names.MSG_EFFECT_POSSIBLY_LOST, "O-1", "unkeyed", "at_most_once"),
                _line(names.MSG_EFFECT_REPEATED, "o-1", "send_message", "at_least_once", attempts=2),
                _line(names.MSG_EFFECT_REPEATED, "o-2", "send_message", "at_least_once", attempts=2),
                json.dumps({names.FIELD_MESSAGE: names.EFFECT_EXECUTED, names.FIELD_IDEMPOTENCY_KEY: "o-1"}),
                '{"message": "effect repeated", "idempotency_key": "o-3"',  # cut by a kill: not a line
            ]
        )
        + "\n"
    )
    (tmp_path / "function-q-2.log").write_text(
        _line(names.MSG_EFFECT_REPEATED, "o-1", "send_message", "at_least_once", attempts=3) + "\n"
    )

    found = unkeyed_lines(tmp_path, ("casefold",))

    assert (found["possibly_lost"], found["repeated"]) == (1, 3)
    assert found["calls"] == {
        "fulfil send_message at_least_once": {
            "effect": "fulfil",
            "adapter": "send_message",
            "delivery": "at_least_once",
            "possibly_lost": 0,
            "repeated": 3,
            "keys": {"o-1": 2, "o-2": 1},
        },
        "fulfil unkeyed at_most_once": {
            "effect": "fulfil",
            "adapter": "unkeyed",
            "delivery": "at_most_once",
            "possibly_lost": 1,
            "repeated": 0,
            "keys": {"o-1": 1},
        },
    }


def test_a_run_without_unkeyed_lines_has_an_empty_block_and_no_report_line(tmp_path: Path) -> None:
    (tmp_path / "function-q-1.log").write_text(
        json.dumps({names.FIELD_MESSAGE: names.EFFECT_EXECUTED, names.FIELD_IDEMPOTENCY_KEY: "o-1"}) + "\n"
    )
    report = _report(unkeyed_lines(tmp_path))

    assert report["unkeyed"] == {"possibly_lost": 0, "repeated": 0, "calls": {}}
    assert "un-keyed" not in render(report)


def test_the_report_names_each_call_with_its_lines(tmp_path: Path) -> None:
    (tmp_path / "function-q-1.log").write_text(
        _line(names.MSG_EFFECT_POSSIBLY_LOST, "o-1", "unkeyed", "at_most_once") + "\n"
    )

    text = render(_report(unkeyed_lines(tmp_path)))

    assert (
        "un-keyed effects: 1 possibly lost (at_most_once), 0 repeated (at_least_once): fulfil unkeyed at_most_once 1"
        in text
    )


def _report(unkeyed: dict[str, Any]) -> dict[str, Any]:
    """The smallest report ``render`` takes, with the un-keyed block."""
    total = {"kills": {}, "replayed_after_kill": 0}
    keys = {name: [] for name in ("lost", "duplicated", "unexpected", "unexplained_replays")}
    return {"total": total, "keys": keys, "effects_counted_from": "store", "unkeyed": unkeyed}
