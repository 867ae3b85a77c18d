"""The local event source mapping gathers a batch as Lambda does with a batching window (issue 43, item 1b: two
copies of a message sent back to back share a batch): more receives until the batch is full or the window, counted
from the first message, has passed; without a window, one receive. No AWS: a queue of canned receives."""

from __future__ import annotations

import threading
from typing import Any

from effectively_once_local.runner.batch_poller import receive_batch

from .conftest import mapping_config


class _Queue:
    """Each receive answers the next canned list (then nothing), and advances a fake clock by its wait."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.now = 0.0

    def receive_message(self, **params: Any) -> dict[str, Any]:
        self.calls.append(params)
        found = self.answers.pop(0) if self.answers else []
        self.now += max(params["WaitTimeSeconds"], 0.1) if not found else 0.01
        return {"Messages": [{"MessageId": m} for m in found[: params["MaxNumberOfMessages"]]]}


def _ids(messages: list[Any]) -> list[str]:
    return [m["MessageId"] for m in messages]


def test_without_a_window_a_batch_is_one_receive() -> None:
    queue = _Queue(["a"], ["b"])

    assert _ids(receive_batch(queue, mapping_config(batch_size=10), threading.Event(), lambda: queue.now)) == ["a"]
    assert len(queue.calls) == 1


def test_a_window_gathers_messages_sent_after_the_first_until_the_batch_is_full() -> None:
    queue = _Queue(["a"], [], ["b", "c"], ["d", "e", "f"])
    mapping = mapping_config(batch_size=4, batching_window_seconds=5)

    batch = receive_batch(queue, mapping, threading.Event(), lambda: queue.now)

    assert _ids(batch) == ["a", "b", "c", "d"], "full at the batch size"
    assert [c["MaxNumberOfMessages"] for c in queue.calls] == [4, 3, 3, 1]


def test_a_window_ends_with_what_came_and_an_empty_queue_waits_for_a_first_message() -> None:
    queue = _Queue(["a"])
    mapping = mapping_config(batch_size=10, batching_window_seconds=2)

    assert _ids(receive_batch(queue, mapping, threading.Event(), lambda: queue.now)) == ["a"]
    assert queue.now >= 2, "it waited out the window"
    assert receive_batch(_Queue(), mapping, threading.Event()) == [], "no first message: no window"


def test_a_batch_over_ten_takes_several_receives_and_stop_ends_the_window() -> None:
    queue = _Queue([str(i) for i in range(10)], [str(i) for i in range(10, 20)])
    mapping = mapping_config(batch_size=15, batching_window_seconds=30)

    assert len(receive_batch(queue, mapping, threading.Event(), lambda: queue.now)) == 15
    stopped = threading.Event()
    stopped.set()
    assert _ids(receive_batch(_Queue(["a"], ["b"]), mapping, stopped)) == ["a"]
