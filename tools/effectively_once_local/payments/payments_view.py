"""The payments profile's view of a deployed sandbox stack (``PaymentsSandbox``, the sample's stacks): its two
pipelines (standard and FIFO) with the tables the payments report reads, the handler's own validity rules, and the
payments gateway seam the runner's chaos strikes at (a kill after the charge, a stall before it).

The generic layers (``aws/discovery.py``, ``runner/mapping_runner.py``, ``chaos/fault_model.py``,
``traffic/producer.py``, ``engine/pipeline.py``) know nothing of payments: this module, ``payments/demo.py``,
``payments/payments_report.py``, ``payments/payments_input.py``, ``payments/backlog.py`` and ``payments/remote.py`` are
the profile.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..aws.deploy import DeployError
from ..aws.discovery import DeployedMapping, discover_mappings
from ..aws.mapping_config import MappingConfig
from ..chaos.fault_model import AFTER_CHARGE, TIMEOUT, EventLog, InvocationChaos

#: The sample function's environment variable naming its ledger (the provider stand-in's charges).
LEDGER_TABLE_ENV = "LEDGER_TABLE_NAME"
#: ``PollerSpec.seam`` of the payments gateway (:func:`install_gateway_seam`).
GATEWAY_SEAM = f"{__name__}:install_gateway_seam"
#: The control run's switches (``demo --unsafe``): the idempotency layer off and no provider idempotency key.
UNSAFE_ENV = {"POWERTOOLS_IDEMPOTENCY_DISABLED": "true", "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS": "false"}


@dataclass(frozen=True)
class Pipeline:
    """One deployed processor: its event source mapping and what the report reads."""

    mapping: MappingConfig
    mapping_uuid: str
    dlq_url: str
    idempotency_table: str
    ledger_table: str

    @property
    def deployed(self) -> DeployedMapping:
        """The mapping as the generic layers take it (``discovery.disable``, ``pipeline.poller_specs``)."""
        queue_name = self.mapping.queue_arn.split(":")[5]
        return DeployedMapping(
            label=self.mapping.label,
            queue_name=queue_name,
            fifo=names.is_fifo_address(queue_name),
            mapping=self.mapping,
            mapping_uuid=self.mapping_uuid,
            dlq_url=self.dlq_url,
            code_dir=None,
        )


def discover(session: Any, stack: str, cdk_out: Path | None = None) -> dict[str, Pipeline]:
    """The payments view of every SQS event source mapping of ``stack`` (``discovery.discover_mappings``), keyed and
    labelled ``standard`` / ``fifo``, with the tables the report reads from the function's environment.

    :raises DeployError: the stack has no SQS event source mapping, two of one queue type, or a queue without a
        redrive policy.
    """
    pipelines: dict[str, Pipeline] = {}
    for found in discover_mappings(session, stack, cdk_out):
        if found.dlq_url is None:
            raise DeployError(f"queue {found.queue_name} has no redrive policy")
        label = "fifo" if found.fifo else "standard"
        if label in pipelines:
            raise DeployError(f"stack {stack} has more than one {label} SQS event source mapping")
        variables = found.mapping.function_env
        pipelines[label] = Pipeline(
            mapping=replace(found.mapping, label=label),
            mapping_uuid=found.mapping_uuid,
            dlq_url=found.dlq_url,
            idempotency_table=variables.get(names.ENV_TABLE_NAME, ""),
            ledger_table=variables.get(LEDGER_TABLE_ENV, ""),
        )
    return pipelines


def validity_check(handler_root: Path) -> Callable[[str], bool]:
    """The handler's own validation rules (``payments.model`` under ``handler_root``) decide which lines are valid
    payments."""
    if str(handler_root) not in sys.path:
        sys.path.insert(0, str(handler_root))
    from payments.model import InvalidPayment, parse_payment

    def is_valid(body: str) -> bool:
        try:
            parse_payment(body)
            return True
        except InvalidPayment:
            return False
        except Exception:  # noqa: BLE001 - e.g. an integer over 4,300 digits: the handler cannot accept it either
            return False

    return is_valid


def install_gateway_seam(chaos: InvocationChaos, provider_log: EventLog) -> None:
    """``PollerSpec.seam`` of the payments profile: the sample's gateway factory (``payments.gateway``) wrapped in
    :class:`ChaosGateway`, in the poller, before the handler is imported."""
    import importlib

    seam = importlib.import_module("payments.gateway")
    default = seam.default_gateway_factory
    seam.set_gateway_factory(lambda settings: ChaosGateway(default(settings), chaos, provider_log))


class ChaosGateway:
    """Wraps the handler's payment gateway: logs every provider call and injects the gateway-side faults."""

    def __init__(self, inner: Any, chaos: InvocationChaos, provider_log: EventLog) -> None:
        self.inner = inner
        self.chaos = chaos
        self.provider_log = provider_log

    def charge(self, payment: Any, *, idempotency_key: str | None = None) -> Any:
        chaos = self.chaos
        if chaos.fate == TIMEOUT:
            chaos.fate = None
            chaos.stalling = True
            # Stall before the charge; the runner's watchdog kills the process at the invocation's deadline.
            time.sleep(max(0.0, chaos.deadline - time.monotonic()) + 5)
        # Logged before the call: a kill while the call is in flight may still leave a charge behind.
        chaos.inflight_payment = payment.payment_id
        self.provider_log.write(
            event="call", payment_id=payment.payment_id, invocation=chaos.invocation, request_id=chaos.request_id
        )
        result = self.inner.charge(payment, idempotency_key=idempotency_key)
        self.provider_log.write(
            event="result", payment_id=payment.payment_id, charge_id=result.charge_id, replayed=bool(result.replayed)
        )
        if chaos.fate == AFTER_CHARGE:
            chaos.fate = None
            chaos.crash(AFTER_CHARGE)
        return result
