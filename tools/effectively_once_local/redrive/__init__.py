"""The ``redrive`` command's job: a stack's dead-letter queues moved back to their source queues (:mod:`.dlq_redrive`),
its on-failure queues' records invoked again (:mod:`.on_failure_redrive`), and what both paths share, the outcome of
a queue's redrive and the endpoint check that picks the local path (:mod:`.redrive_outcome`). The chaos run and the
payments demo redrive locally with the same code.

``effectively_once_local.redrive`` was the DLQ redrive's module before 0.3.0: its names are still read from here,
with a ``DeprecationWarning`` (``effectively_once_local._moved``)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from .._moved import old_attribute

    return old_attribute("redrive", name)
