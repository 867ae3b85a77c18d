"""Which trigger an invocation's event is, the document of each record, its payload under an envelope, and the key
JMESPath over it. Pure: standard library, jmespath and Powertools' JMESPath functions; importing it does nothing.

Triggers (``classify``): ``{"Records": [...]}`` of ``aws:sqs`` (standard or FIFO), ``aws:sns`` (``EventSource``,
capital E) or ``aws:s3`` records; an EventBridge event (``detail-type``, ``source``, ``detail``); anything else is a
direct invocation, except the shapes of the sources this runtime does not take (Kinesis, DynamoDB streams, Kafka,
Amazon MQ, any other ``aws:`` source), which are ``UnsupportedEvent``.

What the idempotency key, the payload validation and the record function run over (``payload``): the trigger's
document (``document_for``), unwrapped by the envelope (``unwrap``) and required to be a JSON object.

| trigger | ``None`` (default) | ``"sns"`` | ``"eventbridge"`` | ``"s3"`` | ``"auto"`` |
|---|---|---|---|---|---|
| SQS record | the body | the body's ``Message`` | the body's ``detail`` | each S3 record | any of these, or the body |
| SNS record | the record | ``Sns.Message`` | ``InvalidRecord`` | each S3 record | ``Sns.Message``, each S3 record |
| S3 record | the record | ``InvalidRecord`` | ``InvalidRecord`` | the record | the record |
| EventBridge | the event | ``InvalidRecord`` | ``detail`` | ``InvalidRecord`` | ``detail`` |
| direct | the event | ``Message`` | ``detail`` | each S3 record | any of these, or the event |

- ``"s3"``: an S3 event notification carried by a queue or a topic (``payloads``): the ``{"Records": [...]}`` S3
  sends to an SQS queue, or the same inside an SNS notification's ``Message`` (S3 -> SNS -> SQS, raw delivery off,
  or S3 -> SNS -> Lambda). Each of its S3 records is a payload of its own, keyed as a direct S3 trigger's record is.
  The ``s3:TestEvent`` S3 sends when a bucket's notification configuration is written has no record: no payload
  (the consumer acknowledges it with one INFO line). ``"auto"`` takes these too.

- An SQS body and an SNS ``Message`` are parsed as strict JSON (``body.parse_object``); ``detail`` is taken as it
  is. ``"sns"`` takes the body of an SQS message from an
  SNS subscription with raw delivery off (the SNS notification envelope: ``Type``, ``MessageId``, ``TopicArn``,
  ``Message``, ``Timestamp``...; with raw delivery on the body is the message itself: use ``None``);
  ``"eventbridge"`` the body of an SQS message from an EventBridge rule (the whole event). ``"auto"`` unwraps
  whichever envelope the document is and keeps anything else (a payment ``{"payment_id": ...}``) as it is.
- An SNS record's document is the record itself under ``None`` (keys ``Sns.MessageId``, ``Sns.Message`` a string,
  ``Sns.MessageAttributes``...) and its ``Sns`` object under ``"sns"``/``"auto"``.
- An S3 record: keys ``s3.bucket.name``, ``s3.object.key`` (URL-encoded as delivered, a space is ``+``),
  ``s3.object.versionId`` (versioned buckets), ``s3.object.sequencer``, ``eventName``.
- An envelope that is not there (``InvalidRecord`` in the table, or a direct event that is no such envelope) and
  a payload that is not a JSON object (``payload`` checks it) are ``InvalidRecord``: bad input, permanent.
- One level is unwrapped: EventBridge -> SNS -> SQS under ``"sns"`` or ``"auto"`` gives the EventBridge event.

Sources: https://docs.aws.amazon.com/lambda/latest/dg/with-sqs.html, with-sns.html, with-s3.html,
with-kinesis.html, with-ddb.html, with-msk.html, with-kafka.html, with-mq.html (sample events);
https://docs.aws.amazon.com/sns/latest/dg/sns-large-payload-raw-message-delivery.html (the SNS envelope in SQS);
https://docs.aws.amazon.com/eventbridge/latest/ref/overiew-event-structure.html (the EventBridge event).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jmespath
from aws_lambda_powertools.utilities.jmespath_utils import PowertoolsFunctions
from jmespath import exceptions as jmespath_exceptions
from jmespath import functions as jmespath_functions

from .body import SHOWN_CHARS, parse_object, show
from .errors import InvalidRecord, UnsupportedEvent

# --- triggers ---------------------------------------------------------------------------------------------------------
SQS = "sqs"
SNS = "sns"
S3 = "s3"
EVENTBRIDGE = "eventbridge"
DIRECT = "direct"
#: Every value ``classify`` returns.
TRIGGERS = (SQS, SNS, S3, EVENTBRIDGE, DIRECT)
#: The triggers Lambda only ever invokes asynchronously (SNS, S3 notifications, EventBridge rules: AWS Lambda
#: Developer Guide, https://docs.aws.amazon.com/lambda/latest/dg/invocation-async.html), so a refused event of one
#: goes to the on-failure queue without ``ON_FAILURE_DIRECT`` (``dispatch.py``). A new asynchronous trigger is added
#: here.
ASYNC_TRIGGERS = (SNS, S3, EVENTBRIDGE)

# --- envelopes --------------------------------------------------------------------------------------------------------
AUTO = "auto"
#: Every value ``unwrap`` takes: none, an SNS notification, an EventBridge event, or whichever of the two it is.
ENVELOPES = (None, SNS, EVENTBRIDGE, S3, AUTO)
#: The ``Event`` of the message S3 sends when a bucket's notification configuration is written (Amazon S3 User
#: Guide, "Event message structure": ``{"Service": "Amazon S3", "Event": "s3:TestEvent", "Time", "Bucket",
#: "RequestId", "HostId"}``).
S3_TEST_EVENT = "s3:TestEvent"

_TAKES = (
    "this handler takes SQS (standard or FIFO), SNS and S3 notification records, EventBridge events and direct "
    "invocations"
)
#: ``eventSource`` of a record -> its trigger (an SNS record names it ``EventSource``).
_RECORD_SOURCES = {"aws:sqs": SQS, "aws:sns": SNS, "aws:s3": S3}
#: The triggers whose events are ``Records`` (``items``): SQS, SNS and S3.
RECORD_TRIGGERS = tuple(_RECORD_SOURCES.values())
#: Where an item of a trigger holds its delivery's own id (``delivery_id``), as a path of keys: an SNS record's
#: ``Sns.MessageId``, an EventBridge event's ``id``. An S3 record and a direct invocation have none; an SQS record's
#: ``messageId`` is read by the batch path (``sqs_batch.py``), not here.
_DELIVERY_IDS: dict[str, tuple[str, ...]] = {SNS: ("Sns", "MessageId"), EVENTBRIDGE: ("id",)}
#: What an SQS or S3 record must hold for the runtime to process it: (key, type).
_RECORD_NEEDS: dict[str, tuple[tuple[str, type], ...]] = {SQS: (("messageId", str), ("body", str)), S3: (("s3", dict),)}
#: ``eventSource`` of the events without ``Records`` that are not direct invocations (MSK, self-managed Kafka as
#: the Lambda guide and as Powertools' samples spell it; ActiveMQ likewise; RabbitMQ).
_KAFKA_SOURCES = ("aws:kafka", "SelfManagedKafka", "aws:SelfManagedKafka")
_MQ_SOURCES = ("aws:mq", "aws:amq", "aws:rmq")


def _name(value: Any) -> str:
    """A source name as is when it is short printable text, else ``show``'s cut ``repr``: one line, never long."""
    if isinstance(value, str) and value.isprintable() and 0 < len(value) <= SHOWN_CHARS:
        return value
    return show(value)


def _unsupported(what: str) -> UnsupportedEvent:
    return UnsupportedEvent(f"unsupported event: {what}; {_TAKES}")


def is_eventbridge_event(document: Any) -> bool:
    """Whether ``document`` is an EventBridge event: an object with ``detail-type`` and ``source`` strings and a
    ``detail``. A payload needs all three names, hyphen included, to be taken for one."""
    return _eventbridge_problem(document) is None


def _eventbridge_problem(document: Any) -> str | None:
    if not isinstance(document, dict):
        return f"got {show(document)}"
    for name in ("detail-type", "source"):
        if not isinstance(document.get(name), str):
            return _wrong(document, name)
    return None if "detail" in document else "it has no detail"


def is_sns_notification(document: Any) -> bool:
    """Whether ``document`` is an SNS notification envelope (the JSON body SNS delivers to SQS with raw delivery
    off, or a direct SNS record's ``Sns``): an object with ``Type`` ``"Notification"`` and ``MessageId``,
    ``TopicArn`` and ``Message`` strings."""
    return _sns_problem(document) is None


def _wrong(document: dict[str, Any], name: str) -> str:
    return f"{name} is {show(document[name])}" if name in document else f"it has no {name}"


def _sns_problem(document: Any) -> str | None:
    if not isinstance(document, dict):
        return f"got {show(document)}"
    if document.get("Type") != "Notification":
        return _wrong(document, "Type")
    for name in ("MessageId", "TopicArn", "Message"):
        if not isinstance(document.get(name), str):
            return _wrong(document, name)
    return None


def classify(event: Any) -> str:
    """Which trigger ``event`` (an invocation's whole event) is: one of ``TRIGGERS``.

    :raises UnsupportedEvent: records of another source (``aws:kinesis``, ``aws:dynamodb``, ...) or of mixed
        sources, ``Records`` empty or not a list, a record that is not an object, an SQS record without a
        ``messageId`` or ``body`` string, an SNS record without ``Sns.MessageId``, an S3 record without ``s3``;
        a Kafka or Amazon MQ event, or any other ``aws:`` ``eventSource`` without ``Records``. One line.
    """
    if not isinstance(event, dict):
        return DIRECT
    if "Records" in event:
        return _classify_records(event["Records"])
    if is_eventbridge_event(event):
        return EVENTBRIDGE
    _reject_other_sources(event)
    return DIRECT


def _classify_records(records: Any) -> str:
    if not isinstance(records, list):
        raise _unsupported(f"Records is {show(records)}, not a list")
    if not records:
        raise _unsupported("Records is empty")
    sources: dict[str, Any] = {}
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise _unsupported(f"Records[{index}] is {show(record)}, not an object")
        source = record.get("eventSource", record.get("EventSource"))
        sources.setdefault(_name(source), source)
    if len(sources) > 1:
        raise _unsupported(f"Records of mixed sources ({', '.join(sorted(sources)[:5])})")
    (source,) = sources.values()
    trigger = _RECORD_SOURCES.get(source) if isinstance(source, str) else None
    if trigger is None:
        raise _unsupported(f"Records from {_name(source)}" if source is not None else "Records without eventSource")
    for index, record in enumerate(records):
        problem = _record_problem(trigger, record)
        if problem:
            raise _unsupported(f"Records[{index}] from {source} {problem}")
    return trigger


def _record_problem(trigger: str, record: dict[str, Any]) -> str | None:
    if trigger == SNS:
        sns = record.get("Sns")
        if not isinstance(sns, dict):
            return "has no Sns object"
        return None if isinstance(sns.get("MessageId"), str) else "has no Sns.MessageId string"
    for key, kind in _RECORD_NEEDS[trigger]:
        if not isinstance(record.get(key), kind):
            return f"has no {key} {'string' if kind is str else 'object'}"
    return None


def _reject_other_sources(event: dict[str, Any]) -> None:
    source = event.get("eventSource")
    if source in _KAFKA_SOURCES or (isinstance(event.get("records"), dict) and "bootstrapServers" in event):
        raise _unsupported(f"Kafka records from {_name(source) if source is not None else 'a Kafka cluster'}")
    if source in _MQ_SOURCES:
        raise _unsupported(f"Amazon MQ messages from {source}")
    if isinstance(source, str) and source.startswith("aws:"):
        raise _unsupported(f"an event from {_name(source)} without Records")


def items(trigger: str, event: Any) -> list[Any]:
    """The items of an ``event`` that ``classify`` took as ``trigger``, each processed on its own: its ``Records``
    for a trigger of ``RECORD_TRIGGERS`` (SQS, SNS, S3), else ``[event]`` (an EventBridge event, a direct
    invocation)."""
    return list(event["Records"]) if trigger in RECORD_TRIGGERS else [event]


def delivery_id(trigger: str, item: Any) -> Any:
    """The delivery's own id in one ``item`` of a ``trigger`` (``items``), as the item holds it (what the logs name
    ``message_id``): an SNS record's ``Sns.MessageId``, an EventBridge event's ``id``; ``None`` when the item lacks it
    and for the other triggers (an S3 record, a direct invocation; an SQS record's ``messageId`` is the batch
    path's)."""
    path = _DELIVERY_IDS.get(trigger)
    if path is None:
        return None
    value = item
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return value


# --- documents and envelopes ------------------------------------------------------------------------------------------
def check_envelope(value: Any) -> str | None:
    """``value`` when it is one of ``ENVELOPES``.

    :raises ValueError: any other value.
    """
    if value is None:
        return None
    if isinstance(value, str) and value in ENVELOPES:
        return str(value)
    raise ValueError(f"envelope must be one of None, 'sns', 'eventbridge', 's3', 'auto', but {show(value)} was given")


def document_for(trigger: str, item: Any, envelope: str | None = None) -> Any:
    """The document of one ``item`` of a ``trigger`` (a record of an SQS, SNS or S3 event; the whole event of an
    EventBridge or direct one): an SQS record's body parsed as strict JSON (an object), an SNS record's ``Sns``
    when ``envelope`` is ``"sns"`` or ``"auto"`` (else the record), anything else the item itself. ``item`` comes
    from an event ``classify`` accepted (an SQS record has a ``body``, an SNS record an ``Sns``).

    :raises InvalidRecord: an SQS body that is not a strict-JSON object.
    :raises ValueError: ``trigger`` is not one of ``TRIGGERS`` or ``envelope`` not one of ``ENVELOPES``.
    """
    check_envelope(envelope)
    if trigger == SQS:
        return parse_object(item["body"])
    if trigger == SNS:
        return item["Sns"] if envelope in (SNS, S3, AUTO) else item
    if trigger in TRIGGERS:
        return item
    raise ValueError(f"trigger must be one of {', '.join(TRIGGERS)}, but {show(trigger)} was given")


def unwrap(document: Any, envelope: str | None) -> Any:
    """The payload inside ``document`` (see the module's table): ``document`` itself for ``None``; an SNS
    notification's ``Message`` parsed as strict JSON for ``"sns"``; an EventBridge event's ``detail`` for
    ``"eventbridge"``; whichever of the two ``document`` is for ``"auto"``, else ``document``.

    :raises InvalidRecord: ``"sns"``/``"eventbridge"`` and ``document`` is no such envelope, or its payload is not a
        (strict-JSON) object.
    :raises ValueError: ``envelope`` is not one of ``ENVELOPES``.
    """
    envelope = check_envelope(envelope)
    if envelope == AUTO:
        envelope = SNS if is_sns_notification(document) else EVENTBRIDGE if is_eventbridge_event(document) else None
    if envelope == SNS:
        return _sns_message(document)
    if envelope == EVENTBRIDGE:
        return _eventbridge_detail(document)
    if envelope == S3:
        return _s3_record(document)
    return document


def _sns_message(document: Any) -> dict[str, Any]:
    problem = _sns_problem(document)
    if problem is not None:
        raise InvalidRecord(
            "expected an SNS notification envelope (Type 'Notification', MessageId, TopicArn and Message strings; "
            f"the SQS body of an SNS subscription with raw delivery off), but {problem}"
        )
    try:
        return parse_object(document["Message"])
    except InvalidRecord as error:
        raise InvalidRecord(f"the SNS notification's Message is not a strict-JSON object: {error}") from error


def _eventbridge_detail(document: Any) -> dict[str, Any]:
    problem = _eventbridge_problem(document)
    if problem is not None:
        raise InvalidRecord(
            "expected an EventBridge event (detail-type and source strings, and detail; the SQS body of an "
            f"EventBridge rule's SQS target), but {problem}"
        )
    detail = document["detail"]
    if not isinstance(detail, dict):
        raise InvalidRecord(f"the EventBridge event's detail must be a JSON object, got {type(detail).__name__}")
    return detail


def payload(trigger: str, item: Any, envelope: str | None = None) -> dict[str, Any]:
    """What the key, the validation and the record function run over: ``unwrap(document_for(trigger, item, envelope),
    envelope)``, which must be a JSON object.

    :raises InvalidRecord: the document or the envelope is bad (``document_for``, ``unwrap``), or the payload is not an
        object (a direct invocation with a list, a string...).
    :raises ValueError: ``trigger`` or ``envelope`` is unknown.
    """
    return _object(unwrap(document_for(trigger, item, envelope), envelope))


def _object(data: Any) -> dict[str, Any]:
    """:raises InvalidRecord: ``data`` (a payload) is not a JSON object."""
    if not isinstance(data, dict):
        raise InvalidRecord(f"body must be a JSON object, got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class Delivered:
    """What one delivered item holds (``payloads``): its payloads, in order, or the ``s3:TestEvent`` it is."""

    payloads: list[dict[str, Any]]
    test_event: dict[str, Any] | None = None


def payloads(trigger: str, item: Any, envelope: str | None = None) -> Delivered:
    """The payloads of one delivered item: ``[payload(trigger, item, envelope)]``, except for an S3 event
    notification carried by a queue or a topic under ``"s3"`` or ``"auto"``, whose S3 records are each a payload (in
    order), and its ``s3:TestEvent``, which has none (``test_event`` is the message).

    :raises InvalidRecord: as ``payload``; under ``"s3"``, a document that is no S3 event notification.
    :raises ValueError: ``trigger`` or ``envelope`` is unknown.
    """
    envelope = check_envelope(envelope)
    document = document_for(trigger, item, envelope)  # an SQS body is parsed here, once
    if envelope in (S3, AUTO) and trigger != S3:
        sns = is_sns_notification(document)
        inner = _sns_message(document) if sns else document
        if is_s3_test_event(inner):
            return Delivered([], test_event=inner)
        problem = _s3_notification_problem(inner)
        if problem is None:
            return Delivered(list(inner["Records"]))
        if envelope == S3:
            raise InvalidRecord(
                "expected an S3 event notification (Records of aws:s3 records, or s3:TestEvent: what S3 sends to an "
                f"SQS queue or an SNS topic), but {problem}"
            )
        if sns:  # "auto" unwraps the SNS notification: its Message, parsed above (an object)
            return Delivered([inner])
    return Delivered([_object(unwrap(document, envelope))])


def is_s3_test_event(document: Any) -> bool:
    """Whether ``document`` is the ``s3:TestEvent`` message (``Event`` ``S3_TEST_EVENT``, no ``Records``)."""
    return isinstance(document, dict) and document.get("Event") == S3_TEST_EVENT and "Records" not in document


def _s3_notification_problem(document: Any) -> str | None:
    if not isinstance(document, dict):
        return f"got {show(document)}"
    records = document.get("Records")
    if not isinstance(records, list) or not records:
        return "it has no Records" if "Records" not in document else f"Records is {show(records)}"
    for record in records:
        if not (
            isinstance(record, dict) and record.get("eventSource") == "aws:s3" and isinstance(record.get("s3"), dict)
        ):
            return f"a record is not an aws:s3 record with an s3 object: {show(record)}"
    return None


def _s3_record(document: Any) -> Any:
    """An S3 record as itself; a notification of exactly one S3 record as that record."""
    if isinstance(document, dict) and isinstance(document.get("s3"), dict):
        return document
    if _s3_notification_problem(document) is None and len(document["Records"]) == 1:
        return document["Records"][0]
    raise InvalidRecord(f"expected one S3 record, got {show(document)}")


# --- key expressions --------------------------------------------------------------------------------------------------
#: Powertools' JMESPath functions (``powertools_json``, ``powertools_base64``, ``powertools_base64_gzip``) on top of
#: the builtins: what ``IdempotencyConfig`` searches with when its ``jmespath_options`` is unset, so the key found
#: here is the key Powertools hashes.
FUNCTIONS = PowertoolsFunctions()
#: The options every ``search`` uses.
OPTIONS = jmespath.Options(custom_functions=FUNCTIONS)
_BUILTINS = frozenset(jmespath_functions.Functions.FUNCTION_TABLE)
_KNOWN = frozenset(FUNCTIONS.FUNCTION_TABLE)


class Expression:
    """A JMESPath expression compiled by ``compile_expression``: ``expression`` (its text), ``parsed`` (jmespath's
    ``ParsedResult``) and ``search``."""

    def __init__(self, expression: str, parsed: Any) -> None:
        self.expression = expression
        self.parsed = parsed

    def search(self, data: Any) -> Any:
        """The expression searched over ``data`` with Powertools' functions (``OPTIONS``).

        :raises InvalidRecord: the search failed on this data (a jmespath type error such as ``length(5)``,
            ``powertools_json`` of text that is not JSON, bad base64 or gzip...): the same record fails the same way
            every time, so it is permanent. The message names the expression and the error, cut short.
        """
        try:
            return self.parsed.search(data, options=OPTIONS)
        except Exception as exc:  # any failure of a pure function of (expression, record) is the record's
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())
            if len(reason) > SHOWN_CHARS * 3:
                reason = f"{reason[: SHOWN_CHARS * 3]}..."
            raise InvalidRecord(f"JMESPath {self.expression!r} failed on the record: {reason}") from exc

    def __repr__(self) -> str:
        return f"Expression({self.expression!r})"


class InvalidExpression(ValueError):
    """``compile_expression`` refused an expression. ``reason``: why, in one line and without the expression (the
    message is ``<prop> must be a JMESPath expression..., but <expression> was given: <reason>``), for a caller that
    names the expression its own way (the chaos command's ``--key``)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def compile_expression(prop: str, expression: str) -> Expression:
    """``expression`` compiled, every function it calls checked now: jmespath reports an unknown one only when a
    record is searched.

    :param prop: the name the messages give it (``"key"``, ``"validate"``).
    :raises InvalidExpression: (a ``ValueError``) not a string, not a JMESPath expression (the reason in one line:
        what jmespath found and where), or calling a function that is neither a JMESPath builtin nor one of
        Powertools'.
    """
    if not isinstance(expression, str):
        raise InvalidExpression(
            f"{prop} must be a JMESPath expression (a string), but {show(expression)} was given", "not a string"
        )
    try:
        parsed = jmespath.compile(expression)
    except jmespath_exceptions.JMESPathError as exc:
        reason = _parse_error(exc)
        message = f"{prop} must be a JMESPath expression, but {expression!r} was given: {reason}"
        raise InvalidExpression(message, reason) from exc
    unknown = sorted(_called_functions(parsed.parsed) - _KNOWN)
    if unknown:
        reason = (
            f"unknown function {', '.join(f'{name}()' for name in unknown)} (builtins: {', '.join(sorted(_BUILTINS))}; "
            f"Powertools: {', '.join(sorted(_KNOWN - _BUILTINS))})"
        )
        raise InvalidExpression(
            f"{prop} must be a JMESPath expression with known functions, but {expression!r} was given: {reason}", reason
        )
    return Expression(expression, parsed)


def _parse_error(exc: jmespath_exceptions.JMESPathError) -> str:
    """jmespath's refusal in one line, without its repeated "Invalid jmespath expression" and the expression drawn
    over two more lines: what it found, at which character (1-based)."""
    if isinstance(exc, jmespath_exceptions.EmptyExpressionError):
        return "it is empty"
    if isinstance(exc, jmespath_exceptions.IncompleteExpressionError):
        return f"it ends early, after character {exc.lex_position}"
    if isinstance(exc, jmespath_exceptions.LexerError):
        return f"{exc.message}, at character {exc.lexer_position + 1}"
    if isinstance(exc, jmespath_exceptions.ArityError):  # its own message is one line and names the function
        return str(exc)
    if isinstance(exc, jmespath_exceptions.ParseError):
        found = "the end" if exc.token_type == "EOF" else repr(exc.token_value)
        plain = exc.msg == jmespath_exceptions.ParseError._ERROR_MESSAGE or exc.msg.startswith("Unexpected token")
        detail = "" if plain else f" ({exc.msg})"
        return f"unexpected {found} at character {exc.lex_position + 1}{detail}"
    return " ".join(str(exc).split())


def _called_functions(tree: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if node.get("type") == "function_expression":
            names.add(node["value"])
        stack.extend(child for child in node.get("children", ()) if isinstance(child, dict))
    return names


def search(expression: Expression, data: Any) -> Any:
    """``expression.search(data)``.

    :raises InvalidRecord: the search failed on this data (``Expression.search``).
    """
    return expression.search(data)
