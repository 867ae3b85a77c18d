"""The report's committed shape, and the one function that assembles a report (the chaos run's and the demo's).

``report_shape.json`` beside this module is the shape, taken from recorded runs: per report kind (:data:`CHAOS`,
:data:`DEMO`), its keys and their value types, in the order the JSON report writes them. A shape is JSON:

- a type name: ``"str"``, ``"int"``, ``"bool"``, ``"null"``, ``"number"`` (an int or a float, never a bool) or
  ``"any"``; alternatives joined by ``|`` (``"int|null"``);
- an object ``{"key": shape, "other?": shape}``: exactly these keys (one ending in ``?`` may be left out), in this
  order;
- a map ``{"*": shape}``: any keys (business keys, queue names, labels), each value of the shape;
- a list ``[shape]``: every item of the shape (a tuple too: the JSON report writes it as a list);
- ``{"oneof": [shape, ...]}``: a value of any one of them (``{"oneof": [{...}, "null"]}``: a block or ``null``).

:func:`assemble` builds a report from its sections in the committed order; with ``EFFECTIVELY_ONCE_REPORT_SHAPE``
set to ``check`` (the test suites' ``tests/conftest.py`` sets it) it also holds the whole report to the shape and
raises :class:`ReportShapeError` on any drift, so every report the tests produce is held to it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["CHAOS", "CHECK_ENV", "DEMO", "ReportShapeError", "assemble", "hold", "problems", "shape_of"]

#: The chaos run's report (``any_stack/chaos_run.py``).
CHAOS = "chaos"
#: The payments demo's report (``payments/demo.py``).
DEMO = "demo"
#: Set to ``check``: :func:`assemble` holds every report to its committed shape. :default: unset (no check).
CHECK_ENV = "EFFECTIVELY_ONCE_REPORT_SHAPE"
SHAPE_FILE = Path(__file__).with_name("report_shape.json")

_SCALARS: dict[str, Any] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "any": lambda v: True,
}


class ReportShapeError(ValueError):
    """A report that is not of its committed shape: the message lists each difference (``report.total.lost: ...``)."""


@cache
def _shapes() -> dict[str, Any]:
    shapes: dict[str, Any] = json.loads(SHAPE_FILE.read_text(encoding="utf-8"))
    return shapes


def shape_of(kind: str) -> Any:
    """The committed shape of the report ``kind`` (:data:`CHAOS`, :data:`DEMO`).

    :raises KeyError: no report of that kind."""
    return _shapes()[kind]


def _object(value: Any, shape: dict[str, Any], path: str) -> list[str]:
    """The differences of a dict from an object shape: a missing or an unknown key, a key out of order, a value."""
    if not isinstance(value, dict):
        return [f"{path}: {type(value).__name__}, not an object"]
    keys = {name.removesuffix("?"): name for name in shape}
    out = [f"{path}.{name}: missing" for name in shape if not name.endswith("?") and name not in value]
    out += [f"{path}.{key}: not in the shape" for key in value if key not in keys]
    known = [key for key in value if key in keys]
    order = [name.removesuffix("?") for name in shape if name.removesuffix("?") in value]
    if known != order:
        out.append(f"{path}: keys in the order {known}, the shape's is {order}")
    for key in known:
        out += problems(value[key], shape[keys[key]], f"{path}.{key}")
    return out


def problems(value: Any, shape: Any, path: str = "report") -> list[str]:
    """Every difference of ``value`` (a report or a part of one) from ``shape`` (the module docstring's language),
    each ``"<path>: <what>"``; empty when it is of the shape.

    :raises ValueError: ``shape`` is not of the language (an unknown type name)."""
    if isinstance(shape, str):
        names = shape.split("|")
        unknown = [n for n in names if n not in _SCALARS]
        if unknown:
            raise ValueError(f"{path}: unknown type {unknown} in the shape")
        if any(_SCALARS[n](value) for n in names):
            return []
        return [f"{path}: {json.dumps(value)[:60]} is not {shape}"]
    if isinstance(shape, list):
        if not isinstance(value, (list, tuple)):  # a tuple is written as a JSON list
            return [f"{path}: {type(value).__name__}, not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, shape[0], f"{path}[{i}]")]
    if "oneof" in shape:
        found = [problems(value, one, path) for one in shape["oneof"]]
        return [] if any(not f for f in found) else min(found, key=len)
    if "*" in shape:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a map"]
        return [p for key, item in value.items() for p in problems(item, shape["*"], f"{path}.{key}")]
    return _object(value, shape, path)


def hold(report: Mapping[str, Any], kind: str) -> None:
    """Hold ``report`` to the committed shape of ``kind``.

    :raises ReportShapeError: it differs (every difference in the message, the first 20)."""
    found = problems(dict(report), shape_of(kind))
    if found:
        raise ReportShapeError(
            f"the {kind} report is not of its committed shape ({SHAPE_FILE.name}): " + "; ".join(found[:20])
        )


def assemble(kind: str, sections: Mapping[str, Any]) -> dict[str, Any]:
    """The report of ``kind`` from its top-level ``sections`` (name -> value), in the committed shape's order. An
    optional section (``name?`` in the shape) given as ``None`` or not given is left out; a required one may be
    ``None`` only where the shape allows ``null``. Held to the whole shape (:func:`hold`) when
    ``EFFECTIVELY_ONCE_REPORT_SHAPE=check``.

    :raises ReportShapeError: a section the shape does not name, a required one not given, or (under the check) any
        difference from the shape."""
    shape = shape_of(kind)
    names = {name.removesuffix("?"): name for name in shape}
    unknown = sorted(set(sections) - set(names))
    missing = [n for n, full in names.items() if not full.endswith("?") and n not in sections]
    if unknown or missing:
        raise ReportShapeError(f"the {kind} report's sections: not in the shape {unknown}, missing {missing}")
    report = {
        name: sections[name]
        for name, full in names.items()
        if name in sections and not (full.endswith("?") and sections[name] is None)
    }
    if os.environ.get(CHECK_ENV) == "check":
        hold(report, kind)
    return report
