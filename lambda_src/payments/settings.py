"""The environment contract between the constructs and the payment handler.

``IdempotentQueueConsumer`` / ``PaymentProcessor`` set these variables; the handler reads them once per
execution environment (cold start).

=================================== ======== =========================================================
variable                            required meaning
=================================== ======== =========================================================
``IDEMPOTENCY_TABLE_NAME``          yes      DynamoDB table of Powertools' ``DynamoDBPersistenceLayer``
                                             (partition key ``id``, TTL attribute ``expiration``): its
                                             ARN (what the constructs set; any account or Region; the
                                             DynamoDB client is built in the ARN's Region) or a plain
                                             name (a table in ``AWS_REGION`` of the function's account).
``IDEMPOTENCY_EXPIRY_SECONDS``      no       How long a completed record answers duplicates, in seconds.
                                             Default 3600 (Powertools' default). The consumer sets it to
                                             the source queue's retention period.
``IDEMPOTENCY_KEY_PREFIX``          no       Stable prefix of every idempotency key. Default
                                             ``effectively-once/payments``. Independent of the function
                                             name, so a replaced function keeps its records and the SQS
                                             and direct paths share them. Printable, without whitespace
                                             (a stray newline is an error at cold start).
``LEDGER_TABLE_NAME``               yes      The simulated payment provider's ledger (partition key
                                             ``charge_id``): one item per executed charge.
``PAYMENT_PROVIDER_IDEMPOTENCY_KEYS`` no     ``true`` (default): pass the payment id to the provider as
                                             its idempotency key. ``false`` only for control runs.
``POWERTOOLS_SERVICE_NAME``         no       Logger/Metrics service. Default ``payments``.
``POWERTOOLS_METRICS_NAMESPACE``    no       Metrics namespace. Default ``EffectivelyOnce``.
``POWERTOOLS_IDEMPOTENCY_DISABLED`` no       Powertools' own switch; ``true`` turns the idempotency
                                             layer off (control runs only, never in production).
=================================== ======== =========================================================
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

DEFAULT_KEY_PREFIX = "effectively-once/payments"
DEFAULT_EXPIRY_SECONDS = 3600
DEFAULT_SERVICE = "payments"
DEFAULT_NAMESPACE = "EffectivelyOnce"

#: ``arn:<partition>:dynamodb:<region>:<account>:table/<name>``: DynamoDB's item APIs take it as ``TableName``
#: (Amazon DynamoDB Developer Guide, "DynamoDB API operations supported by resource-based policies"), but a
#: request goes to the client's own Region (botocore's DynamoDB endpoint rule set), hence the region group.
_TABLE_ARN = re.compile(r"arn:[a-z-]+:dynamodb:(?P<region>[a-z0-9-]+):[0-9]{12}:table/[A-Za-z0-9_.-]{3,255}")

_DIGITS = re.compile(r"[0-9]{1,12}")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def table_region(name: str, table: str) -> str | None:
    """The Region of a table given by ARN; ``None`` for a plain table name (the client's Region applies).

    :param name: the environment variable, for the error message.
    :raises ValueError: ``table`` starts like an ARN but is not a DynamoDB table ARN.
    """
    if not table.startswith("arn:"):
        return None
    match = _TABLE_ARN.fullmatch(table)
    if match is None:
        raise ValueError(
            f"{name} must be a table name or a DynamoDB table ARN "
            f"(arn:<partition>:dynamodb:<region>:<account>:table/<name>), but {table!r} was given"
        )
    return match.group("region")


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name} must be true or false, but {raw!r} was given")


def _key_prefix(env: Mapping[str, str]) -> str:
    # Every stored key starts with the prefix: a stray space or newline would orphan every record silently.
    raw = env.get("IDEMPOTENCY_KEY_PREFIX")
    if raw is None or raw == "":
        return DEFAULT_KEY_PREFIX
    if not raw.isprintable() or any(c.isspace() for c in raw):
        raise ValueError(f"IDEMPOTENCY_KEY_PREFIX must be printable characters without whitespace, but {raw!r} was given")
    return raw


@dataclass(frozen=True)
class Settings:
    """What the handler needs, read from the environment (see the module docstring)."""

    idempotency_table_name: str
    ledger_table_name: str
    idempotency_expiry_seconds: int = DEFAULT_EXPIRY_SECONDS
    key_prefix: str = DEFAULT_KEY_PREFIX
    provider_idempotency_keys: bool = True

    @property
    def idempotency_table_region(self) -> str | None:
        """Region of the idempotency table when given by ARN, else ``None`` (the function's own Region)."""
        return table_region("IDEMPOTENCY_TABLE_NAME", self.idempotency_table_name)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """Read the settings.

        :raises ValueError: a required variable is missing, or a value is malformed
            (the message names the variable and the value).
        """
        env = os.environ if env is None else env
        missing = [n for n in ("IDEMPOTENCY_TABLE_NAME", "LEDGER_TABLE_NAME") if not env.get(n)]
        if missing:
            raise ValueError(f"missing environment variable(s): {', '.join(missing)}")
        raw_expiry = env.get("IDEMPOTENCY_EXPIRY_SECONDS") or str(DEFAULT_EXPIRY_SECONDS)
        # ASCII digits only: int() would also take " 3600\n", "3_600" and non-ASCII digits (and raise on 4,301).
        expiry = int(raw_expiry) if _DIGITS.fullmatch(raw_expiry) else 0
        if expiry <= 0:
            raise ValueError(f"IDEMPOTENCY_EXPIRY_SECONDS must be a positive integer of seconds, but {raw_expiry!r} was given")
        table_region("IDEMPOTENCY_TABLE_NAME", env["IDEMPOTENCY_TABLE_NAME"])
        return cls(
            idempotency_table_name=env["IDEMPOTENCY_TABLE_NAME"],
            ledger_table_name=env["LEDGER_TABLE_NAME"],
            idempotency_expiry_seconds=expiry,
            key_prefix=_key_prefix(env),
            provider_idempotency_keys=_flag(env, "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS", True),
        )
