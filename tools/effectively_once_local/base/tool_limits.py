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
#: The CDK CLI release the tooling is tested with, and the one its error messages tell a user to install
#: (``npm install --no-save aws-cdk@<this>``). Source: ``aws-cdk`` in the repository's package.json (an installed
#: wheel has no package.json; a test checks the two agree).
CDK_CLI_VERSION: Final = "2.1148.1"
#: The oldest CDK CLI the tooling runs: older ones cannot read the cloud assembly aws-cdk-lib 2.275 writes. Source:
#: the CLI's own refusal, "Cloud assembly schema version mismatch ... need at least CLI version 2.1148.0". The
#: deprecated ``aws-cdk@3.0.0`` on npm is such an old build despite its number: only 2.x counts.
CDK_CLI_MIN_VERSION: Final = "2.1148.0"
