"""Exceptions a record function raises to say what kind of failure it is. Standard library only."""

from __future__ import annotations


class PermanentError(Exception):
    """The record can never succeed (bad input, a business rule): retrying it changes nothing.

    Today it is a batch item failure like any other error (the record returns to the queue and, after
    ``maxReceiveCount`` receives, moves to the dead-letter queue); it is logged as ``invalid record`` and counted in
    ``InvalidRecords``. A directly invoked event that raises it raises it to the caller.
    """


class InvalidRecord(PermanentError, ValueError):
    """The runtime's own bad input: a body that is not strict JSON or not a JSON object."""
