"""``events``: which trigger an event is, the document and payload of each record under each envelope, and key
JMESPaths with Powertools' functions. Every event is shaped as AWS delivers it (the Lambda Developer Guide's sample
events; the SNS envelope as measured on moto and AWS)."""

from __future__ import annotations

import base64
import copy
import gzip
import json
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig

import effectively_once_runtime
from effectively_once_runtime import events
from effectively_once_runtime.errors import InvalidRecord, PermanentError, UnsupportedEvent

REGION = "us-east-1"
ACCOUNT = "123456789012"
TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT}:payments"
TAKES = (
    "; this handler takes SQS (standard or FIFO), SNS and S3 notification records, EventBridge events and direct "
    "invocations"
)
PAYMENT = {"payment_id": "pay-1", "account_id": "acct-1", "amount": 1000, "currency": "EUR"}
PAYMENT_TEXT = json.dumps(PAYMENT)


# --- events as AWS delivers them ------------------------------------------------------------------------------------
def sqs_record(body: str, *, fifo: bool = False) -> dict[str, Any]:
    attributes = {
        "ApproximateReceiveCount": "1",
        "SentTimestamp": "1545082649183",
        "SenderId": "AIDAIENQZJOLO23YVJ4VO",
        "ApproximateFirstReceiveTimestamp": "1545082649185",
    }
    if fifo:
        attributes |= {
            "SequenceNumber": "18849496460467696128",
            "MessageGroupId": "acct-1",
            "MessageDeduplicationId": "pay-1",
        }
    return {
        "messageId": "059f36b4-87a3-44ab-83d2-661975830a7d",
        "receiptHandle": "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a...",
        "body": body,
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": "e4e68fb7bd0e697a0ae8f1bb342846b3",
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:{ACCOUNT}:payments{'.fifo' if fifo else ''}",
        "awsRegion": REGION,
    }


def sns_envelope(message: str = PAYMENT_TEXT, **extra: Any) -> dict[str, Any]:
    """The SQS body of a message from an SNS subscription with raw delivery off."""
    return {
        "Type": "Notification",
        "MessageId": "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
        "TopicArn": TOPIC_ARN,
        "Message": message,
        "Timestamp": "2026-12-01T10:00:00.123Z",
        "SignatureVersion": "1",
        "Signature": "EXAMPLEpH+..",
        "SigningCertURL": f"https://sns.{REGION}.amazonaws.com/SimpleNotificationService-0000000000000000000000.pem",
        "UnsubscribeURL": f"https://sns.{REGION}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={TOPIC_ARN}:1",
        **extra,
    }


def sns_record(message: str = PAYMENT_TEXT) -> dict[str, Any]:
    """A record of an SNS trigger (``EventSource``, capital E; ``...Url`` where the SQS body says ``...URL``)."""
    return {
        "EventVersion": "1.0",
        "EventSubscriptionArn": f"{TOPIC_ARN}:21be56ed-a058-49f5-8c98-aedd2564c486",
        "EventSource": "aws:sns",
        "Sns": {
            "SignatureVersion": "1",
            "Timestamp": "2026-12-01T10:00:00.123Z",
            "Signature": "tcc6faL2yUC6dgZdmrwh1Y4cGa/ebXEkAi6RibDsvpi+tE/1+82j...65r==",
            "SigningCertUrl": f"https://sns.{REGION}.amazonaws.com/SimpleNotificationService-0000000000.pem",
            "MessageId": "95df01b4-ee98-5cb9-9903-4c221d41eb5e",
            "Message": message,
            "MessageAttributes": {"Test": {"Type": "String", "Value": "TestString"}},
            "Type": "Notification",
            "UnsubscribeUrl": f"https://sns.{REGION}.amazonaws.com/?Action=Unsubscribe&SubscriptionArn={TOPIC_ARN}",
            "TopicArn": TOPIC_ARN,
            "Subject": "TestInvoke",
        },
    }


def s3_record() -> dict[str, Any]:
    """A record of an S3 ``ObjectCreated:Put`` notification in a versioned bucket."""
    return {
        "eventVersion": "2.1",
        "eventSource": "aws:s3",
        "awsRegion": REGION,
        "eventTime": "2019-09-03T19:37:27.192Z",
        "eventName": "ObjectCreated:Put",
        "userIdentity": {"principalId": "AWS:AIDAINPONIXQXHT3IKHL2"},
        "requestParameters": {"sourceIPAddress": "205.255.255.255"},
        "responseElements": {"x-amz-request-id": "D82B88E5F771F645", "x-amz-id-2": "vlR7PnpV2Ce81l0PRw6jlUpck7Jo5Z="},
        "s3": {
            "s3SchemaVersion": "1.0",
            "configurationId": "828aa6fc-f7b5-4305-8584-487c791949c1",
            "bucket": {
                "name": "payments-inbox",
                "ownerIdentity": {"principalId": "A3I5XTEXAMAI3E"},
                "arn": "arn:aws:s3:::payments-inbox",
            },
            "object": {
                "key": "batches/2026-12-01+run.json",
                "size": 1305107,
                "eTag": "b21b84d653bb07b05b1e6b33684dc11b",
                "versionId": "096fKKXTRTtl3on89fVO.nfljtsv6qko",
                "sequencer": "0C0F6F405D6ED209E1",
            },
        },
    }


def eventbridge_event(detail: Any = None) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "Payment Requested",
        "source": "com.example.payments",
        "account": ACCOUNT,
        "time": "2026-12-01T10:00:00Z",
        "region": REGION,
        "resources": [],
        "detail": PAYMENT if detail is None else detail,
    }


def records(*items: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(items)}


KINESIS_RECORD = {
    "kinesis": {
        "kinesisSchemaVersion": "1.0",
        "partitionKey": "1",
        "sequenceNumber": "49590338271490256608559692538361571095921575989136588898",
        "data": "SGVsbG8sIHRoaXMgaXMgYSB0ZXN0Lg==",
        "approximateArrivalTimestamp": 1545084650.987,
    },
    "eventSource": "aws:kinesis",
    "eventVersion": "1.0",
    "eventID": "shardId-000000000006:49590338271490256608559692538361571095921575989136588898",
    "eventName": "aws:kinesis:record",
    "invokeIdentityArn": f"arn:aws:iam::{ACCOUNT}:role/lambda-role",
    "awsRegion": REGION,
    "eventSourceARN": f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/lambda-stream",
}
DYNAMODB_RECORD = {
    "eventID": "1",
    "eventVersion": "1.0",
    "dynamodb": {"Keys": {"Id": {"N": "101"}}, "SequenceNumber": "111", "StreamViewType": "NEW_AND_OLD_IMAGES"},
    "awsRegion": REGION,
    "eventName": "INSERT",
    "eventSourceARN": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/ExampleTableWithStream/stream/2015-06-27T00:48:05",
    "eventSource": "aws:dynamodb",
}
KAFKA_RECORDS = {
    "mytopic-0": [
        {
            "topic": "mytopic",
            "partition": 0,
            "offset": 15,
            "timestamp": 1545084650987,
            "timestampType": "CREATE_TIME",
            "key": "cmVjb3JkS2V5",
            "value": "eyJrZXkiOiJ2YWx1ZSJ9",
            "headers": [{"headerKey": [104, 101, 97, 100, 101, 114, 86, 97, 108, 117, 101]}],
        }
    ]
}
BOOTSTRAP = "b-2.demo-cluster-1.a1bcde.c1.kafka.us-east-1.amazonaws.com:9092"
MSK_EVENT = {
    "eventSource": "aws:kafka",
    "eventSourceArn": f"arn:aws:kafka:{REGION}:{ACCOUNT}:cluster/SalesCluster/abcd1234-abcd-cafe-abab-9876543210ab-4",
    "bootstrapServers": BOOTSTRAP,
    "records": KAFKA_RECORDS,
}
ACTIVE_MQ_MESSAGES = [
    {
        "messageID": "ID:b-9bcfa592-423a-4942-879d-eb284b418fc8-1.mq.us-east-2.amazonaws.com-37557-12345-4:1:1:1:1",
        "messageType": "jms/text-message",
        "deliveryMode": 1,
        "replyTo": None,
        "type": None,
        "expiration": "60000",
        "priority": 1,
        "correlationId": "myJMSCoID",
        "redelivered": False,
        "destination": {"physicalName": "testQueue"},
        "data": "QUJDOkFBQUE=",
        "timestamp": 1598827811958,
        "brokerInTime": 1598827811958,
        "brokerOutTime": 1598827811959,
        "properties": {"index": "1"},
    }
]
MQ_ARN = f"arn:aws:mq:{REGION}:{ACCOUNT}:broker:test:b-9bcfa592-423a-4942-879d-eb284b418fc8"
RABBIT_MQ_EVENT = {
    "eventSource": "aws:rmq",
    "eventSourceArn": MQ_ARN,
    "rmqMessagesByQueue": {
        "pizzaQueue::/": [{"basicProperties": {"contentType": "text/plain"}, "redelivered": False, "data": "eyJ9"}]
    },
}


def fails_with(message: str, event: Any) -> None:
    with pytest.raises(UnsupportedEvent) as caught:
        events.classify(event)
    assert str(caught.value) == message


# --- classify ---------------------------------------------------------------------------------------------------------
def test_classifies_a_standard_sqs_batch_as_sqs() -> None:
    assert events.classify(records(sqs_record(PAYMENT_TEXT), sqs_record("{}"))) == events.SQS


def test_classifies_a_fifo_sqs_batch_as_sqs() -> None:
    assert events.classify(records(sqs_record(PAYMENT_TEXT, fifo=True))) == events.SQS


def test_classifies_an_sns_record_as_sns() -> None:
    assert events.classify(records(sns_record())) == events.SNS


def test_classifies_an_s3_put_notification_as_s3() -> None:
    assert events.classify(records(s3_record())) == events.S3


def test_classifies_an_eventbridge_event_as_eventbridge() -> None:
    assert events.classify(eventbridge_event()) == events.EVENTBRIDGE


@pytest.mark.parametrize(
    "event",
    [PAYMENT, {}, [PAYMENT], "pay-1", 7, None, True, {"detail": {}, "source": "shop"}, {"records": {"a": []}}],
    ids=["payment", "empty object", "list", "string", "number", "null", "boolean", "no detail-type", "records map"],
)
def test_classifies_anything_else_as_direct(event: Any) -> None:
    assert events.classify(event) == events.DIRECT


def test_triggers_are_every_value_classify_returns() -> None:
    assert events.TRIGGERS == ("sqs", "sns", "s3", "eventbridge", "direct")


# --- items and delivery ids ------------------------------------------------------------------------------------------
def test_record_triggers_are_sqs_sns_and_s3() -> None:
    assert events.RECORD_TRIGGERS == (events.SQS, events.SNS, events.S3)


@pytest.mark.parametrize(
    ("event", "trigger"),
    [
        (records(sqs_record(PAYMENT_TEXT), sqs_record("{}")), events.SQS),
        (records(sns_record(), sns_record("{}")), events.SNS),
        (records(s3_record()), events.S3),
    ],
    ids=["sqs", "sns", "s3"],
)
def test_items_of_records_are_the_records(event: dict[str, Any], trigger: str) -> None:
    assert events.items(events.classify(event), event) == event["Records"]
    assert events.classify(event) == trigger


@pytest.mark.parametrize("event", [eventbridge_event(), PAYMENT], ids=["eventbridge", "direct"])
def test_items_of_a_whole_event_is_the_event(event: dict[str, Any]) -> None:
    assert events.items(events.classify(event), event) == [event]


@pytest.mark.parametrize(
    ("trigger", "item", "expected"),
    [
        (events.SNS, sns_record(), sns_record()["Sns"]["MessageId"]),
        (events.EVENTBRIDGE, eventbridge_event(), "6a7e8feb-b491-4cf7-a9f1-bf3703467718"),
        (events.EVENTBRIDGE, {k: v for k, v in eventbridge_event().items() if k != "id"}, None),
        (events.EVENTBRIDGE, eventbridge_event() | {"id": 7}, 7),
        (events.S3, s3_record(), None),
        (events.DIRECT, PAYMENT | {"id": "pay-1"}, None),
        (events.SQS, sqs_record(PAYMENT_TEXT), None),
    ],
    ids=["sns", "eventbridge", "eventbridge-without-id", "eventbridge-id-as-is", "s3", "direct", "sqs-is-the-batch's"],
)
def test_delivery_id_is_the_items_own_id_as_it_holds_it(trigger: str, item: dict[str, Any], expected: Any) -> None:
    assert events.delivery_id(trigger, item) == expected


@pytest.mark.parametrize(
    ("record", "source"), [(KINESIS_RECORD, "aws:kinesis"), (DYNAMODB_RECORD, "aws:dynamodb")], ids=["kinesis", "ddb"]
)
def test_fails_stream_records(record: dict[str, Any], source: str) -> None:
    fails_with(f"unsupported event: Records from {source}{TAKES}", records(record))


@pytest.mark.parametrize("source", ["aws:kafka", "SelfManagedKafka", "aws:SelfManagedKafka"])
def test_fails_kafka_event(source: str) -> None:
    fails_with(f"unsupported event: Kafka records from {source}{TAKES}", {**MSK_EVENT, "eventSource": source})


def test_fails_kafka_records_map_without_event_source() -> None:
    event = {"bootstrapServers": BOOTSTRAP, "records": KAFKA_RECORDS}
    fails_with(f"unsupported event: Kafka records from a Kafka cluster{TAKES}", event)


@pytest.mark.parametrize("source", ["aws:mq", "aws:amq"])
def test_fails_active_mq_event(source: str) -> None:
    event = {"eventSource": source, "eventSourceArn": MQ_ARN, "messages": ACTIVE_MQ_MESSAGES}
    fails_with(f"unsupported event: Amazon MQ messages from {source}{TAKES}", event)


def test_fails_rabbit_mq_event() -> None:
    fails_with(f"unsupported event: Amazon MQ messages from aws:rmq{TAKES}", RABBIT_MQ_EVENT)


def test_fails_other_aws_event_source_without_records() -> None:
    event = {"eventSource": "aws:docdb", "events": [{"event": {"_id": {"_data": "0163eeb6e7000000"}}}]}
    fails_with(f"unsupported event: an event from aws:docdb without Records{TAKES}", event)


def test_fails_empty_records() -> None:
    fails_with(f"unsupported event: Records is empty{TAKES}", {"Records": []})


def test_fails_records_not_a_list() -> None:
    fails_with(f"unsupported event: Records is a JSON object, not a list{TAKES}", {"Records": sqs_record("{}")})


def test_fails_record_not_an_object() -> None:
    fails_with(f"unsupported event: Records[1] is 'x', not an object{TAKES}", {"Records": [sqs_record("{}"), "x"]})


def test_fails_records_of_mixed_sources() -> None:
    event = records(sqs_record("{}"), sns_record(), sqs_record("{}"))
    fails_with(f"unsupported event: Records of mixed sources (aws:sns, aws:sqs){TAKES}", event)


def test_fails_records_without_event_source() -> None:
    fails_with(f"unsupported event: Records without eventSource{TAKES}", records({"body": "{}"}))


@pytest.mark.parametrize(("key", "kind"), [("messageId", "string"), ("body", "string")])
def test_fails_sqs_record_without(key: str, kind: str) -> None:
    record = sqs_record("{}")
    del record[key]
    event = records(sqs_record("{}"), record)
    fails_with(f"unsupported event: Records[1] from aws:sqs has no {key} {kind}{TAKES}", event)


def test_fails_sqs_record_with_a_body_that_is_not_a_string() -> None:
    event = records({**sqs_record("{}"), "body": PAYMENT})
    fails_with(f"unsupported event: Records[0] from aws:sqs has no body string{TAKES}", event)


def test_fails_sns_record_without_sns() -> None:
    record = sns_record()
    del record["Sns"]
    fails_with(f"unsupported event: Records[0] from aws:sns has no Sns object{TAKES}", records(record))


def test_fails_sns_record_without_message_id() -> None:
    record = sns_record()
    del record["Sns"]["MessageId"]
    fails_with(f"unsupported event: Records[0] from aws:sns has no Sns.MessageId string{TAKES}", records(record))


def test_fails_s3_record_without_s3() -> None:
    record = s3_record()
    del record["s3"]
    fails_with(f"unsupported event: Records[0] from aws:s3 has no s3 object{TAKES}", records(record))


def test_unsupported_event_names_a_long_or_multiline_source_cut_short_on_one_line() -> None:
    source = "aws:" + "k" * 100_000 + "\n"
    with pytest.raises(UnsupportedEvent) as caught:
        events.classify(records({**KINESIS_RECORD, "eventSource": source}))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("unsupported event: Records from 'aws:kkkk")
    assert message.endswith(f"... ({len(repr(source))} characters){TAKES}")
    assert len(message) < 300


def test_unsupported_event_is_a_value_error_exported_from_the_package() -> None:
    assert issubclass(UnsupportedEvent, ValueError)
    assert not issubclass(UnsupportedEvent, PermanentError)
    assert effectively_once_runtime.UnsupportedEvent is UnsupportedEvent
    assert "UnsupportedEvent" in effectively_once_runtime.__all__


# --- envelopes --------------------------------------------------------------------------------------------------------
def test_envelopes_are_none_sns_eventbridge_s3_and_auto() -> None:
    assert events.ENVELOPES == (None, "sns", "eventbridge", "s3", "auto")


@pytest.mark.parametrize("envelope", events.ENVELOPES)
def test_check_envelope_returns_each_envelope(envelope: str | None) -> None:
    assert events.check_envelope(envelope) == envelope


@pytest.mark.parametrize(("value", "shown"), [("x", "'x'"), ("SNS", "'SNS'"), (["sns"], "a JSON array"), (1, "1")])
def test_fails_check_envelope_with_another_value(value: Any, shown: str) -> None:
    with pytest.raises(ValueError) as caught:
        events.check_envelope(value)
    allowed = "None, 'sns', 'eventbridge', 's3', 'auto'"
    assert str(caught.value) == f"envelope must be one of {allowed}, but {shown} was given"


def test_unwrap_without_envelope_returns_the_document() -> None:
    document = sns_envelope()
    assert events.unwrap(document, None) is document


def test_unwrap_sns_parses_the_message_of_an_sns_to_sqs_body() -> None:
    assert events.unwrap(sns_envelope(), "sns") == PAYMENT


def test_unwrap_sns_parses_the_message_of_an_envelope_with_subject_and_attributes() -> None:
    document = sns_envelope(Subject="payment", MessageAttributes={"tenant": {"Type": "String", "Value": "t1"}})
    assert events.unwrap(document, "sns") == PAYMENT


def test_unwrap_sns_parses_the_message_of_a_fifo_topic_envelope() -> None:
    assert events.unwrap(sns_envelope(SequenceNumber="10000000000000003000"), "sns") == PAYMENT


def test_unwrap_sns_parses_the_message_of_a_direct_sns_record() -> None:
    assert events.unwrap(sns_record()["Sns"], "sns") == PAYMENT


SNS_EXPECTED = (
    "expected an SNS notification envelope (Type 'Notification', MessageId, TopicArn and Message strings; the SQS "
    "body of an SNS subscription with raw delivery off), but "
)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (PAYMENT, "it has no Type"),
        ([PAYMENT], "got a JSON array"),
        ("text", "got 'text'"),
        (sns_envelope(Type="SubscriptionConfirmation"), "Type is 'SubscriptionConfirmation'"),
        ({k: v for k, v in sns_envelope().items() if k != "TopicArn"}, "it has no TopicArn"),
        (sns_envelope(Message=PAYMENT), "Message is a JSON object"),
        (sns_record(), "it has no Type"),
    ],
    ids=["payment", "array", "string", "confirmation", "no TopicArn", "Message not a string", "whole SNS record"],
)
def test_fails_unwrap_sns_of_something_else(document: Any, problem: str) -> None:
    with pytest.raises(InvalidRecord) as caught:
        events.unwrap(document, "sns")
    assert str(caught.value) == SNS_EXPECTED + problem


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("Hello from SNS!", "body is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
        ('{"amount": 1, "amount": 9}', "body has a repeated key 'amount'; a JSON object's names must be unique"),
        ('{"amount": NaN}', "body contains NaN, which is not JSON"),
        ("[1, 2]", "body must be a JSON object, got list"),
    ],
    ids=["text", "repeated key", "NaN", "array"],
)
def test_fails_unwrap_sns_when_the_message_is_not_a_strict_json_object(message: str, reason: str) -> None:
    with pytest.raises(InvalidRecord) as caught:
        events.unwrap(sns_envelope(message), "sns")
    assert str(caught.value) == f"the SNS notification's Message is not a strict-JSON object: {reason}"


def test_unwrap_eventbridge_returns_the_detail() -> None:
    assert events.unwrap(eventbridge_event(), "eventbridge") == PAYMENT


def test_unwrap_eventbridge_returns_an_empty_detail() -> None:
    assert events.unwrap(eventbridge_event({}), "eventbridge") == {}


EVENTBRIDGE_EXPECTED = (
    "expected an EventBridge event (detail-type and source strings, and detail; the SQS body of an EventBridge "
    "rule's SQS target), but "
)


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        (PAYMENT, "it has no detail-type"),
        ({**eventbridge_event(), "source": 7}, "source is 7"),
        ({k: v for k, v in eventbridge_event().items() if k != "detail"}, "it has no detail"),
        (sns_envelope(), "it has no detail-type"),
        (None, "got None"),
    ],
    ids=["payment", "source not a string", "no detail", "SNS envelope", "null"],
)
def test_fails_unwrap_eventbridge_of_something_else(document: Any, problem: str) -> None:
    with pytest.raises(InvalidRecord) as caught:
        events.unwrap(document, "eventbridge")
    assert str(caught.value) == EVENTBRIDGE_EXPECTED + problem


def test_fails_unwrap_eventbridge_when_the_detail_is_not_an_object() -> None:
    with pytest.raises(InvalidRecord) as caught:
        events.unwrap(eventbridge_event([PAYMENT]), "eventbridge")
    assert str(caught.value) == "the EventBridge event's detail must be a JSON object, got list"


def test_unwrap_auto_parses_the_message_of_an_sns_envelope() -> None:
    assert events.unwrap(sns_envelope(), "auto") == PAYMENT


def test_unwrap_auto_returns_the_detail_of_an_eventbridge_event() -> None:
    assert events.unwrap(eventbridge_event(), "auto") == PAYMENT


@pytest.mark.parametrize(
    "document",
    [
        PAYMENT,
        {**PAYMENT, "Type": "Notification", "Message": "{}"},
        {**PAYMENT, "Type": "Notification", "MessageId": "m", "TopicArn": TOPIC_ARN, "Message": {}},
        {**PAYMENT, "detail": {}, "source": "shop"},
        {**PAYMENT, "detail_type": "x", "source": "shop", "detail": {}},
        s3_record(),
        [PAYMENT],
        "pay-1",
    ],
    ids=["payment", "Type but no TopicArn", "Message not a string", "no detail-type", "detail_type", "S3", "list", "s"],
)
def test_unwrap_auto_keeps_anything_else_as_it_is(document: Any) -> None:
    assert events.unwrap(document, "auto") is document


def test_unwrap_auto_of_an_eventbridge_event_inside_an_sns_envelope_unwraps_one_level() -> None:
    assert events.unwrap(sns_envelope(json.dumps(eventbridge_event())), "auto") == eventbridge_event()


def test_fails_unwrap_auto_of_an_sns_envelope_whose_message_is_not_json() -> None:
    with pytest.raises(InvalidRecord, match="^the SNS notification's Message is not a strict-JSON object: body is"):
        events.unwrap(sns_envelope("Hello from SNS!"), "auto")


def test_fails_unwrap_with_another_envelope() -> None:
    with pytest.raises(ValueError, match="^envelope must be one of None, 'sns', 'eventbridge', 's3', 'auto', but 'r"):
        events.unwrap(PAYMENT, "raw")


# --- documents and payloads -------------------------------------------------------------------------------------------
def test_document_for_sqs_is_the_body_parsed_as_strict_json() -> None:
    assert events.document_for(events.SQS, sqs_record(PAYMENT_TEXT)) == PAYMENT


def test_fails_document_for_sqs_with_a_repeated_key_in_the_body() -> None:
    with pytest.raises(InvalidRecord, match="^body has a repeated key 'a'"):
        events.document_for(events.SQS, sqs_record('{"a": 1, "a": 2}'))


@pytest.mark.parametrize("envelope", [None, "eventbridge"])
def test_document_for_sns_is_the_record_without_an_sns_envelope(envelope: str | None) -> None:
    record = sns_record()
    assert events.document_for(events.SNS, record, envelope) is record


@pytest.mark.parametrize("envelope", ["sns", "auto"])
def test_document_for_sns_is_the_sns_object_with_an_sns_envelope(envelope: str) -> None:
    record = sns_record()
    assert events.document_for(events.SNS, record, envelope) is record["Sns"]


@pytest.mark.parametrize("trigger", [events.S3, events.EVENTBRIDGE, events.DIRECT])
@pytest.mark.parametrize("envelope", events.ENVELOPES)
def test_document_for_s3_eventbridge_and_direct_is_the_item(trigger: str, envelope: str | None) -> None:
    item = {events.S3: s3_record(), events.EVENTBRIDGE: eventbridge_event(), events.DIRECT: PAYMENT}[trigger]
    assert events.document_for(trigger, item, envelope) is item


def test_fails_document_for_another_trigger() -> None:
    with pytest.raises(ValueError) as caught:
        events.document_for("kinesis", KINESIS_RECORD)
    assert str(caught.value) == "trigger must be one of sqs, sns, s3, eventbridge, direct, but 'kinesis' was given"


S3_RECORD = s3_record()
SNS_RECORD = sns_record()
EVENT = eventbridge_event()
#: The module docstring's table, cell by cell: (trigger, item, envelope) -> the payload.
TABLE = [
    (events.SQS, sqs_record(PAYMENT_TEXT), None, PAYMENT),
    (events.SQS, sqs_record(json.dumps(sns_envelope())), None, sns_envelope()),
    (events.SQS, sqs_record(json.dumps(sns_envelope())), "sns", PAYMENT),
    (events.SQS, sqs_record(json.dumps(sns_envelope()), fifo=True), "sns", PAYMENT),
    (events.SQS, sqs_record(json.dumps(EVENT)), "eventbridge", PAYMENT),
    (events.SQS, sqs_record(json.dumps(sns_envelope())), "auto", PAYMENT),
    (events.SQS, sqs_record(json.dumps(EVENT)), "auto", PAYMENT),
    (events.SQS, sqs_record(PAYMENT_TEXT), "auto", PAYMENT),
    (events.SNS, SNS_RECORD, None, SNS_RECORD),
    (events.SNS, SNS_RECORD, "sns", PAYMENT),
    (events.SNS, SNS_RECORD, "auto", PAYMENT),
    (events.S3, S3_RECORD, None, S3_RECORD),
    (events.S3, S3_RECORD, "auto", S3_RECORD),
    (events.EVENTBRIDGE, EVENT, None, EVENT),
    (events.EVENTBRIDGE, EVENT, "eventbridge", PAYMENT),
    (events.EVENTBRIDGE, EVENT, "auto", PAYMENT),
    (events.DIRECT, PAYMENT, None, PAYMENT),
    (events.DIRECT, sns_envelope(), "sns", PAYMENT),
    (events.DIRECT, EVENT, "eventbridge", PAYMENT),
    (events.DIRECT, PAYMENT, "auto", PAYMENT),
]
#: The table's ``InvalidRecord`` cells, and the envelopes a trigger's document is not.
TABLE_FAILS = [
    (events.SQS, sqs_record(PAYMENT_TEXT), "sns", "^expected an SNS notification envelope"),
    (events.SQS, sqs_record(PAYMENT_TEXT), "eventbridge", "^expected an EventBridge event"),
    (events.SQS, sqs_record("[1]"), None, "^body must be a JSON object, got list"),
    (events.SNS, SNS_RECORD, "eventbridge", "^expected an EventBridge event"),
    (events.SNS, sns_record("Hello from SNS!"), "sns", "^the SNS notification's Message is not a strict-JSON"),
    (events.S3, S3_RECORD, "sns", "^expected an SNS notification envelope"),
    (events.S3, S3_RECORD, "eventbridge", "^expected an EventBridge event"),
    (events.EVENTBRIDGE, EVENT, "sns", "^expected an SNS notification envelope"),
    (events.DIRECT, PAYMENT, "sns", "^expected an SNS notification envelope"),
    (events.DIRECT, PAYMENT, "eventbridge", "^expected an EventBridge event"),
    (events.DIRECT, [PAYMENT], None, "^body must be a JSON object, got list"),
    (events.DIRECT, "pay-1", "auto", "^body must be a JSON object, got str"),
]


@pytest.mark.parametrize(("trigger", "item", "envelope", "expected"), TABLE)
def test_payload_follows_the_table(trigger: str, item: Any, envelope: str | None, expected: Any) -> None:
    before = copy.deepcopy(item)
    assert events.payload(trigger, item, envelope) == expected
    assert item == before


@pytest.mark.parametrize(("trigger", "item", "envelope", "error"), TABLE_FAILS)
def test_fails_payload_where_the_table_says_invalid_record(
    trigger: str, item: Any, envelope: str | None, error: str
) -> None:
    with pytest.raises(InvalidRecord, match=error):
        events.payload(trigger, item, envelope)


def test_s3_payload_has_the_object_key_version_and_sequencer() -> None:
    data = events.payload(events.S3, s3_record())
    found = events.compile_expression("key", "[s3.object.key, s3.object.versionId, s3.object.sequencer]").search(data)
    assert found == ["batches/2026-12-01+run.json", "096fKKXTRTtl3on89fVO.nfljtsv6qko", "0C0F6F405D6ED209E1"]


# --- key expressions --------------------------------------------------------------------------------------------------
def test_compile_expression_searches_the_data() -> None:
    assert events.compile_expression("key", "payment_id").search(PAYMENT) == "pay-1"


def test_search_is_the_expression_search() -> None:
    assert events.search(events.compile_expression("key", "[payment_id, amount]"), PAYMENT) == ["pay-1", 1000]


def test_expression_keeps_its_text() -> None:
    assert events.compile_expression("key", "payment_id").expression == "payment_id"


def test_expression_with_powertools_json_reads_the_sns_message() -> None:
    expression = events.compile_expression("key", "powertools_json(Message).payment_id")
    assert expression.search(sns_envelope()) == "pay-1"


def test_expression_with_powertools_base64_decodes() -> None:
    data = {"data": base64.b64encode(PAYMENT_TEXT.encode()).decode()}
    expression = events.compile_expression("key", "powertools_json(powertools_base64(data)).payment_id")
    assert expression.search(data) == "pay-1"


def test_expression_with_powertools_base64_gzip_decompresses() -> None:
    data = {"data": base64.b64encode(gzip.compress(PAYMENT_TEXT.encode())).decode()}
    expression = events.compile_expression("key", "powertools_json(powertools_base64_gzip(data)).payment_id")
    assert expression.search(data) == "pay-1"


def test_fails_compile_expression_with_a_syntax_error() -> None:
    with pytest.raises(events.InvalidExpression) as caught:
        events.compile_expression("key", "x[")
    assert (
        str(caught.value) == "key must be a JMESPath expression, but 'x[' was given: it ends early, after character 2"
    )
    assert caught.value.reason == "it ends early, after character 2"


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("", "it is empty"),
        ("a.#", "Unknown token #, at character 3"),
        ("a b", "unexpected 'b' at character 3"),
        ("a[?b==]", "unexpected ']' at character 7 (invalid token)"),
        ("a || ", "it ends early, after character 5"),
    ],
)
def test_a_refused_expression_gives_one_reason_on_one_line(expression: str, reason: str) -> None:
    """jmespath's own messages say "Invalid jmespath expression" and draw the expression over two more lines; the
    refusal says what was found, and where, once."""
    with pytest.raises(ValueError) as caught:
        events.compile_expression("validate", expression)
    assert str(caught.value) == f"validate must be a JMESPath expression, but {expression!r} was given: {reason}"
    assert "\n" not in str(caught.value)


def test_fails_compile_expression_with_something_else_than_a_string() -> None:
    with pytest.raises(ValueError) as caught:
        events.compile_expression("key", 5)  # type: ignore[arg-type]
    assert str(caught.value) == "key must be a JMESPath expression (a string), but 5 was given"


BUILTINS = (
    "abs, avg, ceil, contains, ends_with, floor, join, keys, length, map, max, max_by, merge, min, min_by, not_null, "
    "reverse, sort, sort_by, starts_with, sum, to_array, to_number, to_string, type, values"
)


def test_fails_compile_expression_with_an_unknown_function() -> None:
    with pytest.raises(ValueError) as caught:
        events.compile_expression("key", "no_such(x)")
    assert str(caught.value) == (
        "key must be a JMESPath expression with known functions, but 'no_such(x)' was given: unknown function "
        f"no_such() (builtins: {BUILTINS}; Powertools: powertools_base64, powertools_base64_gzip, powertools_json)"
    )


@pytest.mark.parametrize(
    "expression",
    [
        "items[?json_parse(@) == `1`]",
        "sort_by(items, &json_parse(name))",
        "{a: a, b: json_parse(b)}",
        "[a, json_parse(b)]",
        "a || !json_parse(b)",
        "items[*].json_parse(@) | [0]",
        "powertools_json(json_parse(Message))",
    ],
    ids=["filter", "expref", "multi-select hash", "multi-select list", "or not", "projection pipe", "argument"],
)
def test_fails_compile_expression_with_an_unknown_function_anywhere(expression: str) -> None:
    with pytest.raises(ValueError, match=r"unknown function json_parse\(\) \(builtins:"):
        events.compile_expression("key", expression)


def test_fails_compile_expression_naming_every_unknown_function() -> None:
    with pytest.raises(ValueError, match=r"unknown function a\(\), b\(\) \(builtins:"):
        events.compile_expression("key", "[b(x), a(y), b(z)]")


def test_compile_expression_accepts_every_builtin_and_powertools_function() -> None:
    events.compile_expression("key", "[length(a), to_string(b), powertools_json(c), powertools_base64_gzip(d)]")


def fails_search(expression: str, data: Any) -> str:
    with pytest.raises(InvalidRecord) as caught:
        events.compile_expression("key", expression).search(data)
    return str(caught.value)


def test_fails_search_with_a_jmespath_type_error() -> None:
    assert fails_search("length(amount)", PAYMENT) == (
        "JMESPath 'length(amount)' failed on the record: JMESPathTypeError: In function length(), invalid type for "
        "value: 1000, expected one of: ['string', 'array', 'object'], received: \"number\""
    )


def test_fails_search_with_powertools_json_of_text_that_is_not_json() -> None:
    assert fails_search("powertools_json(Message).payment_id", sns_envelope("Hello from SNS!")) == (
        "JMESPath 'powertools_json(Message).payment_id' failed on the record: JSONDecodeError: Expecting value: "
        "line 1 column 1 (char 0)"
    )


def test_fails_search_with_powertools_base64_of_bad_base64() -> None:
    assert fails_search("powertools_base64(data)", {"data": "abc"}) == (
        "JMESPath 'powertools_base64(data)' failed on the record: Error: Incorrect padding"
    )


def test_fails_search_with_powertools_base64_gzip_of_data_that_is_not_gzip() -> None:
    data = {"data": base64.b64encode(b"hello").decode()}
    assert fails_search("powertools_base64_gzip(data)", data) == (
        "JMESPath 'powertools_base64_gzip(data)' failed on the record: BadGzipFile: Not a gzipped file (b'he')"
    )


def test_search_error_is_a_permanent_error() -> None:
    with pytest.raises(PermanentError):
        events.search(events.compile_expression("key", "length(amount)"), PAYMENT)


def test_search_error_is_cut_short_on_one_line() -> None:
    message = fails_search("abs(text)", {"text": "line\n" * 100_000})
    assert "\n" not in message
    assert message.endswith("...")
    assert len(message) < 300


BASE64_ID = base64.b64encode(b'{"payment_id": 7}').decode()


@pytest.mark.parametrize(
    ("expression", "data"),
    [
        ("powertools_json(Message).payment_id", sns_envelope()),
        ("powertools_json(Message).[payment_id, amount]", sns_envelope()),
        ("powertools_json(body).{id: payment_id, account: account_id}", {"body": PAYMENT_TEXT}),
        ("powertools_json(powertools_base64(data)).payment_id", {"data": BASE64_ID}),
        ("Sns.MessageId", sns_record()),
        ("[s3.object.key, s3.object.versionId]", s3_record()),
    ],
    ids=["sns message", "multi-select list", "multi-select hash", "base64", "sns record", "s3 record"],
)
def test_expression_finds_the_key_powertools_idempotency_hashes(
    expression: str, data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    layer = DynamoDBPersistenceLayer(table_name="idempotency")
    config = IdempotencyConfig(event_key_jmespath=expression, payload_validation_jmespath=expression)
    layer.configure(config, key_prefix="p")
    found = events.compile_expression("key", expression).search(data)
    assert layer._get_hashed_idempotency_key(data) == f"p#{layer._generate_hash(found)}"
    assert layer._get_hashed_payload(data) == layer._generate_hash(found)
