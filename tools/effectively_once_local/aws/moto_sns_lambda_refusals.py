"""The local AWS refuses what AWS refuses (issue 58, item 1c): the SNS and Lambda requests that moto 5.2.5
(:data:`.moto_patches.REQUIRED_MOTO_VERSION`) answers otherwise than AWS. Applied by :func:`.moto_patches.apply` (the
local AWS's server) and by the runtime tests' in-process moto (``tests/runtime/conftest.py``, through
``tests/sqs_answers.py``), through :func:`apply_sns_lambda_refusals`; the SQS refusals are :mod:`.moto_refusals`'.

moto 5.2.5 already refuses most of SNS's FIFO rules as SNS does (docs/local-aws-limits.md lists them, marked "moto
refuses"): a FIFO topic's message without a deduplication id when the topic has no content-based deduplication, a
deduplication id on a standard topic (in ``PublishBatch``, the entry, under ``Failed``), and a ``PublishBatch`` entry
to a FIFO topic without a group id. The gaps, each patched before moto reads the request (docs/moto-bugs.md has each
as an upstream report):

- :func:`fifo_topics_need_a_group_id` (report 19): a ``Publish`` to a FIFO topic without a ``MessageGroupId`` is
  refused by moto with SQS's error (``MissingParameter``), where SNS answers ``InvalidParameter``.
- :func:`event_payloads_at_most_one_mib` (report 20): an ``Invoke`` with ``InvocationType="Event"`` and a payload
  over 1 MB, where Lambda answers ``RequestEntityTooLargeException`` (HTTP 413), is handed by moto to its
  Docker-backed Lambda whatever its size; in the local AWS, the bridge that queues it
  (``moto_async_bridges.lambda_event_invocations``) met only the inbox's SQS limit, counted in characters: SQS's
  ``InvalidParameterValue`` (400) for an ASCII payload over 1 MiB, and a payload over 1 MiB in UTF-8 bytes but not in
  characters accepted and run.

Tests: tests/local/test_moto_sns_lambda_refusals.py (each rule with moto as is and patched, and against the server
the tooling starts).
"""

from __future__ import annotations

from typing import Any

from .moto_refusals import check_first

#: An asynchronous ``Invoke``'s payload, in bytes: at most 1 MB ("For asynchronous invocations, the maximum payload
#: size is 1 MB", AWS Lambda API Reference, Invoke:
#: https://docs.aws.amazon.com/lambda/latest/dg/API_Invoke.html), counted as 1,048,576 bytes, as Lambda counted the
#: 256 KB it allowed before as 262,144 bytes ("264496 byte payload is too large for the Event invocation type (limit
#: 262144 bytes)", quoted in ASFHyP3/hyp3#2241) and its synchronous 6 MB as 6,291,456 bytes.
MAX_EVENT_PAYLOAD_BYTES = 1_048_576
#: SNS's answer to a ``Publish`` to a FIFO topic without a ``MessageGroupId`` (quoted by AWS's Knowledge Center,
#: https://repost.aws/knowledge-center/sns-invalid-parameter-error-api-call), which moto gives in ``PublishBatch``
#: for the same rule (the rule: Amazon SNS API Reference, Publish, ``MessageGroupId``:
#: https://docs.aws.amazon.com/sns/latest/api/API_Publish.html).
GROUP_ID_REQUIRED = "Invalid parameter: The MessageGroupId parameter is required for FIFO topics"


def patched_attributes() -> list[tuple[type, str]]:
    """Every ``(class, attribute)`` of moto that :func:`apply_sns_lambda_refusals` replaces: a test restores them
    after (``monkeypatch.setattr(cls, name, getattr(cls, name))`` before applying)."""
    from moto.awslambda.responses import LambdaResponse
    from moto.sns.responses import SNSResponse

    return [(SNSResponse, "publish"), (LambdaResponse, "invoke")]


def apply_sns_lambda_refusals() -> None:
    """Every refusal of this module (the module docstring); a second call changes nothing."""
    fifo_topics_need_a_group_id()
    event_payloads_at_most_one_mib()


def fifo_topics_need_a_group_id() -> None:
    """moto 5.2.5 refuses a ``Publish`` to a FIFO topic without a ``MessageGroupId`` with SQS's exception
    (``MissingParameter``, "The request must contain the parameter MessageGroupId."); SNS answers
    ``InvalidParameter`` (HTTP 400), the code of every SNS parameter error (Amazon SNS API Reference, Publish,
    Errors), with :data:`GROUP_ID_REQUIRED`, SNS's message, which moto gives for the same rule in ``PublishBatch``.
    An app that tells a refused publish by SNS's code misses this one locally. A ``MessageGroupId`` on a standard
    topic stays accepted.
    docs/moto-bugs.md, report 19; test: ``test_a_fifo_publish_without_a_group_id_is_an_invalid_parameter``."""
    from moto.sns.exceptions import SNSInvalidParameter, SNSNotFoundError
    from moto.sns.responses import SNSResponse

    def check(response: Any) -> None:
        arn = response._get_param("TargetArn") or response._get_param("TopicArn")
        if not arn or response._get_param("PhoneNumber") is not None or response._get_param("MessageGroupId"):
            return
        try:
            topic = response.backend.get_topic(arn)
        except SNSNotFoundError:
            return  # a platform endpoint, or no topic: moto's own answer
        if topic.fifo_topic:
            raise SNSInvalidParameter(GROUP_ID_REQUIRED)

    check_first(SNSResponse, "publish", "fifo_topics_need_a_group_id", check)


def event_payloads_at_most_one_mib() -> None:
    """moto 5.2.5 checks no size of an ``Invoke`` with ``InvocationType="Event"``; the local AWS's bridge
    (``moto_async_bridges.lambda_event_invocations``) puts the payload in the function's inbox, an SQS queue whose
    limit moto counts in characters: an ASCII payload over 1 MiB gets SQS's ``InvalidParameterValue`` (HTTP 400),
    and one over 1 MiB in UTF-8 bytes but not in characters is accepted, and the function runs it. Lambda refuses a
    payload over :data:`MAX_EVENT_PAYLOAD_BYTES` (bytes): ``RequestEntityTooLargeException``,
    HTTP 413 ("The request payload exceeded the Invoke request body JSON input quota", AWS Lambda API Reference,
    Invoke, Errors), "<n> byte payload is too large for the Event invocation type (limit <limit> bytes)" (the message
    quoted in ASFHyP3/hyp3#2241). The check runs in the response, before the backend: nothing reaches the inbox.
    Synchronous invocations stay moto's. docs/moto-bugs.md, report 20; test:
    ``test_an_event_payload_over_one_mib_is_refused``."""
    from moto.awslambda.responses import LambdaResponse
    from moto.core.exceptions import JsonRESTError

    class RequestEntityTooLarge(JsonRESTError):
        code = 413

    def check(response: Any) -> None:
        if response.headers.get("X-Amz-Invocation-Type") != "Event":
            return
        body = response.body
        size = len(body if isinstance(body, bytes) else str(body or "").encode("utf-8"))
        if size > MAX_EVENT_PAYLOAD_BYTES:
            limit = MAX_EVENT_PAYLOAD_BYTES
            message = f"{size} byte payload is too large for the Event invocation type (limit {limit} bytes)"
            raise RequestEntityTooLarge("RequestEntityTooLargeException", message)

    check_first(LambdaResponse, "invoke", "event_payloads_at_most_one_mib", check)
