"""Faults from outside the code under test: every write the local AWS accepted, seen at the SDK boundary
(:mod:`.faults`), the table of fault classes and the chaos configuration they fill (:mod:`.fault_classes`), and the
fault model, which invocations crash, time out or deliver duplicates, with the run's event log (:mod:`.fault_model`).

``effectively_once_local.chaos`` was the fault model's module before 0.3.0: its names are still read from here, with a
``DeprecationWarning`` (``effectively_once_local._moved``)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from .._moved import old_attribute

    return old_attribute("chaos", name)
