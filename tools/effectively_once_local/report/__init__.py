"""A run's outputs: the terminal summary, the JSON report and the run's HTML page (:mod:`.page`).

``effectively_once_local.report`` was the payments report's module before 0.3.0 (now
``effectively_once_local.payments.payments_report``): its names are still read from here, with a
``DeprecationWarning`` (``effectively_once_local._moved``)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from .._moved import old_attribute

    return old_attribute("report", name)
