"""AWS limits the local tooling checks (and only the tooling: the construct library's are in
``effectively_once.limits``), each with its source.
"""

from __future__ import annotations

from typing import Final

#: A FIFO ``MessageGroupId`` or ``MessageDeduplicationId``: up to 128 characters, alphanumerics and
#: punctuation (printable ASCII, no space). Source: Amazon SQS Developer Guide, "Amazon SQS message quotas";
#: Amazon SQS API Reference, SendMessage.
SQS_FIFO_ID_PATTERN: Final = r"[!-~]{1,128}"
#: A CloudFormation stack name: starts with a letter, then letters, digits and hyphens, at most 128
#: characters. Source: AWS CloudFormation API Reference, CreateStack ``StackName``.
CFN_STACK_NAME_PATTERN: Final = r"[A-Za-z][-A-Za-z0-9]{0,127}"
#: Highest message movement rate of a DLQ redrive (``MaxNumberOfMessagesPerSecond``). Source: Amazon SQS API
#: Reference, StartMessageMoveTask ("The maximum value for messages per second is 500").
SQS_MAX_MESSAGE_MOVE_RATE: Final = 500
