"""The logical ids of the sandbox's stateful resources are pinned.

The one deliberate exception to "find resources by type and properties": a changed construct id changes the
logical id, and CloudFormation then replaces the table or queue and loses its data. A rename must fail here.
"""

from __future__ import annotations

from app import PaymentsSandboxStack
from aws_cdk.assertions import Template

from .helpers import ENV, new_app

STATEFUL_TYPES = ("AWS::DynamoDB::Table", "AWS::SQS::Queue")


def test_stateful_logical_ids_are_pinned() -> None:
    template = Template.from_stack(PaymentsSandboxStack(new_app(), "PaymentsSandbox", env=ENV)).to_json()
    stateful = sorted(k for k, v in template["Resources"].items() if v["Type"] in STATEFUL_TYPES)
    assert stateful == [
        "FifoIdempotencyTable99983BD5",
        "FifoLedger82C8D9AF",
        "FifoQueue981F45E1",
        "FifoQueueDeadLetterQueue9384C5BC",
        "PaymentEventsOnFailureQueueC372505A",
        "PaymentEventsUndelivered97B5AC48",
        "StandardIdempotencyTable534B4812",
        "StandardLedger66B892DB",
        "StandardQueueDFA670D0",
        "StandardQueueDeadLetterQueue395DCE75",
    ]
