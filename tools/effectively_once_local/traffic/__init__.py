"""What a run sends: the chaos command's input lines (:mod:`.chaos_input`) and the one producer, the plan of
originals, duplicates and resends, the sending and the send log (:mod:`.producer`).

``effectively_once_local.traffic`` was the producer's module before 0.3.0: its names are still read from here, with a
``DeprecationWarning`` (``effectively_once_local._moved``)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    from .._moved import old_attribute

    return old_attribute("traffic", name)
