"""SQS's answers that moto 5.2.5 does not give, for tests that must meet them before the local AWS does (issue 58
makes the local AWS refuse what AWS refuses)."""

from __future__ import annotations

from typing import Any

import botocore.client
import pytest
from botocore.exceptions import ClientError

#: SQS's refusal of a ``MessageDeduplicationId`` on a standard queue (quoted in cdklabs/construct-hub#905): a
#: standard queue takes a ``MessageGroupId`` since fair queues (July 2025), never a deduplication id.
NOT_VALID_FOR_QUEUE_TYPE = (
    "Value {value} for parameter MessageDeduplicationId is invalid. Reason: The request include parameter that is not "
    "valid for this queue type."
)


def refuse_deduplication_ids_on_standard_queues(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every client's ``SendMessage`` to a standard queue with a ``MessageDeduplicationId`` fail as SQS fails
    it (``InvalidParameterValue``, HTTP 400, nothing sent). ``SendMessageBatch`` is left as moto answers it. The
    queue's type is read from its URL here on purpose, apart from the runtime's ``names.is_fifo_address``: the
    answer stands for SQS, not for the code under test.

    :returns: the queue URLs refused, one per refusal."""
    refused: list[str] = []
    make_api_call = botocore.client.BaseClient._make_api_call

    def answer_as_sqs(client: Any, operation: str, params: dict[str, Any]) -> Any:
        url = str(params.get("QueueUrl", ""))
        if operation == "SendMessage" and "MessageDeduplicationId" in params and not url.rstrip("/").endswith(".fifo"):
            refused.append(url)
            error = {"Code": "InvalidParameterValue", "Message": NOT_VALID_FOR_QUEUE_TYPE.format(value="...")}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)
        return make_api_call(client, operation, params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", answer_as_sqs)
    return refused
