"""How long a run waits for its queues to drain, and what it says when they do not (issue 43, item 7).

The chaos run's default limit follows the stack's queues, with the formula the ``report`` command's ``--wait``
uses (``payments/remote.drain_wait_seconds``): a message the app keeps failing, or that kills keep striking, is
received maxReceiveCount times one visibility timeout apart and moved to the DLQ on the next receive, so the longest
path through a queue is ``(maxReceiveCount + 1) x visibility timeout``. The rules:

- a queue without a DLQ (no redrive policy) is counted as if its maxReceiveCount were :data:`NO_DLQ_RECEIVES`: SQS
  would redeliver such a message until its retention period ends, which no run waits out;
- an asynchronous target: ``(retries + 2) x`` its inbox's visibility timeout (Lambda's attempts, and one more after
  a kill);
- large inputs: :data:`SECONDS_PER_MESSAGE` for each message the run sends (the local runner's slow end on a loaded
  2-core machine);
- plus :data:`MARGIN_SECONDS`, and never under :data:`FLOOR_SECONDS` (the limit before this rule).

A run that runs out of time raises :class:`DrainTimeout`: one line naming each queue with messages left (visible,
in flight, delayed) and ``--drain-timeout``; the command exits :data:`~effectively_once_local.base.exit_codes.
EXIT_NOT_DRAINED`. ``demo`` keeps its fixed default (600 s: it deploys its own sandbox, whose queues it sets) and
shares the exit code and the line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..aws.mapping_config import MappingConfig
from ..aws.server import LocalAwsError

#: The limit before it followed the stack, and its least value.
FLOOR_SECONDS = 600
#: The receives a queue without a DLQ is counted with.
NO_DLQ_RECEIVES = 5
#: Added for the pollers' start and the settling polls.
MARGIN_SECONDS = 60
#: Added per message sent.
SECONDS_PER_MESSAGE = 0.2
#: The SQS counts of messages left, and their words in the line.
_LEFT = {
    "ApproximateNumberOfMessages": "visible",
    "ApproximateNumberOfMessagesNotVisible": "in flight",
    "ApproximateNumberOfMessagesDelayed": "delayed",
}


def longest_path_seconds(mapping: MappingConfig) -> int:
    """The longest a message can stay in one mapping's queue (the module docstring's rules)."""
    if mapping.async_config is not None:
        return (mapping.async_config.max_retry_attempts + 2) * mapping.visibility_timeout_seconds
    receives = mapping.max_receive_count if mapping.max_receive_count > 0 else NO_DLQ_RECEIVES
    return (receives + 1) * mapping.visibility_timeout_seconds


def default_drain_seconds(mappings: Iterable[MappingConfig], messages: int) -> int:
    """The chaos run's default limit for the stack's ``mappings`` and the ``messages`` it sends."""
    longest = max((longest_path_seconds(m) for m in mappings), default=0)
    return max(FLOOR_SECONDS, longest + MARGIN_SECONDS + math.ceil(messages * SECONDS_PER_MESSAGE))


class DrainTimeout(LocalAwsError):
    """The queues still held messages when the limit passed: ``seconds``, ``left`` (per queue name, the counts of
    :data:`_LEFT` by their words) and the run folder; the message is one line."""

    def __init__(self, seconds: int, left: dict[str, dict[str, int]], run_dir: Path) -> None:
        self.seconds, self.left = seconds, left
        where = "; ".join(
            f"{queue}: " + ", ".join(f"{n} {word}" for word, n in counts.items() if n) for queue, counts in left.items()
        )
        super().__init__(
            f"queues not drained after {seconds}s ({where or 'the counts read empty at the end'}); raise the limit"
            f" with --drain-timeout SECONDS (a queue's longest path is (maxReceiveCount + 1) x its visibility"
            f" timeout); the run's logs are in {run_dir}"
        )


def left_in(sqs: Any, urls: Iterable[str]) -> dict[str, dict[str, int]]:
    """Per queue (by name) that still holds messages, its counts by :data:`_LEFT`'s words."""
    found = {}
    for url in urls:
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(_LEFT))["Attributes"]
        counts = {word: int(attrs.get(name, 0)) for name, word in _LEFT.items()}
        if any(counts.values()):
            found[url.rstrip("/").rsplit("/", 1)[-1]] = counts
    return found
