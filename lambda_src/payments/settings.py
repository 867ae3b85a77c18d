"""The payment sample's own settings. The idempotency environment (table, expiry, key prefix, service, namespace) is
the runtime's contract: ``effectively_once_runtime.settings``.

===================================== ======== =========================================================
variable                              required meaning
===================================== ======== =========================================================
``LEDGER_TABLE_NAME``                 yes      The simulated payment provider's ledger (partition key
                                               ``charge_id``): one item per executed charge.
``PAYMENT_PROVIDER_IDEMPOTENCY_KEYS`` no       ``true`` (default): pass the payment id to the provider as
                                               its idempotency key. ``false`` only for control runs.
===================================== ======== =========================================================

``DEFAULT_KEY_PREFIX`` is the sample's stable key prefix (the ``Consumer``'s ``key_prefix``): every record already
written starts with it, so it never changes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

#: The sample's stable idempotency key prefix; records already written start with it.
DEFAULT_KEY_PREFIX = "effectively-once/payments"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


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


@dataclass(frozen=True)
class Settings:
    """What the payment domain needs, read from the environment (see the module docstring)."""

    ledger_table_name: str
    provider_idempotency_keys: bool = True
    #: The idempotency key prefix (``IDEMPOTENCY_KEY_PREFIX``, else ``DEFAULT_KEY_PREFIX``): the scoped charge keys
    #: start with it, and the ledger stores those under the bare payment id (``gateway.LedgerGateway``).
    key_prefix: str = DEFAULT_KEY_PREFIX

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read the settings.

        :raises ValueError: ``LEDGER_TABLE_NAME`` is missing, or the flag is malformed.
        """
        env = os.environ if env is None else env
        if not env.get("LEDGER_TABLE_NAME"):
            raise ValueError("missing environment variable(s): LEDGER_TABLE_NAME")
        return cls(
            ledger_table_name=env["LEDGER_TABLE_NAME"],
            provider_idempotency_keys=_flag(env, "PAYMENT_PROVIDER_IDEMPOTENCY_KEYS", True),
            key_prefix=env.get("IDEMPOTENCY_KEY_PREFIX") or DEFAULT_KEY_PREFIX,
        )
