"""AWS limits and guidance that the constructs enforce, each with its source.

Everything the library checks or derives from an AWS number lives here, so the rules can be read (and
extended, issue 5) in one place. Durations are in seconds unless the name says otherwise.
"""

from __future__ import annotations

from typing import Final

from effectively_once_runtime import names

# --- Sources named in error and warning messages -------------------------------------------------------
SQS_QUEUE_DOC: Final = "CloudFormation AWS::SQS::Queue"
SQS_FIFO_DOC: Final = "Amazon SQS Developer Guide, FIFO queues"
SQS_DLQ_DOC: Final = "Amazon SQS Developer Guide, Using dead-letter queues"
#: Standard queues: a message moved to the DLQ keeps its original enqueue timestamp, so the DLQ's retention
#: must be longer than the source's or a moved message can expire at once; FIFO queues reset the timestamp.
SQS_DLQ_RETENTION_DOC: Final = "Amazon SQS Developer Guide, Using dead-letter queues (message retention)"
SQS_NAME_DOC: Final = "Amazon SQS API Reference, CreateQueue QueueName"
#: A consumer of a queue encrypted with a customer-managed KMS key needs kms:Decrypt on that key; the AWS managed
#: key ``alias/aws/sqs`` allows every principal of the account that may use SQS (its policy cannot be changed, and
#: CDK emits no grant on it: aws/aws-cdk#3169), and SSE-SQS needs no KMS permission at all.
SQS_KMS_DOC: Final = (
    "Amazon SQS Developer Guide, Amazon SQS key management; AWS Lambda Developer Guide, Using Lambda with Amazon SQS"
)
ESM_DOC: Final = "CloudFormation AWS::Lambda::EventSourceMapping"
LAMBDA_SQS_VISIBILITY_DOC: Final = "AWS Lambda Developer Guide, Using Lambda with Amazon SQS; aws/aws-cdk#20527"
LAMBDA_SQS_DLQ_DOC: Final = "AWS Lambda Developer Guide, Using Lambda with Amazon SQS (dead-letter queue)"
IDEMPOTENCY_DOC: Final = "Powertools for AWS Lambda (Python), Idempotency, DynamoDB table configuration"
#: This project's own rule: a producer resend (or a redelivery) after the idempotency record expired is
#: processed, and charged, a second time, so the expiry should cover the source queue's retention period
#: (Powertools' own default expiry is 1 hour).
IDEMPOTENCY_EXPIRY_DOC: Final = "effectively-once docs/validation.md, idempotency expiry"
#: A value known only at deploy time (a CfnParameter, an import) can be written to the template as is, but
#: nothing can be computed from it: CloudFormation's intrinsic functions have no arithmetic (Fn::Join, Fn::Select,
#: Fn::Split, Fn::Sub, ... but no multiplication or unit conversion). A Number parameter's Ref is a string,
#: so it is a valid Lambda environment value. Source: AWS CloudFormation User Guide, "Intrinsic function
#: reference" and "Parameters" (Number: "the parameter value becomes a string" where it is referenced).
CFN_TOKEN_DOC: Final = "AWS CloudFormation User Guide, Intrinsic function reference (no arithmetic)"
#: Maximum concurrency and reserved concurrency are independent settings: a function's reserved concurrency
#: should be greater than or equal to the total maximum concurrency of all the SQS event source mappings that
#: invoke it, or Lambda may throttle the messages. Source: AWS Lambda Developer Guide, "Configuring scaling
#: behavior for SQS event source mappings" (services-sqs-scaling.html), section "Configuring maximum concurrency
#: for Amazon SQS event sources".
LAMBDA_SQS_MAX_CONCURRENCY_DOC: Final = (
    "AWS Lambda Developer Guide, Configuring scaling behavior for SQS event source mappings (Configuring maximum "
    "concurrency for Amazon SQS event sources)"
)
#: DynamoDB's item APIs (GetItem, PutItem, UpdateItem, DeleteItem, Scan, ...) take the table's ARN in
#: ``TableName`` ("table name overloading"), which is how a function reaches a table in another account; the
#: request still goes to the client's own Region (botocore's DynamoDB endpoint rule set builds every endpoint
#: from the client's Region), so a table in another Region needs a client built there.
DYNAMODB_TABLE_ARN_DOC: Final = (
    "Amazon DynamoDB Developer Guide, DynamoDB API operations supported by resource-based policies (table ARN in "
    "TableName)"
)
#: Cross-account access needs an Allow in both the caller's identity policy and the table's resource policy.
DYNAMODB_CROSS_ACCOUNT_DOC: Final = (
    "Amazon DynamoDB Developer Guide, Cross-account access with resource-based policies in DynamoDB"
)

# --- Amazon SQS ---------------------------------------------------------------------------------------
#: Longest visibility timeout SQS accepts: 12 hours.
#: Source: Amazon SQS Developer Guide, "Amazon SQS visibility timeout"; CloudFormation AWS::SQS::Queue
#: ``VisibilityTimeout`` (0 to 43,200 seconds).
SQS_MAX_VISIBILITY_TIMEOUT_SECONDS: Final = 12 * 60 * 60
#: Visibility timeout SQS applies when none is set: 30 seconds. Source: CloudFormation AWS::SQS::Queue
#: ``VisibilityTimeout`` (default 30).
SQS_DEFAULT_VISIBILITY_TIMEOUT_SECONDS: Final = 30

#: Longest message retention SQS accepts: 14 days (used for every dead-letter queue).
#: Source: CloudFormation AWS::SQS::Queue ``MessageRetentionPeriod`` (60 to 1,209,600 seconds).
SQS_MAX_RETENTION_SECONDS: Final = 14 * 24 * 60 * 60
#: Shortest message retention SQS accepts: 60 seconds. Source: as above.
SQS_MIN_RETENTION_SECONDS: Final = 60
#: Retention SQS applies when none is set: 4 days. Source: as above (default 345,600 seconds).
SQS_DEFAULT_RETENTION_SECONDS: Final = 4 * 24 * 60 * 60

#: Longest queue name, the ``.fifo`` suffix included. Source: Amazon SQS Developer Guide,
#: "Amazon SQS message quotas" / CreateQueue ``QueueName`` (up to 80 characters).
SQS_MAX_QUEUE_NAME_LENGTH: Final = 80
#: Suffix every FIFO queue name must end in. Source: Amazon SQS Developer Guide, "FIFO queue logic".
SQS_FIFO_SUFFIX: Final = ".fifo"
#: Characters a queue name may hold (before the FIFO suffix): alphanumerics, hyphens and underscores.
#: Source: Amazon SQS API Reference, CreateQueue ``QueueName``.
SQS_QUEUE_NAME_PATTERN: Final = r"[A-Za-z0-9_-]+"

#: maxReceiveCount bounds of a redrive policy. Source: Amazon SQS Developer Guide, "Using dead-letter queues"
#: (RedrivePolicy ``maxReceiveCount``, 1 to 1,000).
SQS_MIN_MAX_RECEIVE_COUNT: Final = 1
SQS_MAX_MAX_RECEIVE_COUNT: Final = 1000
#: Receives before a message moves to the DLQ that AWS recommends for a queue consumed by Lambda: at
#: least 5, so throttling alone does not move a valid message. Source: AWS Lambda Developer Guide,
#: "Using Lambda with Amazon SQS" (configuring a dead-letter queue). Default of ``max_receive_count``.
LAMBDA_SQS_RECOMMENDED_MIN_MAX_RECEIVE_COUNT: Final = 5

# --- AWS Lambda event source mapping for SQS -----------------------------------------------------------
#: Visibility timeout guidance: at least 6 x the function timeout plus the maximum batching window, so
#: Lambda can retry a throttled batch before the message becomes visible again. Source: AWS Lambda
#: Developer Guide, "Using Lambda with Amazon SQS" (configuring a queue); aws/aws-cdk#20527.
LAMBDA_SQS_VISIBILITY_TIMEOUT_FACTOR: Final = 6

#: Batch size bounds. Source: CloudFormation AWS::Lambda::EventSourceMapping ``BatchSize``
#: (SQS standard 1 to 10,000; FIFO 1 to 10); a batch above 10 on a standard queue needs a batching window.
ESM_MIN_BATCH_SIZE: Final = 1
ESM_MAX_BATCH_SIZE_STANDARD: Final = 10_000
ESM_MAX_BATCH_SIZE_FIFO: Final = 10
ESM_MAX_BATCH_SIZE_WITHOUT_WINDOW: Final = 10
#: Longest batching window: 300 seconds. Source: CloudFormation AWS::Lambda::EventSourceMapping
#: ``MaximumBatchingWindowInSeconds``.
ESM_MAX_BATCHING_WINDOW_SECONDS: Final = 300
#: Maximum concurrency bounds. Source: CloudFormation AWS::Lambda::EventSourceMapping ``ScalingConfig``
#: ``MaximumConcurrency`` (2 to 1,000).
ESM_MIN_MAX_CONCURRENCY: Final = 2
ESM_MAX_MAX_CONCURRENCY: Final = 1000

#: Provisioned mode (``ProvisionedPollerConfig``) on an SQS mapping: minimum pollers 2..200 (default 2), maximum
#: pollers 2..2,000 (default 200), and exclusive with ``ScalingConfig.MaximumConcurrency`` ("When using provisioned
#: mode, you control concurrency through the maximum event pollers setting"). Sources: AWS Lambda Developer Guide,
#: "How Lambda processes records from stream and queue-based event sources" (provisioned mode,
#: https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventsourcemapping.html) and "Configuring scaling behavior
#: for SQS event source mappings" ("These are mutually exclusive options"); aws-cdk-lib 2.275.0 ``SqsEventSource``
#: (aws-lambda-event-sources/lib/sqs.ts), whose checks these are. The generic ``lambda.EventSourceMapping`` checks only
#: 1..200 / 1..2,000 (the Kafka ranges). The Lambda API reference has since raised the SQS maximum to 10,000; the
#: L2 of aws-cdk-lib 2.275 rejects anything above 2,000, so 2,000 stays the ceiling here.
ESM_PROVISIONED_DOC: Final = (
    "AWS Lambda Developer Guide, How Lambda processes records from stream and queue-based event sources "
    "(provisioned mode); aws-cdk-lib SqsEventSource; CloudFormation AWS::Lambda::EventSourceMapping "
    "ProvisionedPollerConfig"
)
ESM_SQS_MIN_MINIMUM_POLLERS: Final = 2
ESM_SQS_MAX_MINIMUM_POLLERS: Final = 200
ESM_SQS_MIN_MAXIMUM_POLLERS: Final = 2
ESM_SQS_MAX_MAXIMUM_POLLERS: Final = 2000
#: What Lambda uses when ``MinimumPollers`` / ``MaximumPollers`` is left unset on an SQS mapping. Source: as above.
ESM_SQS_DEFAULT_MINIMUM_POLLERS: Final = 2
ESM_SQS_DEFAULT_MAXIMUM_POLLERS: Final = 200
#: In provisioned mode each SQS event poller handles up to 1 MB/s, up to 10 concurrent invokes, or up to 10 SQS
#: polling API calls per second, so a mapping can drive up to 10 x MaximumPollers concurrent invocations: the
#: reserved-concurrency guidance compares against that. Source: AWS Lambda Developer Guide, "Configuring scaling
#: behavior for SQS event source mappings" and "Using Lambda with Amazon SQS" (provisioned mode). (The Lambda API
#: Reference's ProvisionedPollerConfig says "approximately 5 MBps" per poller: the figure the same guide gives for
#: Kafka pollers; for SQS it gives 1 MB/s.) The capacity model (benchmarks/capacity.py) uses all three.
LAMBDA_SQS_INVOKES_PER_POLLER: Final = 10
LAMBDA_SQS_POLLS_PER_POLLER: Final = 10
LAMBDA_SQS_BYTES_PER_POLLER: Final = 1_000_000
LAMBDA_SQS_SCALING_URL: Final = "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html"
LAMBDA_SQS_PROVISIONED_CONCURRENCY_DOC: Final = (
    "AWS Lambda Developer Guide, Configuring scaling behavior for SQS event source mappings (provisioned mode: each "
    "event poller handles up to 10 concurrent invokes)"
)
#: ``PollerGroupName`` groups Kafka mappings of one VPC to share Event Poller Units; it is documented for Amazon MSK
#: and self-managed Apache Kafka only. Source: AWS Lambda API Reference, ProvisionedPollerConfig.
ESM_POLLER_GROUP_DOC: Final = "AWS Lambda API Reference, ProvisionedPollerConfig PollerGroupName"

#: The function timeout Lambda uses when none is set: 3 seconds. Source: AWS Lambda Developer Guide,
#: "Configure Lambda function timeout".
LAMBDA_DEFAULT_TIMEOUT_SECONDS: Final = 3
#: A function's memory is an integer number of MB (CloudFormation AWS::Lambda::Function ``MemorySize``: type
#: integer, https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lambda-function.html).
LAMBDA_MEMORY_SIZE_DOC: Final = "CloudFormation AWS::Lambda::Function MemorySize"
#: Function timeout bounds: 1 to 900 seconds. Source: CloudFormation AWS::Lambda::Function ``Timeout``
#: ("The maximum allowed value is 900 seconds"; minimum 1); AWS Lambda Developer Guide, "Lambda quotas" (function
#: timeout: 900 seconds, 15 minutes). Checked by ``PaymentProcessor(function_timeout=...)``, by
#: ``IdempotentQueueConsumer`` on a given ``lambda.Function`` (CDK's ``Function`` does not check it) and by the local
#: tooling's ``--function-timeout``.
LAMBDA_MIN_TIMEOUT_SECONDS: Final = 1
LAMBDA_MAX_TIMEOUT_SECONDS: Final = names.LAMBDA_MAX_TIMEOUT_SECONDS  # the runtime's stale-claim window too
LAMBDA_TIMEOUT_DOC: Final = "CloudFormation AWS::Lambda::Function Timeout; AWS Lambda Developer Guide, Lambda quotas"

# --- AWS Lambda environment variables -------------------------------------------------------------------
#: "The total size of the environment variables can't exceed 4 KB" (AWS Lambda Developer Guide, "Working with Lambda
#: environment variables"; "Lambda quotas": 4 KB "for all environment variables associated with the function"). What
#: Lambda measures is the function's ``Environment.Variables`` as one compact JSON object: its refusal quotes it
#: (``InvalidParameterValueException``: "... exceeded the 4KB limit. String measured: {"KEY":"value",...}"), so keys,
#: values, quotes, colons and commas count (measured here in UTF-8, non-ASCII unescaped: if Lambda escapes it, the
#: limit is reached sooner). The reserved variables the runtime sets in the execution environment (``AWS_REGION``,
#: ``AWS_LAMBDA_FUNCTION_NAME``, ``_HANDLER``, ...) are not part of the configuration and cannot be set in it, so they
#: do not count (AWS Lambda Developer Guide, "Defined runtime environment variables").
LAMBDA_MAX_ENVIRONMENT_BYTES: Final = 4096
LAMBDA_ENVIRONMENT_DOC: Final = (
    "AWS Lambda Developer Guide, Working with Lambda environment variables and Lambda quotas (4 KB for all "
    "environment variables of a function, measured as their JSON object)"
)

# --- Upper bounds of deploy-time values (the environment check counts each token at its bound) --------------
#: Longest partition id: ``aws-us-gov`` (10; ``aws-iso-b``, ``-e``, ``-f`` have 9, ``aws-eusc`` 8, ``aws-cn`` 6).
#: Longest Region name: ``us-isof-south-1`` (15; the commercial ones have at most 14, e.g. ``ap-southeast-5``). Longest
#: DNS suffix (``AWS::URLSuffix``): ``amazonaws.com.cn`` (16). Source: the SDKs' partition metadata (botocore
#: ``data/partitions.json``: ``partitions[].id``, ``regions``, ``outputs.dnsSuffix``; a unit test fails when it lists
#: a longer one). An account id is 12 digits (AWS Account Management Reference Guide, "AWS account identifiers").
AWS_MAX_PARTITION_LENGTH: Final = 10
AWS_MAX_REGION_LENGTH: Final = 15
AWS_MAX_URL_SUFFIX_LENGTH: Final = 16
AWS_ACCOUNT_ID_LENGTH: Final = 12
#: A DynamoDB table name: 3 to 255 characters of ``[a-zA-Z0-9_.-]``. Source: Amazon DynamoDB Developer Guide,
#: "Supported data types and naming rules in Amazon DynamoDB" (naming rules).
DYNAMODB_MAX_TABLE_NAME_LENGTH: Final = 255
#: ``arn:<partition>:dynamodb:<region>:<account>:table/<name>``: 314 bytes at most. Source: the bounds above; Service
#: Authorization Reference, "Actions, resources, and condition keys for Amazon DynamoDB" (table ARN).
DYNAMODB_TABLE_ARN_MAX_LENGTH: Final = (
    len("arn:") + AWS_MAX_PARTITION_LENGTH + len(":dynamodb:") + AWS_MAX_REGION_LENGTH + len(":")
    + AWS_ACCOUNT_ID_LENGTH + len(":table/") + DYNAMODB_MAX_TABLE_NAME_LENGTH
)  # fmt: skip
#: ``arn:<partition>:sqs:<region>:<account>:<name>``: 128 bytes at most (names: SQS_MAX_QUEUE_NAME_LENGTH). Source:
#: the bounds above; Service Authorization Reference, "Actions, resources, and condition keys for Amazon SQS".
SQS_QUEUE_ARN_MAX_LENGTH: Final = (
    len("arn:") + AWS_MAX_PARTITION_LENGTH + len(":sqs:") + AWS_MAX_REGION_LENGTH + len(":")
    + AWS_ACCOUNT_ID_LENGTH + len(":") + SQS_MAX_QUEUE_NAME_LENGTH
)  # fmt: skip
#: ``https://sqs.<region>.<dns suffix>/<account>/<name>``: 138 bytes at most (the legacy ``https://queue.amazonaws.com``
#: form is shorter). Source: the bounds above; Amazon SQS Developer Guide, "Amazon SQS queue and message identifiers"
#: (queue URL).
SQS_QUEUE_URL_MAX_LENGTH: Final = (
    len("https://sqs.") + AWS_MAX_REGION_LENGTH + len(".") + AWS_MAX_URL_SUFFIX_LENGTH + len("/")
    + AWS_ACCOUNT_ID_LENGTH + len("/") + SQS_MAX_QUEUE_NAME_LENGTH
)  # fmt: skip

# --- Powertools idempotency (DynamoDBPersistenceLayer defaults) ---------------------------------------
#: Partition key and TTL attribute the Powertools persistence layer writes by default. ``expiration`` is
#: epoch **seconds** (a valid DynamoDB TTL); ``in_progress_expiration`` is milliseconds and must never be the
#: TTL. Source: Powertools for AWS Lambda (Python), "Idempotency" utility, DynamoDB table configuration.
#: The longest ``key_prefix``: 2015 UTF-8 bytes, so the stored key ``<key_prefix>#<md5 hex>`` (33 bytes more) fits a
#: DynamoDB partition key (1 to 2,048 bytes). The rule is shared with the runtime, so it lives in
#: ``effectively_once_runtime.names`` (its sources there: Amazon DynamoDB Developer Guide, "Service, account, and table
#: quotas in Amazon DynamoDB"; Powertools ``BasePersistenceLayer._get_hashed_idempotency_key``); re-exported here.
DYNAMODB_MAX_PARTITION_KEY_BYTES: Final = names.DYNAMODB_MAX_PARTITION_KEY_BYTES
IDEMPOTENCY_KEY_HASH_SUFFIX_BYTES: Final = names.KEY_HASH_SUFFIX_BYTES
IDEMPOTENCY_MAX_KEY_PREFIX_BYTES: Final = names.MAX_KEY_PREFIX_BYTES
IDEMPOTENCY_PARTITION_KEY: Final = "id"
IDEMPOTENCY_TTL_ATTRIBUTE: Final = "expiration"
IDEMPOTENCY_IN_PROGRESS_EXPIRY_ATTRIBUTE: Final = "in_progress_expiration"
#: The DynamoDB calls the persistence layer makes, and so exactly what ``grant_idempotency`` grants.
#: Source: Powertools ``DynamoDBPersistenceLayer`` (get_item, put_item conditional, update_item, delete_item).
IDEMPOTENCY_TABLE_ACTIONS: Final = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
)


def visibility_timeout_guidance_seconds(function_timeout_seconds: float, batching_window_seconds: float = 0) -> int:
    """Visibility timeout AWS recommends for an SQS queue consumed by Lambda, in seconds.

    ``6 x function timeout + batching window``, capped at SQS's 12-hour maximum.
    Source: AWS Lambda Developer Guide, "Using Lambda with Amazon SQS"; aws/aws-cdk#20527.
    """
    wanted = LAMBDA_SQS_VISIBILITY_TIMEOUT_FACTOR * function_timeout_seconds + batching_window_seconds
    return int(min(wanted, SQS_MAX_VISIBILITY_TIMEOUT_SECONDS))


# --- AWS Lambda asynchronous invocation -------------------------------------------------------------
#: Retry attempts of an asynchronous invocation: 0 to 2 (Lambda's default is 2).
#: Source: CloudFormation AWS::Lambda::EventInvokeConfig ``MaximumRetryAttempts``; AWS Lambda Developer Guide,
#: "Configuring error handling for asynchronous invocation".
ASYNC_MIN_RETRY_ATTEMPTS: Final = 0
ASYNC_MAX_RETRY_ATTEMPTS: Final = 2
#: How long Lambda keeps an event for asynchronous invocation: 60 seconds to 6 hours.
#: Source: CloudFormation AWS::Lambda::EventInvokeConfig ``MaximumEventAgeInSeconds`` (60 to 21,600).
ASYNC_MIN_MAX_EVENT_AGE_SECONDS: Final = 60
ASYNC_MAX_MAX_EVENT_AGE_SECONDS: Final = 6 * 60 * 60
#: An SQS destination of an asynchronous invocation must be a standard queue, not FIFO.
#: Source: AWS Lambda Developer Guide, "Capturing records of Lambda asynchronous invocations" (asynchronous
#: invocation destinations: "Amazon SQS - A standard SQS queue"); CloudFormation
#: AWS::Lambda::EventInvokeConfig DestinationConfig ("FIFO queues cannot be used").
ASYNC_DESTINATION_DOC: Final = (
    "AWS Lambda Developer Guide, Capturing records of Lambda asynchronous invocations (asynchronous invocation "
    "destinations); CloudFormation AWS::Lambda::EventInvokeConfig DestinationConfig"
)

# --- Powertools public Lambda layer ------------------------------------------------------------------
POWERTOOLS_LAYER_DOC: Final = (
    "Powertools for AWS Lambda (Python) docs, Installation, Lambda Layer (Using SSM Parameter Store; AWS China "
    "and GovCloud regions); aws-powertools/powertools-lambda-python .github/workflows/update_ssm.yml"
)
#: Regions where Powertools writes ``/aws/service/powertools/python/<arch>/python3.<minor>/<release>`` for each
#: release (python3.10 to python3.14, x86_64 and arm64): all in the ``aws`` partition. None in ``aws-cn`` or
#: ``aws-us-gov``: their layers are copies published without parameters. Source: aws-powertools/
#: powertools-lambda-python ``.github/workflows/update_ssm.yml`` (the region matrix of the python3.14 era; the
#: earlier matrix also listed me-central-1 and me-south-1, dropped since) and ``layers_partitions.yml``.
POWERTOOLS_SSM_REGIONS: Final = frozenset(
    {
        "af-south-1",
        "ap-east-1",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-south-1",
        "ap-south-2",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-southeast-3",
        "ap-southeast-4",
        "ap-southeast-5",
        "ap-southeast-7",
        "ca-central-1",
        "ca-west-1",
        "eu-central-1",
        "eu-central-2",
        "eu-north-1",
        "eu-south-1",
        "eu-south-2",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "il-central-1",
        "mx-central-1",
        "sa-east-1",
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
    }
)

#: A new on-demand table can serve up to 4,000 write and 12,000 read request units per second at once (or a
#: linear combination); traffic more than doubling the previous peak within 30 minutes can throttle. Pre-warming
#: (warm throughput) raises what the table serves at once. Sources: Amazon DynamoDB Developer Guide, "DynamoDB
#: on-demand capacity mode" (Initial throughput and scaling properties) and "Understanding DynamoDB warm
#: throughput" (DYNAMODB_WARM_THROUGHPUT_URL).
DYNAMODB_ON_DEMAND_INITIAL_WRITE_UNITS: Final = 4_000
DYNAMODB_ON_DEMAND_INITIAL_READ_UNITS: Final = 12_000
DYNAMODB_ON_DEMAND_URL: Final = (
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/on-demand-capacity-mode.html"
)
DYNAMODB_WARM_THROUGHPUT_URL: Final = (
    "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html"
)
#: WarmThroughput ReadUnitsPerSecond / WriteUnitsPerSecond: integers, minimum 1. Source: CloudFormation
#: AWS::DynamoDB::Table WarmThroughput.
DYNAMODB_WARM_THROUGHPUT_MIN_UNITS: Final = 1
DYNAMODB_WARM_THROUGHPUT_DOC: Final = "CloudFormation AWS::DynamoDB::Table WarmThroughput"
