"""Reading a record body as strict JSON, and making a record function's result JSON-ready. Standard library only.

Strict, because Python's ``json`` module accepts more than JSON:

- a repeated key in any object (``{"amount": 1, "amount": 100000000}``) is rejected; ``json.loads`` would keep the
  last value silently (RFC 8259, section 4: names "SHOULD be unique", behaviour otherwise unpredictable);
- ``NaN``, ``Infinity`` and ``-Infinity`` are rejected (not JSON; ``json.loads`` accepts them);
- a number ``json.loads`` cannot convert (more than ``sys.get_int_max_str_digits()`` digits, 4300 by default, raises
  ``ValueError``) and nesting deeper than the interpreter's recursion limit (``RecursionError``) are rejected.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import uuid
from typing import Any

from .errors import InvalidRecord

#: Rejected values are shown cut to this many characters: a reason must not copy a megabyte into the logs.
SHOWN_CHARS = 60


def show(value: Any) -> str:
    """``repr`` of a rejected value, cut short."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    try:
        text = repr(value)
    except ValueError:  # an int longer than sys.get_int_max_str_digits() has no repr
        return f"an integer of {value.bit_length()} bits"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise InvalidRecord(f"body has a repeated key {show(key)}; a JSON object's names must be unique")
        data[key] = value
    return data


def _no_constant(name: str) -> Any:
    raise InvalidRecord(f"body contains {name}, which is not JSON")


def loads_strict(raw: str | bytes) -> Any:
    """Parse ``raw`` as strict JSON (see the module docstring).

    :raises InvalidRecord: the body is not strict JSON; the message says why, in under 200 characters.
    """
    try:
        return json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except InvalidRecord:
        raise
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidRecord(f"body is not valid JSON: {exc}") from exc
    except ValueError as exc:  # int(...) of a number longer than sys.get_int_max_str_digits()
        raise InvalidRecord(f"body has a number too long to read: {str(exc)[: SHOWN_CHARS * 2]}") from exc
    except RecursionError as exc:
        raise InvalidRecord("body is nested too deeply") from exc


def parse_object(raw: str | bytes) -> dict[str, Any]:
    """A record body: strict JSON holding an object.

    :raises InvalidRecord: not strict JSON, or not an object.
    """
    data = loads_strict(raw)
    if not isinstance(data, dict):
        raise InvalidRecord(f"body must be a JSON object, got {type(data).__name__}")
    return data


def json_safe(value: Any) -> Any:
    """``value`` with Decimal (int when integral), datetime/date (ISO 8601), UUID and sets made JSON-ready: what
    Powertools stores as the record's response and answers duplicates with."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
