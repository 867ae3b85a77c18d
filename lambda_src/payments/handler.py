"""The payment Lambda: effectively-once charging behind an at-least-once event source.

Entry point ``payments.handler.lambda_handler``. Two event shapes:

- an SQS event (``{"Records": [...]}``, from an event source mapping with ReportBatchItemFailures): every record is
  processed on its own and the response lists only the failed ones (``{"batchItemFailures": [...]}``). A standard
  queue uses Powertools' ``BatchProcessor``; a FIFO queue (event source ARN ending in ``.fifo``) uses
  ``SqsFifoPartialProcessor(skip_group_on_error=True)``, so a failure holds back only its own message group.
  A batch whose records all failed is answered the same way, never raised: a concurrent duplicate or a bad
  message is an expected outcome, not a Lambda error. ``FailedRecords`` (EMF) counts the failed records.
- a payment object invoked directly (``InvocationType=Event`` or ``RequestResponse``): charged once, result returned;
  an invalid payment raises (an async invocation then retries and goes to its on-failure destination).

Both paths run the same ``idempotent_function`` keyed on ``payment_id`` with the stable prefix
``IDEMPOTENCY_KEY_PREFIX``, so they share idempotency records; the payload validation covers
``[account_id, amount, currency]`` (``persistence.py``, which still accepts records written with the legacy
``[amount, currency]`` hash until they expire). See ``settings.py`` for the environment.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import os
import uuid
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from botocore.config import Config
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

from . import gateway as _gateway
from .model import Payment, parse_payment
from .persistence import PAYLOAD_VALIDATION_JMESPATH, PaymentPersistenceLayer
from .settings import DEFAULT_NAMESPACE, DEFAULT_SERVICE, Settings

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SERVICE)
metrics = Metrics(
    namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE,
    service=os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SERVICE,
)

# Metric names (EMF, unit Count); the dashboard and the demo report read the same names.
METRIC_CHARGES = "PaymentsCharged"
METRIC_PROVIDER_REPLAYS = "ProviderReplays"
METRIC_DUPLICATES = "DuplicatesSuppressed"
METRIC_INVALID = "InvalidPayments"
# Records an SQS invocation reported in batchItemFailures, zero included: the consumer's FailedRecordsAlarm
# reads it (FAILED_RECORDS_METRIC in effectively_once/observability.py; tests/runtime/test_failed_records_metric.py).
METRIC_FAILED_RECORDS = "FailedRecords"


def json_safe(value: Any) -> Any:
    """Return ``value`` with Decimal (int when integral), datetime/date (ISO 8601), UUID and sets made JSON-ready."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


class PaymentService:
    """One execution environment's state: settings, persistence layer, gateway, the idempotent charge function."""

    def __init__(
        self,
        settings: Settings,
        *,
        gateway: _gateway.PaymentGateway | None = None,
        persistence_store: BasePersistenceLayer | None = None,
    ) -> None:
        self.settings = settings
        self.gateway = gateway if gateway is not None else _gateway.create_gateway(settings)
        # The table may live in another Region than the function (the constructs pass its ARN, which DynamoDB
        # takes as TableName): a request goes to the client's own Region, so build the client in the table's.
        region = settings.idempotency_table_region
        self.persistence_store = persistence_store or PaymentPersistenceLayer(
            table_name=settings.idempotency_table_name,
            boto_config=Config(region_name=region) if region else None,
        )
        self.config = IdempotencyConfig(
            event_key_jmespath="payment_id",
            payload_validation_jmespath=PAYLOAD_VALIDATION_JMESPATH,
            raise_on_no_idempotency_key=True,
            expires_after_seconds=settings.idempotency_expiry_seconds,
            response_hook=self._on_duplicate,
        )
        self.charge = idempotent_function(
            data_keyword_argument="payment",
            persistence_store=self.persistence_store,
            config=self.config,
            key_prefix=settings.key_prefix,
        )(self._charge)

    def _charge(self, payment: dict[str, Any]) -> dict[str, Any]:
        parsed = parse_payment(payment)
        key = parsed.payment_id if self.settings.provider_idempotency_keys else None
        charge = self.gateway.charge(parsed, idempotency_key=key)
        if charge.replayed:
            metrics.add_metric(name=METRIC_PROVIDER_REPLAYS, unit=MetricUnit.Count, value=1)
            logger.warning("provider answered from its idempotency key", extra={"charge_id": charge.charge_id})
        else:
            metrics.add_metric(name=METRIC_CHARGES, unit=MetricUnit.Count, value=1)
            logger.info("payment charged", extra={"charge_id": charge.charge_id, "amount": parsed.amount})
        return json_safe(charge.as_dict())

    @staticmethod
    def _on_duplicate(response: Any, data_record: DataRecord) -> Any:
        metrics.add_metric(name=METRIC_DUPLICATES, unit=MetricUnit.Count, value=1)
        logger.info("duplicate suppressed", extra={"idempotency_status": data_record.status})
        return response

    def pay(self, payment: Payment) -> dict[str, Any]:
        try:
            return self.charge(payment=payment.as_dict())
        except (IdempotencyAlreadyInProgressError, IdempotencyValidationError) as error:
            # The idempotency-rejections query (docs/observability.md) lists these lines.
            logger.warning("idempotency rejected", extra={"idempotency_error": type(error).__name__})
            raise

    def process_record(self, record: SQSRecord) -> dict[str, Any]:
        logger.set_correlation_id(None)
        logger.append_keys(
            message_id=record.message_id,
            # A number, so Logs Insights can aggregate it (max(receive_count) in the duplicate-deliveries query).
            receive_count=int(record.attributes.approximate_receive_count),
            payment_id=None,
        )
        try:
            payment = parse_payment(record.body)
        except ValueError:
            metrics.add_metric(name=METRIC_INVALID, unit=MetricUnit.Count, value=1)
            logger.exception("invalid payment message")
            raise
        logger.set_correlation_id(payment.payment_id)
        logger.append_keys(payment_id=payment.payment_id)
        return self.pay(payment)

    def handle_sqs(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = event.get("Records") or []
        is_fifo = bool(records) and str(records[0].get("eventSourceARN", "")).endswith(".fifo")
        processor: BatchProcessor
        if is_fifo:
            processor = SqsFifoPartialProcessor(skip_group_on_error=True)
            # Its constructor (Powertools 3.37) takes no such argument, but BasePartialBatchProcessor._clean reads
            # the attribute when the batch ends, so setting it here is honoured.
            processor.raise_on_entire_batch_failure = False
        else:
            processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        try:
            response = dict(
                process_partial_response(
                    event=event, record_handler=self.process_record, processor=processor, context=context
                )
            )
            metrics.add_metric(
                name=METRIC_FAILED_RECORDS, unit=MetricUnit.Count, value=len(response.get("batchItemFailures", []))
            )
            return response
        finally:
            logger.remove_keys(["message_id", "receive_count", "payment_id"])
            logger.set_correlation_id(None)

    def handle_direct(self, event: dict[str, Any]) -> dict[str, Any]:
        try:
            payment = parse_payment(event)
        except ValueError:
            metrics.add_metric(name=METRIC_INVALID, unit=MetricUnit.Count, value=1)
            logger.exception("invalid directly invoked payment")
            raise
        logger.set_correlation_id(payment.payment_id)
        logger.append_keys(payment_id=payment.payment_id, message_id=None, receive_count=None)
        try:
            return self.pay(payment)
        finally:
            logger.remove_keys(["payment_id", "message_id", "receive_count"])
            logger.set_correlation_id(None)

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        # Every invocation: an in-progress record then expires with this invocation's deadline.
        self.config.register_lambda_context(context)
        if isinstance(event, dict) and "Records" in event:
            return self.handle_sqs(event, context)
        return self.handle_direct(event)


_service: PaymentService | None = None


def get_service() -> PaymentService:
    """The execution environment's service, built on first use (cold start) from the environment."""
    global _service
    if _service is None:
        _service = PaymentService(Settings.from_env())
    return _service


def reset_service() -> None:
    """Forget the cached service (tests, and tooling that swaps the gateway factory)."""
    global _service
    _service = None


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return get_service().handle(event, context)
