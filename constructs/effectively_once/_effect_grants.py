"""``EffectGrants``: what the runtime's effect adapters (``effectively_once_runtime.effects``) call on the stores they
write to, granted to a consumer construct's function, and nothing more.

A mixin for any consumer construct with a ``function`` attribute (``aws_lambda.IFunction``): the consumers' core
(``_consumer_core.ConsumerCore``) inherits it, so ``IdempotentQueueConsumer`` and ``IdempotentEventConsumer`` both
offer these methods; it stays a module of its own, the core's part for the runtime's effect adapters. Each
``grant_effect_*`` method adds an identity-policy statement to the function's role (and a resource-policy statement
where CDK's ``Grant.add_to_principal_or_resource`` needs one: a resource in another account), plus the key actions
on a customer-managed KMS key when the resource has one, and returns the ``iam.Grant``. An AWS managed key
(``alias/aws/s3``, ``alias/aws/sqs``, ``alias/aws/sns``) or an AWS owned key needs no grant: its key policy already
allows the account's principals through the service.

The un-keyed adapters' markers (``delivery="at_most_once"|"at_least_once"``) live in the consumer's idempotency
table, under their own id prefix: they need ``dynamodb:PutItem``, ``UpdateItem``, ``GetItem`` and ``DeleteItem``
on it (:data:`MARKER_ACTIONS`), which the consumer's own ``IdempotencyTable.grant_idempotency`` already gives (the
same four: ``limits.IDEMPOTENCY_TABLE_ACTIONS``). No method here is needed for them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import jsii
from aws_cdk import Annotations, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IConstruct, IValidation

from ._validation import WARNING_ID_PREFIX, Described, acknowledge, check_type, fail, is_unresolved

#: The DynamoDB adapter's conditional put (``PutItem`` with ``attribute_not_exists``) and its read-back
#: (``GetItem``). Its transactional variant's ``TransactWriteItems`` and its read-back's ``TransactGetItems`` have no
#: action of their own: each part is authorised as the single-item action it stands for (``Put``:
#: ``dynamodb:PutItem``, ``Get``: ``dynamodb:GetItem``, ``ConditionCheck``: ``dynamodb:ConditionCheckItem``).
#: Source: :data:`DYNAMODB_TRANSACTIONS_DOC`.
TABLE_ACTIONS: Final = ("dynamodb:PutItem", "dynamodb:GetItem")
TABLE_TRANSACTION_ACTIONS: Final = ("dynamodb:ConditionCheckItem",)
#: A table under a customer-managed key: DynamoDB decrypts the table key with the caller's permission
#: (``kms:Decrypt``, again after five minutes of the caller's inactivity); item reads and writes make no other call
#: on the key for the caller (aws/aws-cdk#10010: PutItem on such a table fails without kms:Decrypt). Source:
#: :data:`DYNAMODB_KMS_DOC`. Not CDK's ``grant_encrypt_decrypt`` (Encrypt, ReEncrypt*, GenerateDataKey*).
TABLE_KEY_ACTIONS: Final = ("kms:Decrypt",)
#: The S3 adapter's ``PutObject`` with ``IfNoneMatch="*"`` (a conditional write is still ``s3:PutObject``) and its
#: read-back on a 412 (``GetObject``; ``HeadObject`` needs ``s3:GetObject`` too).
BUCKET_ACTIONS: Final = ("s3:PutObject", "s3:GetObject")
QUEUE_ACTIONS: Final = ("sqs:SendMessage",)
TOPIC_ACTIONS: Final = ("sns:Publish",)
#: What a sender (SQS ``SendMessage``, SNS ``Publish``, S3 ``PutObject``) and the S3 read-back need on a
#: customer-managed key: ``kms:GenerateDataKey`` (the exact action the services call: not CDK's
#: ``GenerateDataKey*``) and ``kms:Decrypt``. Sources: :data:`SQS_KMS_DOC`, :data:`SNS_KMS_DOC`, :data:`S3_KMS_DOC`.
SENDER_KEY_ACTIONS: Final = ("kms:GenerateDataKey", "kms:Decrypt")
#: The un-keyed adapters' markers in the consumer's idempotency table: claimed with a conditional ``PutItem``,
#: counted and settled with ``UpdateItem``, read with ``GetItem``, released with ``DeleteItem`` (a call that provably
#: sent nothing); covered by ``IdempotencyTable.grant_idempotency``.
MARKER_ACTIONS: Final = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:DeleteItem")

DYNAMODB_TRANSACTIONS_DOC: Final = (
    "Amazon DynamoDB Developer Guide, Using IAM with DynamoDB transactions, "
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html"
)
DYNAMODB_KMS_DOC: Final = (
    "AWS Key Management Service Developer Guide, How Amazon DynamoDB uses AWS KMS (table keys), "
    "https://docs.aws.amazon.com/kms/latest/developerguide/services-dynamodb.html"
)
S3_KMS_DOC: Final = (
    "Amazon S3 User Guide, Using server-side encryption with AWS KMS keys (SSE-KMS), permissions: uploading needs "
    "kms:GenerateDataKey, downloading kms:Decrypt, https://docs.aws.amazon.com/AmazonS3/latest/userguide/"
    "UsingKMSEncryption.html"
)
SQS_KMS_DOC: Final = (
    "Amazon SQS Developer Guide, Amazon SQS key management (permissions for producers), "
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html"
)
SNS_KMS_DOC: Final = (
    "Amazon SNS Developer Guide, Managing Amazon SNS encryption keys and costs (configuring AWS KMS permissions: "
    "publishers), https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html"
)
#: The prefix's rules. ``*`` and ``?`` are wildcards in a policy's Resource ARN and ``${...}`` a policy variable:
#: either would grant other keys than the prefix names. An object key is at most 1,024 bytes of UTF-8.
IAM_RESOURCE_DOC: Final = (
    "IAM User Guide, IAM JSON policy elements: Resource (wildcards) and Variables, "
    "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html"
)
S3_KEY_DOC: Final = (
    "Amazon S3 User Guide, Naming Amazon S3 objects, https://docs.aws.amazon.com/AmazonS3/latest/userguide/"
    "object-keys.html"
)
S3_MAX_KEY_BYTES: Final = 1024
#: The aliases of AWS managed keys (``alias/aws/<service>``): AWS KMS Developer Guide, AWS managed keys.
AWS_MANAGED_ALIAS: Final = "alias/aws/"

#: cdk-nag's wildcard rule; its finding for one resource is ``AwsSolutions-IAM5[Resource::<flattened ARN>]``.
NAG_WILDCARD_RULE: Final = "AwsSolutions-IAM5"
NAG_PREFIX_REASON: Final = (
    "An S3 object ARN names keys: the S3 effect adapter writes one object per idempotency key, each under a key "
    "derived from it, so its PutObject and GetObject are granted on the prefix's objects (prefix*) and no wider."
)


class EffectGrants:
    """Grants for the runtime's effect adapters, on a consumer construct's ``function``.

    Mixed into a construct (``class ConsumerCore(EffectGrants, Construct)``) that sets ``self.function``. Warnings are
    added to that construct. A function imported without its role gets no grant (there is no policy to add to): each
    method then warns, naming the actions and resources to grant yourself, and returns a dropped grant
    (``grant.success`` is ``False``). A customer-managed key known only by an imported alias
    (``kms.Alias.from_alias_name``) is granted as CDK grants an alias: on ``key/*`` with a ``kms:ResourceAliases``
    condition (cdk-nag reports that wildcard); give the resource the key itself to grant on its ARN.

    Attributes:
        function (lambda.IFunction): the function the adapters run in (set by the consumer).
    """

    function: lambda_.IFunction

    def grant_effect_table(self, table: dynamodb.ITable, *, transactions: bool = False) -> iam.Grant:
        """Grant what the DynamoDB adapters call on ``table``, on the table's ARN only (no index, no stream).

        ``dynamodb:PutItem`` (the conditional put) and ``dynamodb:GetItem`` (the read-back); with ``transactions``,
        also ``dynamodb:ConditionCheckItem`` (``TransactWriteItems`` and ``TransactGetItems`` are authorised part by
        part: Amazon DynamoDB Developer Guide, "Using IAM with DynamoDB transactions",
        https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html). Entries of
        your own in a transaction (``{"Update": ...}``, ``{"Delete": ...}``) need their own actions on their
        tables: grant those yourself (``table.grant(consumer.function, "dynamodb:UpdateItem")``). A table
        under a customer-managed key (``table.encryption_key``) also gets ``kms:Decrypt`` on that key: DynamoDB
        decrypts the table key with the caller's permission and makes no other key call for item reads and writes
        (AWS KMS Developer Guide, "How Amazon DynamoDB uses AWS KMS"). A table imported without its key
        (``Table.from_table_arn``) gets no key grant: import it with ``Table.from_table_attributes(table_arn=...,
        encryption_key=...)``.

        :param table: the table the effect writes to (not the idempotency table: the markers the un-keyed adapters
            write there are covered by the consumer's own grant).
        :param transactions: the effect uses the transactional variant (``TransactWriteItems``).
            :default: ``False``: PutItem and GetItem only.
        :returns: the grant (table and key statements combined).
        :raises ValueError: ``transactions`` is not a bool.
        """
        check_type("transactions", transactions, bool, "a bool")
        actions = TABLE_ACTIONS + (TABLE_TRANSACTION_ACTIONS if transactions else ())
        return self._grant_effect(table, actions, [table.table_arn], table.encryption_key, TABLE_KEY_ACTIONS)

    def grant_effect_bucket(self, bucket: s3.IBucket, *, prefix: str = "") -> iam.Grant:
        """Grant what the S3 adapter calls on the objects under ``prefix`` in ``bucket``, and no other key.

        ``s3:PutObject`` (the write with ``IfNoneMatch="*"``) and ``s3:GetObject`` (the read-back on a 412) on
        ``<bucket ARN>/<prefix>*``; no ``ListBucket``, no ``DeleteObject``. A bucket under a customer-managed key
        (``bucket.encryption_key``) also gets ``kms:GenerateDataKey`` (to write) and ``kms:Decrypt`` (to read back)
        on it (Amazon S3 User Guide, "Using server-side encryption with AWS KMS keys (SSE-KMS)"). The prefix matches
        as a string: ``orders`` also covers ``orders-archive/``, so end it with ``/`` to grant one folder. The
        wildcard this ARN needs is acknowledged to cdk-nag (``AwsSolutions-IAM5`` for this resource only, with the
        reason).

        :param bucket: the bucket the effect writes to.
        :param prefix: the key prefix the adapter writes under (the adapter's own ``prefix``).
            :default: ``""``: every object of the bucket.
        :returns: the grant (object and key statements combined).
        :raises ValueError: ``prefix`` not a string; containing ``*`` or ``?`` (wildcards in a policy's resource
            ARN) or ``${`` (a policy variable): either would grant other keys (IAM User Guide, "IAM JSON policy
            elements: Resource"); starting with ``/`` (an object key is relative to the bucket: the ARN is
            ``arn:aws:s3:::bucket/key``, so ``/orders/`` would name keys that begin with a slash); longer than
            1,024 bytes of UTF-8 (an object key's limit: Amazon S3 User Guide, "Naming Amazon S3 objects"). A
            deploy-time token is not checked.
        """
        check_bucket_prefix(prefix)
        objects = bucket.arn_for_objects(f"{prefix}*")
        grant = self._grant_effect(bucket, BUCKET_ACTIONS, [objects], bucket.encryption_key, SENDER_KEY_ACTIONS)
        role = self.function.role
        if role is not None:
            # The finding names the ARN as the template has it (a cross-stack import only after prepare): at synth.
            self._effect_grants_scope().node.add_validation(_AcknowledgeObjectWildcard(role, objects))
        return grant

    def grant_effect_queue(self, queue: sqs.IQueue) -> iam.Grant:
        """Grant what the queue adapter calls on ``queue`` (FIFO or standard): ``sqs:SendMessage``, nothing more.

        No ``GetQueueUrl`` or ``GetQueueAttributes`` (CDK's ``grant_send_messages`` adds them): the adapter is given
        the URL. A queue under a customer-managed key (``queue.encryption_master_key``) also gets
        ``kms:GenerateDataKey`` and ``kms:Decrypt`` on it (Amazon SQS Developer Guide, "Amazon SQS key management":
        permissions for producers); SSE-SQS and the AWS managed ``alias/aws/sqs`` need none.

        :param queue: the queue the effect sends to.
        :returns: the grant (queue and key statements combined).
        """
        return self._grant_effect(
            queue, QUEUE_ACTIONS, [queue.queue_arn], queue.encryption_master_key, SENDER_KEY_ACTIONS
        )

    def grant_effect_topic(self, topic: sns.ITopic) -> iam.Grant:
        """Grant what the topic adapter calls on ``topic`` (FIFO or standard): ``sns:Publish``, nothing more.

        A topic under a customer-managed key (``topic.master_key``) also gets ``kms:GenerateDataKey`` and
        ``kms:Decrypt`` on it (Amazon SNS Developer Guide, "Managing Amazon SNS encryption keys and costs":
        publishers); the AWS managed ``alias/aws/sns`` needs none.

        :param topic: the topic the effect publishes to.
        :returns: the grant (topic and key statements combined).
        """
        return self._grant_effect(topic, TOPIC_ACTIONS, [topic.topic_arn], topic.master_key, SENDER_KEY_ACTIONS)

    def _grant_effect(
        self,
        resource: Any,
        actions: Sequence[str],
        resource_arns: list[str],
        key: kms.IKey | None,
        key_actions: Sequence[str],
    ) -> iam.Grant:
        """``actions`` on ``resource_arns`` and ``key_actions`` on ``key`` (when there is one), combined; a warning
        and a dropped grant for a function imported without its role."""
        function = self.function
        if function.role is None:
            return self._drop_effect_grant(actions, resource_arns, key, key_actions)
        grant = iam.Grant.add_to_principal_or_resource(
            grantee=function, actions=list(actions), resource_arns=resource_arns, resource=resource
        )
        if key is not None and not is_aws_managed(key):
            grant = grant.combine(key.grant(function, *key_actions))
        return grant

    def _drop_effect_grant(
        self, actions: Sequence[str], resource_arns: list[str], key: kms.IKey | None, key_actions: Sequence[str]
    ) -> iam.Grant:
        scope = self._effect_grants_scope()
        stack = Stack.of(scope)
        wanted = f"{', '.join(actions)} on {', '.join(json.dumps(stack.resolve(arn)) for arn in resource_arns)}"
        if key is not None and not is_aws_managed(key):
            wanted += f", and {', '.join(key_actions)} on its customer-managed key"
        Annotations.of(scope).add_warning_v2(
            WARNING_ID_PREFIX + "effectGrantImportedFunctionWithoutRole",
            f"function was imported without its role: grant it {wanted} yourself, or import it with "
            "lambda.Function.from_function_attributes(role=...)",
        )
        return iam.Grant.drop(self.function, wanted)

    def _effect_grants_scope(self) -> IConstruct:
        """The construct warnings and validations go to: the consumer itself (the function if not a construct)."""
        return self if isinstance(self, Construct) else self.function


def is_aws_managed(key: kms.IKey) -> bool:
    """``key`` is an AWS managed key given by its alias (``alias/aws/sns``, ...): its key policy already allows the
    account's principals through the service, and CDK's grant on an imported alias would add a statement on every
    key of the account (``key/*`` with a ``kms:ResourceAliases`` condition) for nothing."""
    alias_name = getattr(key, "alias_name", None)
    return isinstance(alias_name, str) and not is_unresolved(alias_name) and alias_name.startswith(AWS_MANAGED_ALIAS)


def check_bucket_prefix(prefix: Any) -> None:
    """:raises ValueError: ``prefix`` breaks a rule of :meth:`EffectGrants.grant_effect_bucket` (a token is
    skipped)."""
    check_type("prefix", prefix, str, "a string")
    if is_unresolved(prefix):
        return
    if "*" in prefix or "?" in prefix or "${" in prefix:
        raise fail(
            "prefix",
            prefix,
            "must not contain '*' or '?' (wildcards in a policy's resource ARN) or '${' (a policy variable): "
            "either would grant other keys than the prefix names",
            IAM_RESOURCE_DOC,
        )
    if prefix.startswith("/"):
        raise fail(
            "prefix",
            prefix,
            "must not start with '/': an object key is relative to the bucket (arn:aws:s3:::bucket/key), so a "
            "leading slash names keys that begin with one; write 'orders/', not '/orders/'",
            S3_KEY_DOC,
        )
    size = len(prefix.encode("utf-8"))
    if size > S3_MAX_KEY_BYTES:
        raise fail(
            "prefix",
            Described(f"a {size}-byte prefix"),
            f"must be at most {S3_MAX_KEY_BYTES} bytes of UTF-8 (an object key's limit)",
            S3_KEY_DOC,
        )


@jsii.implements(IValidation)
class _AcknowledgeObjectWildcard:
    """At synth, acknowledge cdk-nag's wildcard finding for one prefix's object ARN on ``role`` (whose policy holds
    the statement; cdk-nag reads acknowledgements from a resource's ancestors too).

    The finding names the ARN as cdk-nag flattens the template's (``<Bucket1234.Arn>/orders/*``; for a bucket of
    another stack, the cross-stack reference as compact JSON), which is known only once references are resolved:
    validations run after that, and before the validation plugins (cdk-nag) read the tree. Adds no error.
    """

    def __init__(self, role: iam.IRole, objects: str) -> None:
        self._role = role
        self._objects = objects

    def validate(self) -> list[str]:
        flattened = flatten_cfn_reference(Stack.of(self._role).resolve(self._objects))
        acknowledge(self._role, f"{NAG_WILDCARD_RULE}[Resource::{flattened}]", NAG_PREFIX_REASON)
        return []


def flatten_cfn_reference(value: Any) -> str:
    """A resolved CloudFormation value as cdk-nag 3 flattens it into a finding id (its ``flattenCfnReference``):
    ``Fn::Join`` joined, ``Fn::GetAtt`` as ``<Id.Attr>``, ``Ref`` as ``<Id>``, ``${X}`` in a string as ``<X>``,
    ``Fn::Sub`` and ``Fn::ImportValue`` as their argument, anything else as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("${", "<").replace("}", ">")
    if isinstance(value, dict):
        if "Fn::Join" in value:
            delimiter, items = value["Fn::Join"]
            return str(delimiter).join(flatten_cfn_reference(item) for item in items)
        if "Fn::Sub" in value:
            return flatten_cfn_reference(value["Fn::Sub"])
        if "Fn::GetAtt" in value:
            resource, attribute = value["Fn::GetAtt"]
            return f"<{flatten_cfn_reference(resource)}.{flatten_cfn_reference(attribute)}>"
        if "Fn::ImportValue" in value:
            return flatten_cfn_reference(value["Fn::ImportValue"])
        if "Ref" in value:
            return f"<{flatten_cfn_reference(value['Ref'])}>"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
