"""The chaos command's input: message bodies for any stack, read into lines the producer (``traffic/producer.py``)
sends.

A JSON Lines file, one message per line. A line is either the body itself (a JSON object, sent as compact JSON),
or a wrapper ``{"body": <object or string>, "queue": "<queue>", "group": "<message group id>"}`` (only these
keys; ``body`` required): a string body is sent verbatim (how a file carries a malformed message). ``queue`` names
the target mapping's source queue by its CloudFormation logical id, its queue name, or a part of either that
matches one queue only (case-insensitive), or an asynchronous target's label (``async-<function id>``, or a part
such as ``async``); it may be left out when the stack has one target. ``group`` is the
FIFO message group id (default: the line's business key). The FIFO deduplication id is the SHA-256 of the body, so
a resend inside the deduplication interval is the same message to SQS (dropped), as a producer retrying at once
would send it; a resend after the interval gets a new id (``producer.late_dedup_id``), as a producer retrying later
does.

The business key of a line is the ``--key`` JMESPath over its body (strict JSON object); a line whose key is
missing is not a valid key: it may end in a DLQ and is never "lost". Every rule here is the runtime's own, imported,
not restated: the body is read by ``effectively_once_runtime.body``, the expression compiled by
``effectively_once_runtime.events.compile_expression`` (Powertools' JMESPath functions included) and a key is missing
by ``effectively_once_runtime.consumer.key_text`` (Powertools' ``is_missing_idempotency_key``), so a line is invalid
here exactly when the runtime rejects its body for a missing key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effectively_once_runtime.body import parse_object
from effectively_once_runtime.consumer import key_text
from effectively_once_runtime.errors import InvalidRecord
from effectively_once_runtime.events import Expression, InvalidExpression, compile_expression
from effectively_once_runtime.identity import check_steps, normalize_key

from ..base.json_lines import JsonLinesError, read_json_lines
from ..base.tool_limits import SQS_FIFO_ID_PATTERN

_WRAPPER_KEYS = {"body", "queue", "group"}
_FIFO_ID = re.compile(SQS_FIFO_ID_PATTERN)


class InputFileError(ValueError):
    """The input file cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class InputLine:
    number: int
    body: str
    key: str | None  # the business key as text; None when the key JMESPath finds nothing
    queue: str | None
    group: str | None

    @property
    def group_id(self) -> str:
        """The FIFO message group: the line's ``group``, else its key, else ``default`` (a SHA-256 when SQS would
        refuse the text as a group id)."""
        return _fifo_id(self.group or self.key or "default")

    @property
    def dedup_id(self) -> str:
        """The FIFO deduplication id: the SHA-256 of the body, so a resend inside the interval is the same message."""
        return hashlib.sha256(self.body.encode()).hexdigest()


def body_key(path: Expression, body: str) -> str | None:
    """The business key of a message body, read as the runtime reads it (``effectively_once_runtime.body``: strict
    JSON, so a repeated key, ``NaN`` or an unreadable number make the body invalid): ``None`` for an invalid body, one
    that is not an object, a search that fails on it, or a missing key (``key_text``): exactly the bodies the runtime
    rejects as ``InvalidRecord`` before its record function runs."""
    try:
        return key_text(path.search(parse_object(body)))
    except InvalidRecord:
        return None


class NormalizedKey(Expression):
    """A key expression whose result gets the runtime's business-identity normalisation
    (``effectively_once_runtime.identity.normalize_key``: the same rule as ``Consumer(normalize=...)``)."""

    def __init__(self, inner: Expression, steps: tuple[str, ...]) -> None:
        super().__init__(inner.expression, inner.parsed)
        self.steps = steps

    def search(self, data: Any) -> Any:
        return normalize_key(super().search(data), self.steps)


def compile_key(expression: str, normalize: Sequence[str] = ()) -> Expression:
    """The ``--key`` expression compiled as the runtime compiles ``Consumer(key=...)``; with ``normalize``
    (``--normalize``: ``casefold``, ``strip``, ``nfkc``, in the order given) its result normalised as the runtime's
    ``Consumer(normalize=...)`` does. Business identity comes from the chaos command, never from the app under test.

    :raises InputFileError: not a JMESPath expression, one calling a function the runtime does not know, or an unknown
        normalisation step.
    """
    try:
        compiled = compile_expression("key", expression)
    except InvalidExpression as exc:
        raise InputFileError(f"{expression!r} is not a JMESPath expression the runtime accepts: {exc.reason}") from exc
    try:
        steps = check_steps(normalize)
    except (ValueError, TypeError) as exc:
        raise InputFileError(str(exc)) from exc
    return NormalizedKey(compiled, steps) if steps else compiled


def load_input(path: Path, key: str, normalize: Sequence[str] = ()) -> list[InputLine]:
    """Read and check the whole file before anything is sent.

    :raises InputFileError: missing, not UTF-8, empty, a line that is not a JSON object, a wrapper with other keys or
        a body that is neither an object nor a string, or a ``queue``/``group`` that is not a string.
    """
    key_path = compile_key(key, normalize)
    try:
        parsed = read_json_lines(path, unreadable_hint='send it as a string body: {"body": "<text>"}')
    except JsonLinesError as exc:
        raise InputFileError(str(exc)) from exc
    lines: list[InputLine] = []
    for item in parsed:
        number, doc = item.number, item.data
        if not isinstance(doc, dict):
            raise InputFileError(f"{path}:{number}: a line must be a JSON object (a body, or a wrapper with 'body')")
        queue = group = None
        if "body" in doc and set(doc) <= _WRAPPER_KEYS:
            if item.repeated:
                raise InputFileError(
                    f"{path}:{number}: a wrapper line repeats the key {item.repeated[0]!r}; give a body with"
                    " repeated keys as a string body"
                )
            body_value, queue, group = doc["body"], doc.get("queue"), doc.get("group")
            for name, value in (("queue", queue), ("group", group)):
                if value is not None and not isinstance(value, str):
                    raise InputFileError(f"{path}:{number}: {name} must be a string")
            if isinstance(body_value, str):
                body = body_value
            elif isinstance(body_value, dict):
                body = json.dumps(body_value, separators=(",", ":"))
            else:
                raise InputFileError(f"{path}:{number}: body must be a JSON object or a string")
        elif item.repeated:
            # Re-encoding would keep only the last value of a repeated key: send the line as written instead.
            body = item.raw
        else:
            body = json.dumps(doc, separators=(",", ":"))
        lines.append(InputLine(number, body, body_key(key_path, body), queue, group))
    if not lines:
        raise InputFileError(f"{path}: no messages in the file")
    return lines


def resolve_queue(name: str | None, labels: dict[str, str]) -> str:
    """The mapping label a line's ``queue`` names. ``labels``: label -> queue name.

    :raises InputFileError: no queue or several match (the message lists the stack's queues).
    """
    if name is None:
        if len(labels) == 1:
            return next(iter(labels))
        raise InputFileError(
            f"the stack has {len(labels)} targets (SQS mappings and asynchronous targets): each line must name its"
            f" queue ({_shown(labels)})"
        )
    for label, queue_name in labels.items():
        if name in (label, queue_name):
            return label
    matches = [label for label, q in labels.items() if name.lower() in label.lower() or name.lower() in q.lower()]
    if len(matches) != 1:
        what = "no queue" if not matches else f"{len(matches)} queues"
        raise InputFileError(f"queue {name!r} matches {what} of the stack ({_shown(labels)})")
    return matches[0]


def _shown(labels: dict[str, str]) -> str:
    return ", ".join(f"{label} ({queue})" for label, queue in sorted(labels.items()))


def _fifo_id(text: str) -> str:
    return text if _FIFO_ID.fullmatch(text) else hashlib.sha256(text.encode()).hexdigest()
