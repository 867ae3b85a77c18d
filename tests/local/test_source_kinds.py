"""The kinds of asynchronous source the local tooling drives (issue 29, item 5): one registry per job, keyed by the
runtime's trigger of the events the source delivers, all naming the same kinds. ``traffic.source_kinds.SOURCE_SENDERS``
(the sender, and the input line read back from a delivered event), ``aws.async_sources.SOURCE_FINDERS`` (the stack's
wiring of the source to a function) and ``aws.async_inbox.SOURCES`` (the inbox's source attribute); the runner's
event id and key read the runtime's own shape knowledge (``events.classify``, ``items``, ``delivery_id``,
``payload``)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from effectively_once_local.any_stack.chaos_targets import senders as _senders
from effectively_once_local.aws.async_inbox import EVENTBRIDGE, INVOKE, REDRIVE, SNS, SOURCES
from effectively_once_local.aws.async_sources import SOURCE_FINDERS, AsyncSource
from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.traffic.producer import EVENT_ID_HEADER, SendError
from effectively_once_local.traffic.source_kinds import SOURCE_SENDERS, sent_line, source_sender
from effectively_once_runtime import events


def test_every_source_kind_the_inbox_knows_has_a_sender_and_a_finder() -> None:
    kinds = tuple(kind for kind in SOURCES if kind not in (INVOKE, REDRIVE))

    assert kinds == tuple(SOURCE_SENDERS) == tuple(SOURCE_FINDERS) == (EVENTBRIDGE, SNS)
    assert SOURCES == ("eventbridge", "sns", "invoke", "redrive")
    assert set(kinds) <= set(events.TRIGGERS), "a source kind is the runtime's trigger of the events it delivers"


class _Lambda:
    """A Lambda client stand-in: its ``Invoke`` calls; the first answer carries the local AWS's event id header, the
    next ones only a request id (as Lambda itself answers)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def invoke(self, **request: Any) -> dict[str, Any]:
        self.calls.append(request)
        n = len(self.calls)
        headers = {EVENT_ID_HEADER: f"event-{n}"} if n == 1 else {}
        return {"StatusCode": 202, "ResponseMetadata": {"RequestId": f"request-{n}", "HTTPHeaders": headers}}


class _Session:
    """A boto3 session stand-in: the services it was asked a client of."""

    def __init__(self) -> None:
        self.services: list[str] = []
        self.clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        self.services.append(service)
        self.clients[service] = _Lambda() if service == "lambda" else SimpleNamespace(service=service)
        return self.clients[service]


RULE = AsyncSource(kind=EVENTBRIDGE, bus_name="bus", rule_name="r", source="shop", detail_type="Paid")
PATTERNLESS_RULE = AsyncSource(kind=EVENTBRIDGE, bus_name="bus", rule_name="r2")
TOPIC = AsyncSource(kind=SNS, topic_arn="arn:aws:sns:us-east-1:123456789012:t", subscription_arn="s")


@pytest.mark.parametrize(
    ("sources", "service"),
    [
        ((TOPIC, RULE), "events"),
        ((PATTERNLESS_RULE, TOPIC), "sns"),
        ((TOPIC,), "sns"),
        ((PATTERNLESS_RULE,), None),
        ((), None),
    ],
    ids=["a rule before a topic", "a rule without a plain pattern is passed over", "a topic", "none", "no sources"],
)
def test_a_target_is_sent_to_through_its_first_source_of_the_first_kind(
    sources: tuple[AsyncSource, ...], service: str | None
) -> None:
    session = _Session()

    sender = source_sender(session, sources)

    assert (sender is not None) == (service is not None)
    assert session.services == ([service] if service else [])


def test_a_target_whose_sources_cannot_take_input_fails_naming_every_kind() -> None:
    mapping = SimpleNamespace(async_config=object(), function_name="pay")
    target = SimpleNamespace(label="async-Pay", mapping=mapping, sources=(PATTERNLESS_RULE,))

    with pytest.raises(DeployError) as caught:
        _senders(_Session(), [target])  # type: ignore[list-item]

    assert str(caught.value) == (
        "async-Pay: no EventBridge rule (with a plain source and detail-type) or SNS topic of the stack invokes the "
        "function: the run cannot send it input"
    )


def test_a_target_nothing_in_the_stack_invokes_is_sent_to_by_direct_asynchronous_invocations() -> None:
    """Issue 30, item 1: ``Invoke`` with ``InvocationType="Event"``, the body as the payload; each id the one the
    local AWS answered with (``producer.EVENT_ID_HEADER``), else the request id."""
    mapping = SimpleNamespace(async_config=object(), function_name="pay-fn")
    target = SimpleNamespace(label="async-Pay", mapping=mapping, sources=())
    session = _Session()

    sender = _senders(session, [target])["async-Pay"]  # type: ignore[list-item]

    assert session.services == ["lambda"]
    lam = session.clients["lambda"]
    lines = [SimpleNamespace(number=n, body=json.dumps({"order_id": f"o-{n}"})) for n in (1, 2)]
    ids = sender([SimpleNamespace(line=line) for line in lines])  # type: ignore[misc]
    assert ids == ["event-1", "request-2"]
    assert lam.calls == [
        {"FunctionName": "pay-fn", "InvocationType": "Event", "Payload": line.body.encode()} for line in lines
    ]
    with pytest.raises(SendError, match="line 3: a direct invocation takes a JSON payload"):
        sender([SimpleNamespace(line=SimpleNamespace(number=3, body="not json"))])  # type: ignore[misc]


def _sns_event(message: Any) -> dict[str, Any]:
    return {"Records": [{"EventSource": "aws:sns", "Sns": {"MessageId": "m-1", "Message": message}}]}


@pytest.mark.parametrize(
    ("event", "line"),
    [
        ({"detail-type": "Paid", "source": "shop", "detail": {"payment_id": "p-1"}}, '{"payment_id": "p-1"}'),
        (_sns_event('{ "payment_id" :  "p-2" }'), '{ "payment_id" :  "p-2" }'),
        (_sns_event("not json"), "not json"),
        ({"payment_id": "p-3"}, '{"payment_id": "p-3"}'),
        ([1, 2], "[1, 2]"),
    ],
    ids=["eventbridge detail as JSON", "sns message as published", "sns message not json", "direct", "a list"],
)
def test_the_line_read_back_is_what_the_sender_put_through(event: Any, line: str) -> None:
    assert sent_line(event) == line
