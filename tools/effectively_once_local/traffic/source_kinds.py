"""One class per kind of asynchronous source the local tooling drives (an EventBridge rule, an SNS subscription, a
direct ``Invoke`` with ``InvocationType="Event"``), each holding what the tooling knows of it: the runtime's trigger
of the events it delivers (``effectively_once_runtime.events``), the value of the function's inbox message's source
attribute (``aws/async_inbox.SOURCE_ATTRIBUTE``), how an input line is sent through it (``sender``), what its
producer published inside a delivered event (``published``: where the runner reads an event's business key) and how
the input line comes back out of a delivered event (``line_of``: an on-failure record's event read back). The runner
and the chaos run ask the kind (:func:`kind_of_trigger`, :data:`SOURCE_KINDS`) and never name a service.

The stack's wiring of a source to a function is found by the local AWS's side (``aws/async_sources.SOURCE_FINDERS``,
one finder per kind that has a sender: ``tests/local/test_source_kinds.py`` fails when one is missing). A kind that
leaves a piece out fails at import (:meth:`AsyncSourceKind.__init_subclass__`).

Model: aws-cdk's ``aws-lambda-event-sources`` (one base, each source a small class).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from effectively_once_runtime import events

from .producer import Sender, event_sender, topic_sender

__all__ = ["SOURCE_KINDS", "SOURCE_SENDERS", "AsyncSourceKind", "kind_of_trigger", "sent_line", "source_sender"]

#: What every concrete kind must set (module docstring).
_REQUIRED = ("trigger", "inbox_source", "what")


class AsyncSourceKind:
    """One kind of asynchronous source (module docstring).

    :cvar trigger: the runtime's trigger of the events it delivers (``events.TRIGGERS``).
    :cvar inbox_source: the inbox message's source attribute for its events (``aws/async_inbox.SOURCES``).
    :cvar what: the source as a message names it (``"SNS topic"``).
    :cvar in_stack: whether a source of the stack sends the events (found by ``aws/async_sources.SOURCE_FINDERS``,
        sent through by :meth:`sender`), or the run invokes the function itself.
    :cvar enveloped: whether its producer's payload sits under the runtime's envelope of the trigger's name
        (``events.ENVELOPES``: an EventBridge event's ``detail``, an SNS record's ``Sns.Message``).
    """

    trigger: ClassVar[str]
    inbox_source: ClassVar[str]
    what: ClassVar[str]
    in_stack: ClassVar[bool] = True
    enveloped: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        missing = [attr for attr in _REQUIRED if not hasattr(cls, attr)]
        if missing:
            raise TypeError(f"source kind {cls.__name__} sets no {', '.join(missing)} (traffic/source_kinds.py)")
        if cls.trigger not in events.TRIGGERS or (cls.enveloped and cls.trigger not in events.ENVELOPES):
            raise TypeError(f"source kind {cls.__name__}: {cls.trigger!r} is no trigger (or envelope) of the runtime")

    def sender(self, session: Any, source: Any) -> Sender | None:
        """The :data:`~.producer.Sender` through one source of this kind (an ``aws.async_sources.AsyncSource``);
        ``None`` when it cannot take input. :default: ``None`` (sent to by other means)."""
        return None

    def published(self, item: Any, event: Any) -> Any:
        """What the producer published inside a delivered ``event`` whose first item is ``item``: under the
        trigger's envelope when :attr:`enveloped` (``events.payload``), else the event itself.

        :raises effectively_once_runtime.errors.InvalidRecord: an envelope the runtime cannot open.
        """
        return events.payload(self.trigger, item, self.trigger) if self.enveloped else event

    def line_of(self, event: Any) -> str | None:
        """The input line inside an event this kind delivered (what its sender put through); ``None`` for an event
        of another shape. :default: ``None``."""
        return None


class EventBridgeRule(AsyncSourceKind):
    trigger = inbox_source = events.EVENTBRIDGE
    what = "EventBridge rule (with a plain source and detail-type)"
    enveloped = True

    def sender(self, session: Any, source: Any) -> Sender | None:
        """``PutEvents`` through a rule (``bus_name``, ``source``, ``detail_type``); ``None`` for a rule whose
        pattern has no plain ``source`` and ``detail-type``."""
        if not (source.source and source.detail_type):
            return None
        return event_sender(
            session.client("events"),
            bus_name=str(source.bus_name),
            source=str(source.source),
            detail_type=str(source.detail_type),
        )

    def line_of(self, event: Any) -> str | None:
        """An EventBridge event's ``detail`` as JSON (what the sender put as ``Detail``)."""
        if isinstance(event, dict) and "detail-type" in event and "detail" in event:
            return json.dumps(event["detail"])
        return None


class SnsSubscription(AsyncSourceKind):
    trigger = inbox_source = events.SNS
    what = "SNS topic"
    enveloped = True

    def sender(self, session: Any, source: Any) -> Sender | None:
        """``Publish`` to the subscription's topic (``topic_arn``); ``None`` without one."""
        return topic_sender(session.client("sns"), topic_arn=str(source.topic_arn)) if source.topic_arn else None

    def line_of(self, event: Any) -> str | None:
        """An SNS event's first record's ``Sns.Message`` (what the sender published), as it is."""
        records = event.get("Records") if isinstance(event, dict) else None
        if isinstance(records, list) and records and isinstance(records[0], dict) and "Sns" in records[0]:
            return str(records[0]["Sns"].get("Message"))
        return None


class DirectInvoke(AsyncSourceKind):
    """A function nothing in the stack invokes: sent to by ``Invoke`` (``producer.invoke_sender``), its event the
    input line itself."""

    trigger = events.DIRECT
    inbox_source = "invoke"
    what = "direct Invoke"
    in_stack = False

    def line_of(self, event: Any) -> str | None:
        return json.dumps(event)


#: Every kind, in the order a target's sender is chosen and a delivered event's line is read back (the direct
#: invocation last: its line is any event).
SOURCE_KINDS: tuple[AsyncSourceKind, ...] = (EventBridgeRule(), SnsSubscription(), DirectInvoke())
#: The kinds sent through a source of the stack, by trigger (``aws/async_sources.SOURCE_FINDERS`` finds them).
SOURCE_SENDERS: dict[str, AsyncSourceKind] = {kind.trigger: kind for kind in SOURCE_KINDS if kind.in_stack}


def kind_of_trigger(trigger: str) -> AsyncSourceKind | None:
    """The kind delivering events of the runtime's ``trigger``; ``None`` for a trigger no kind delivers."""
    return next((kind for kind in SOURCE_KINDS if kind.trigger == trigger), None)


def source_sender(session: Any, sources: Any) -> Sender | None:
    """The sender of an asynchronous target: through its first source (an ``AsyncSource``, with ``kind``) of the
    first kind of :data:`SOURCE_SENDERS` that has one able to take input; ``None`` when none can."""
    listed = list(sources)
    for trigger, kind in SOURCE_SENDERS.items():
        for source in listed:
            sender = kind.sender(session, source) if source.kind == trigger else None
            if sender is not None:
                return sender
    return None


def sent_line(event: Any) -> str:
    """The input line inside an event an asynchronous source delivered: the first kind's (in :data:`SOURCE_KINDS`'
    order) ``line_of`` that reads one: an EventBridge event's ``detail`` as JSON, an SNS record's ``Message``; else
    the event itself, as JSON (a direct invocation's)."""
    return next(line for kind in SOURCE_KINDS if (line := kind.line_of(event)) is not None)
