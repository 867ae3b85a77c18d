"""moto's server with two small fixes for its SQS backend's cost, three for its SQS, DynamoDB and S3 backends under
concurrent calls, two for FIFO deduplication (SQS and SNS), one bridge for Powertools' public parameters, and the
refusals of SQS, DynamoDB, SNS and Lambda requests that AWS refuses, for the local tooling only. Written for and
tested on moto :data:`REQUIRED_MOTO_VERSION` (the ``[local]`` extra's pin): any other release is refused at start.
Each patch is a function, in the module of this folder named below, naming the moto behaviour it changes, its report in
docs/moto-bugs.md (an upstream-style report with a plain boto3 + moto reproduction) and the test that shows it.

This module checks the moto release (:func:`check_moto_version`), applies every patch (:func:`apply`) and starts the
server; each patch's module says, in its docstring, what moto does, what AWS does and how the patch bridges the two:

- :mod:`.moto_sqs_cost`: the SQS backend's cost, :func:`lazy_queue_attributes` and :func:`direct_retention_check`
  (docs/moto-bugs.md, report 1).
- :mod:`.moto_locking`: the SQS, DynamoDB and S3 backends under concurrent calls, :func:`serialize_queue_mutations`
  (one lock for every queue, :data:`SQS_LOCK`, a long poll waiting outside it; reports 2 and 3),
  :func:`serialize_dynamodb_item_calls` (report 4) and :func:`serialize_s3_puts_per_key` (report 7).
- :mod:`.moto_deduplication`: FIFO deduplication, :func:`remember_deduplication_ids` (SQS, report 5) and
  :func:`sns_content_based_deduplication_ids` (SNS, report 6).
- :mod:`.fifo_order`: a FIFO message group's order after a visibility timeout, :func:`fifo_groups_keep_their_order`
  (report 11), and sequence numbers that increase, :func:`sequence_numbers_increase` (report 13).
- :mod:`.moto_refusals`: SQS requests that AWS refuses and moto accepts (a deduplication id on a standard queue,
  more than 10 message attributes, a message's size in bytes with its attributes, batches of more than 10 entries or
  repeated ids in ``DeleteMessageBatch`` and ``ChangeMessageVisibilityBatch``) and the 12-hour visibility limit
  counted from the receive, all applied by :func:`.moto_refusals.apply_refusals` (reports 14 to 18; the rules, with
  the ones moto already refuses: docs/local-aws-limits.md). The runtime tests' in-process moto applies them too.
- :mod:`.moto_dynamodb_refusals`: DynamoDB requests AWS refuses (docs/local-aws-limits.md),
  :func:`batch_write_item_checks` (at most 25 requests, no two on one item; reports 21 and 22),
  :func:`client_request_tokens` (a transaction's token repeated within 10 minutes; report 23) and
  :func:`item_sizes_as_aws_counts` (report 24), all three applied by :func:`apply_dynamodb_refusals`, which the
  runtime tests' in-process moto applies too (``tests/runtime/conftest.py``).
- :mod:`.moto_sns_lambda_refusals`: SNS and Lambda requests that moto answers otherwise than AWS (a FIFO topic's
  ``Publish`` without a group id refused with SNS's ``InvalidParameter``, an asynchronous ``Invoke`` over 1 MB
  refused with ``RequestEntityTooLargeException`` before the bridge queues it), applied by
  :func:`.moto_sns_lambda_refusals.apply_sns_lambda_refusals` (reports 19 and 20); the runtime tests' in-process
  moto applies them too.
- :mod:`.moto_powertools`: Powertools' public SSM parameters, :func:`powertools_parameters` (docs/moto-bugs.md, "Not
  reported: Powertools' public SSM parameters").
- :mod:`.moto_async_bridges`: Lambda's asynchronous invocation from EventBridge and SNS,
  :func:`eventbridge_lambda_targets` (report 9) and :func:`sns_lambda_subscriptions` (report 10), and by a direct
  ``Invoke`` with ``InvocationType="Event"``, :func:`lambda_event_invocations` (report 12), with the inbox they put
  events in (:func:`put_in_inbox`, :func:`inbox_visibility_timeout`), and a custom event bus's ``Ref``,
  :func:`event_bus_ref_is_its_name` (report 8); all four applied by :func:`.moto_async_bridges.apply_bridges`.

Every public name of those modules (but :mod:`.fifo_order`'s, :mod:`.moto_refusals`',
:mod:`.moto_dynamodb_refusals`' and :mod:`.moto_sns_lambda_refusals`') is importable from here too (:data:`__all__`),
as before they were split out of this module. A setting is read in the module that defines it: set one (say
``moto_locking.RECEIVE_RECHECK_SECONDS``) there, not here.

Run as ``python -m effectively_once_local.aws.moto_patches -H 127.0.0.1 -p PORT`` (the arguments of ``moto_server``).
"""

from __future__ import annotations

from importlib.metadata import version

from .fifo_order import fifo_groups_keep_their_order, sequence_numbers_increase
from .moto_async_bridges import (
    EVENT_FIELDS,
    INBOX_VISIBILITY_MARGIN_SECONDS,
    LAMBDA_DEFAULT_TIMEOUT_SECONDS,
    apply_bridges,
    event_bus_ref_is_its_name,
    eventbridge_event_for_lambda,
    eventbridge_lambda_targets,
    inbox_visibility_timeout,
    lambda_event_invocations,
    put_in_inbox,
    sns_lambda_subscriptions,
    sns_record_for_lambda,
)
from .moto_deduplication import (
    DEDUPLICATION_IDS_ATTRIBUTE,
    remember_deduplication_ids,
    sns_content_based_deduplication_ids,
)
from .moto_dynamodb_refusals import (
    apply_dynamodb_refusals,
    batch_write_item_checks,
    client_request_tokens,
    item_sizes_as_aws_counts,
)
from .moto_locking import (
    DYNAMODB_ITEM_CALLS,
    DYNAMODB_ITEM_LOCK,
    RECEIVE_RECHECK_SECONDS,
    S3_PUT_LOCKS,
    SQS_BACKEND_MUTATIONS,
    SQS_LOCK,
    SQS_QUEUE_MUTATIONS,
    serialize_dynamodb_item_calls,
    serialize_queue_mutations,
    serialize_s3_puts_per_key,
)
from .moto_powertools import (
    POWERTOOLS_ARCHITECTURES,
    POWERTOOLS_PARAMETER_ROOT,
    POWERTOOLS_PYTHON_VERSIONS,
    powertools_parameters,
    powertools_release,
)
from .moto_refusals import apply_refusals
from .moto_sns_lambda_refusals import apply_sns_lambda_refusals
from .moto_sqs_cost import direct_retention_check, lazy_queue_attributes

#: This module's own names and the ones re-exported from the patches' modules (the module docstring).
__all__ = [
    "DEDUPLICATION_IDS_ATTRIBUTE",
    "DYNAMODB_ITEM_CALLS",
    "DYNAMODB_ITEM_LOCK",
    "EVENT_FIELDS",
    "INBOX_VISIBILITY_MARGIN_SECONDS",
    "LAMBDA_DEFAULT_TIMEOUT_SECONDS",
    "POWERTOOLS_ARCHITECTURES",
    "POWERTOOLS_PARAMETER_ROOT",
    "POWERTOOLS_PYTHON_VERSIONS",
    "RECEIVE_RECHECK_SECONDS",
    "REQUIRED_MOTO_VERSION",
    "S3_PUT_LOCKS",
    "SQS_BACKEND_MUTATIONS",
    "SQS_LOCK",
    "SQS_QUEUE_MUTATIONS",
    "MotoVersionError",
    "apply",
    "apply_dynamodb_refusals",
    "batch_write_item_checks",
    "check_moto_version",
    "client_request_tokens",
    "direct_retention_check",
    "event_bus_ref_is_its_name",
    "eventbridge_event_for_lambda",
    "eventbridge_lambda_targets",
    "inbox_visibility_timeout",
    "item_sizes_as_aws_counts",
    "lambda_event_invocations",
    "lazy_queue_attributes",
    "powertools_parameters",
    "powertools_release",
    "put_in_inbox",
    "remember_deduplication_ids",
    "serialize_dynamodb_item_calls",
    "serialize_queue_mutations",
    "serialize_s3_puts_per_key",
    "sns_content_based_deduplication_ids",
    "sns_lambda_subscriptions",
    "sns_record_for_lambda",
]

#: The one moto release the patches (the module docstring) are written for and tested on (they wrap moto's
#: internals): the ``[local]`` extra and requirements-dev.txt pin it, and the local AWS refuses any other
#: (:func:`check_moto_version`).
REQUIRED_MOTO_VERSION = "5.2.5"


class MotoVersionError(RuntimeError):
    """The installed moto is not :data:`REQUIRED_MOTO_VERSION`; the message is one line."""


def check_moto_version(found: str | None = None) -> None:
    """Refuse any moto but :data:`REQUIRED_MOTO_VERSION` (``found``: the installed one by default).

    :raises MotoVersionError: naming the found and the required versions.
    """
    found = found or version("moto")
    if found != REQUIRED_MOTO_VERSION:
        raise MotoVersionError(
            f"the local AWS needs moto {REQUIRED_MOTO_VERSION} (its patches are tested on that release only), "
            f'found moto {found}: pip install "effectively-once[local]"'
        )


def apply() -> None:
    """Every patch of the modules the module docstring names, on the moto release they were written for
    (:func:`check_moto_version`)."""
    check_moto_version()
    apply_refusals()  # before the serialization: it replaces a visibility change the serialization wraps
    apply_sns_lambda_refusals()
    lazy_queue_attributes()
    direct_retention_check()
    powertools_parameters()
    remember_deduplication_ids()  # before the serialization, which then wraps it too
    fifo_groups_keep_their_order()  # before the serialization too: its receive runs under the lock
    sequence_numbers_increase()  # before the serialization: the numbering runs under the lock too
    sns_content_based_deduplication_ids()
    serialize_queue_mutations()
    serialize_dynamodb_item_calls()
    serialize_s3_puts_per_key()
    apply_dynamodb_refusals()
    apply_bridges()


if __name__ == "__main__":
    try:
        apply()
    except MotoVersionError as exc:
        raise SystemExit(f"error: {exc}") from None
    from moto.server import main

    main()
