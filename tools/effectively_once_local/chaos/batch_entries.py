"""The entries of SQS's and SNS's batch calls in their wire forms (issue 58, item 2), for the per-entry failures
``chaos/sdk_faults.py`` injects: a batch call answered per entry (``write_services.WriteService.batch_answers``: SQS
``SendMessageBatch``, ``DeleteMessageBatch``, ``ChangeMessageVisibilityBatch``; SNS ``PublishBatch``) answers HTTP
200 with a ``Successful`` and a ``Failed`` list, each failed entry a ``BatchResultErrorEntry`` (``Id``,
``SenderFault``, ``Code``, ``Message``: Amazon SQS API Reference and Amazon SNS API Reference, "BatchResultErrorEntry"),
and the SDKs do not retry them.

Read from the serialized request (:func:`read_batch`), before botocore sends it: SQS speaks JSON (the body a JSON
object, the entries a list under ``Entries``), SNS the query protocol (the body still a dict, each entry's fields
``PublishBatchRequestEntries.member.N.<field>``). :func:`drop_entries` writes the body back without some entries,
renumbered (the app's own parameters are never touched); :func:`add_failed` adds the failed entries to the
successful answer before boto3 parses it (SQS's JSON ``Failed`` list, SNS's XML ``<Failed>`` members), so the app
reads them as the service's; :func:`failed_entries` builds them, as a service-side failure: ``SenderFault`` false,
the service's ``entry_error`` code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from .write_services import SDK_SERVICES

#: Per service, its batch operations answered per entry -> the request member holding the entries.
ENTRY_OPERATIONS: dict[str, dict[str, str]] = {
    name: dict(service.batch_answers) for name, service in SDK_SERVICES.items() if service.batch_answers
}
#: Per such service, the ``Code`` of an entry it failed (``WriteService.entry_error``).
ENTRY_ERRORS: dict[str, str] = {name: str(SDK_SERVICES[name].entry_error) for name in ENTRY_OPERATIONS}
ENTRY_MESSAGE = "The service failed this entry (injected by the chaos run: an entry AWS failed on its side)"
#: An entry's fields kept in the chaos log, by what they are: its id and its message body (a send's, a publish's).
_BODY_FIELDS = ("MessageBody", "Message")


@dataclass
class EntryBatch:
    """One batch call's entries read from its serialized request. ``body``: the request body (SQS's parsed JSON, SNS's
    dict); ``entries``: each entry's ``Id`` and ``body`` (its message, ``None`` for a delete or a visibility change),
    in order; ``target``: its queue URL or topic ARN."""

    service: str
    member: str
    body: dict[str, Any]
    entries: list[dict[str, Any]]
    target: str


def _query_entries(body: dict[str, Any], member: str) -> dict[int, dict[str, Any]]:
    """A query-protocol body's entries: number -> ``{field path: value}`` (``PublishBatchRequestEntries.member.2.Id``
    -> ``{2: {"Id": ...}}``)."""
    prefix = re.compile(rf"{re.escape(member)}\.member\.(\d+)\.(.+)", re.DOTALL)
    found: dict[int, dict[str, Any]] = {}
    for key, value in body.items():
        match = prefix.fullmatch(str(key))
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return dict(sorted(found.items()))


def read_batch(service: str, operation: str, params: dict[str, Any]) -> EntryBatch | None:
    """The entries of a batch call answered per entry, from its serialized request ``params`` (``before-call``);
    ``None``: not such a call, or a body not read."""
    member = ENTRY_OPERATIONS.get(service, {}).get(operation)
    raw = params.get("body")
    if member is None:
        return None
    if isinstance(raw, dict):  # the query protocol: the body is encoded after before-call
        fields = list(_query_entries(raw, member).values())
        target = str(raw.get("TopicArn") or raw.get("QueueUrl") or "")
        body = raw
    else:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return None
        if not isinstance(body, dict) or not isinstance(body.get(member), list):
            return None
        fields = [e for e in body[member] if isinstance(e, dict)]
        target = str(body.get("QueueUrl") or body.get("TopicArn") or "")
    entries = [{"Id": str(f.get("Id")), "body": next((f[k] for k in _BODY_FIELDS if k in f), None)} for f in fields]
    return EntryBatch(service, member, body, entries, target) if entries else None


def drop_entries(batch: EntryBatch, held: set[int], params: dict[str, Any]) -> None:
    """Write the serialized request ``params``' body back without the entries at the positions ``held`` (the rest
    in order; a query body's renumbered from 1). The body is a copy botocore made: the app's own dicts stay as
    they were."""
    if isinstance(params.get("body"), dict):
        numbered = _query_entries(batch.body, batch.member)
        prefix = f"{batch.member}.member."
        body = {k: v for k, v in batch.body.items() if not str(k).startswith(prefix)}
        kept = [fields for i, fields in enumerate(numbered.values()) if i not in held]
        for n, fields in enumerate(kept, start=1):
            body |= {f"{prefix}{n}.{path}": value for path, value in fields.items()}
        params["body"] = body
        return
    body = dict(batch.body)
    body[batch.member] = [e for i, e in enumerate(batch.body[batch.member]) if i not in held]
    params["body"] = json.dumps(body).encode("utf-8")


def failed_entries(service: str, ids: list[str]) -> list[dict[str, Any]]:
    """The answer's ``Failed`` entries for ``ids``: failed on the service's side (``SenderFault`` false, its
    ``entry_error`` code)."""
    return [{"Id": i, "SenderFault": False, "Code": ENTRY_ERRORS[service], "Message": ENTRY_MESSAGE} for i in ids]


def _xml_members(failed: list[dict[str, Any]]) -> str:
    return "".join(
        f"<member><Id>{escape(str(e['Id']))}</Id><Code>{escape(str(e['Code']))}</Code>"
        f"<Message>{escape(str(e['Message']))}</Message><SenderFault>false</SenderFault></member>"
        for e in failed
    )


def add_failed(response_dict: dict[str, Any], failed: list[dict[str, Any]]) -> None:
    """Add ``failed`` to a successful batch answer before boto3 parses it (``before-parse``), in its wire form: a
    JSON body's ``Failed`` list, or an XML body's ``<Failed>`` element (an empty one filled, a missing one added at
    the end of its ``...Result``)."""
    raw = response_dict.get("body") or b""
    text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    if text.lstrip().startswith("<"):
        members = _xml_members(failed)
        if re.search(r"<Failed\s*/>", text):
            text = re.sub(r"<Failed\s*/>", lambda _: f"<Failed>{members}</Failed>", text, count=1)
        elif "</Failed>" in text:
            text = text.replace("</Failed>", f"{members}</Failed>", 1)
        else:
            text = re.sub(r"(</\w+Result>)", lambda m: f"<Failed>{members}</Failed>{m.group(1)}", text, count=1)
        response_dict["body"] = text.encode("utf-8")
        return
    try:
        body = json.loads(text or "{}")
    except ValueError:
        return
    body["Failed"] = list(body.get("Failed") or []) + failed
    response_dict["body"] = json.dumps(body).encode("utf-8")
