"""How a chaos run reaches its targets (``any_stack/chaos_run.py``): the sender of each asynchronous target's input,
and each target's failure queue read back (a DLQ's messages; an on-failure queue's records unwrapped to the lines
they hold) and moved back for the run's redrive; each target's row in the report (``mapping_row``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..aws.async_inbox import refusal, request_payload
from ..aws.deploy import DeployError
from ..aws.discovery import DeployedMapping
from ..aws.readback import DlqMessage, read_dlq_messages
from ..redrive.dlq_redrive import local_move, mapping_targets
from ..redrive.on_failure_redrive import local_redrive_on_failure
from ..traffic.producer import Sender, invoke_sender
from ..traffic.source_kinds import SOURCE_SENDERS, sent_line, source_sender


def unwrapped(message: DlqMessage) -> DlqMessage:
    """An on-failure record (Lambda's destination record, ``async_inbox.destination_record``) as the line it holds:
    its ``requestPayload``'s body, with the runtime's reason when the app refused the event for good (condition
    ``PermanentError``: ``async_inbox.refusal``); any other message as it is."""
    try:
        event = request_payload(message.body)
    except ValueError:
        return message
    return replace(message, body=sent_line(event), attributes={}, refusal=refusal(message.body))


def dlq_messages(sqs: Any, mappings: list[DeployedMapping]) -> dict[str, list[DlqMessage]]:
    """Each DLQ's messages, and each asynchronous target's on-failure records unwrapped, by queue name."""
    on_failure = {m.on_failure_url for m in mappings if m.mapping.async_config is not None}
    urls = sorted({m.failure_queue_url for m in mappings if m.failure_queue_url})
    return {
        url.rstrip("/").rsplit("/", 1)[-1]: [
            unwrapped(message) if url in on_failure else message for message in read_dlq_messages(sqs, url)
        ]
        for url in urls
    }


def move_back(sqs: Any, mappings: list[DeployedMapping]) -> int:
    """Every DLQ moved back to its source queue (``dlq_redrive.local_move``), every on-failure queue's records invoked
    again through the function's inbox (``on_failure_redrive.local_redrive_on_failure``); the messages moved."""
    queued = [m for m in mappings if m.mapping.async_config is None]
    moved = sum(local_move(sqs, target).moved for target in mapping_targets(sqs, queued))
    for m in mappings:
        if m.mapping.async_config is not None and m.on_failure_url:
            moved += local_redrive_on_failure(sqs, m.on_failure_url, m.mapping.function_name).moved
    return moved


def senders(session: Any, mappings: list[DeployedMapping]) -> dict[str, Sender]:
    """How input reaches each asynchronous target: through its first source of the first kind that can take input
    (``traffic.source_kinds.source_sender``: an EventBridge rule's ``PutEvents`` with the rule's source and
    detail-type on its bus, else an SNS topic's ``Publish``); when nothing in the stack invokes the function, by
    direct asynchronous invocations (``traffic.producer.invoke_sender``: ``Invoke`` with ``InvocationType="Event"``).

    :raises DeployError: an asynchronous target whose sources cannot take input (a rule without a plain source and
        detail-type)."""
    found: dict[str, Sender] = {}
    for m in mappings:
        if m.mapping.async_config is None:
            continue
        if not m.sources:
            found[m.label] = invoke_sender(session.client("lambda"), function_name=m.mapping.function_name)
            continue
        sender = source_sender(session, m.sources)
        if sender is None:
            kinds = " or ".join(entry.what for entry in SOURCE_SENDERS.values())
            raise DeployError(f"{m.label}: no {kinds} of the stack invokes the function: the run cannot send it input")
        found[m.label] = sender
    return found


def mapping_row(m: DeployedMapping) -> dict[str, Any]:
    """The chaos report's ``run.mappings`` entry of one mapping or asynchronous target: ``queue``, ``function``,
    ``handler``, ``fifo``, ``kind`` (``standard``, ``fifo`` or ``async``), and for an asynchronous target its
    retry settings, on-failure queue, time scale and sources."""
    row = {
        "queue": m.queue_name,
        "function": m.mapping.function_name,
        "handler": m.mapping.handler,
        "fifo": m.fifo,
        "kind": "async" if m.mapping.async_config is not None else "fifo" if m.fifo else "standard",
    }
    if m.mapping.async_config is not None:
        row |= {
            "max_retry_attempts": m.mapping.async_config.max_retry_attempts,
            "max_event_age_seconds": m.mapping.async_config.max_event_age_seconds,
            "on_failure_queue": m.on_failure_url,
            "time_scale": m.mapping.async_config.time_scale,
            "sources": [s.rule_name or s.topic_arn for s in m.sources],
        }
    return row
