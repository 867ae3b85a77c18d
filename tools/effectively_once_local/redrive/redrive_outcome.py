"""What the ``redrive`` command's two paths share (``redrive/dlq_redrive.py`` for the DLQs,
``redrive/on_failure_redrive.py`` for the on-failure queues): the outcome of one queue's redrive, the error of a
misused command, and the endpoint check that picks the local path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: How long a message received for the local move stays invisible to others: ample for one send and one delete.
LOCAL_VISIBILITY_SECONDS = 60


class RedriveError(RuntimeError):
    """An expected error (unknown queue label, a queue without a DLQ); the message is one line."""


@dataclass(frozen=True)
class Outcome:
    """What a redrive of one DLQ did. ``left``: messages not moved by a task that did not complete."""

    label: str
    how: str
    status: str
    moved: int
    left: int = 0
    reason: str = ""
    #: What ``moved`` counts: a DLQ's messages ``moved``, an on-failure queue's records ``re-invoked``.
    moved_word: str = "moved"
    #: What ``left`` counts, then printed always; ``None``: printed as ``not <moved_word>`` when not completed.
    left_word: str | None = None
    #: Records left in the queue on purpose (an on-failure queue's refusals), not counted in ``left``.
    kept: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "COMPLETED"

    def line(self) -> str:
        text = f"{self.label}: {self.status.lower()} ({self.how}), {self.moved_word} {self.moved}"
        if self.left_word is not None or not self.ok:
            text += f", {self.left_word or 'not ' + self.moved_word} {self.left}"
            text += f", kept {self.kept}" if self.kept else ""
            text += f": {self.reason}" if self.reason else ""
        return text


def is_local(sqs: Any) -> bool:
    """Whether the client talks to a local AWS on loopback (moto), where the local move is used."""
    return (urlparse(sqs.meta.endpoint_url).hostname or "") in LOOPBACK_HOSTS
