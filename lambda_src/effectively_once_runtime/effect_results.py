"""Effect results kept per record: a declared effect that returned is never run again for its record, whatever
fails after it (issue 30).

Powertools deletes a record's in-progress idempotency item on any exception of the record function, so the record's
next run (a retry, a redelivery, a redrive of a record refused for good) would call every effect again. So when a
declared effect returns, the runtime writes a marker for it in the idempotency table, with its result, for the
record's expiry (``IDEMPOTENCY_EXPIRY_SECONDS``); a later run of the same record finds it and answers that call from
it without calling the effect (``effect answered from marker``).

- **The marker's id** is ``<key prefix>#effect-result#<effect>#<n>#<key>`` (``effect_keys.form`` on the part after
  ``effect-result#``): ``n`` counts the calls of the effect in one run of the record function (1, 2, ...), so an
  effect called twice in a run is answered call by call. It holds a ``#`` after the prefix's, so it never equals a
  Powertools record id (``<key prefix>#<32 hex characters>``), nor an un-keyed effect's marker (``effect-marker``).
  The key is the record's idempotency key (normalised with ``normalize``), so the marker serves the record, not the
  message: a producer's resend finds it too.
- **Its result** is the effect's return value as JSON (``json.dumps`` as it is, at most
  ``unkeyed.MAX_STORED_RESULT_BYTES``), returned to the later call after a JSON round trip (a tuple comes back a
  list). A result that is not such JSON keeps no marker (``effect result not kept``, with the reason): that effect
  runs again after a failure, as before, and only its own idempotency key makes that harmless.
- **Reading** is one consistent ``GetItem`` per effect call; a marker past its ``expiration`` counts as absent, as
  Powertools treats an expired record. A read that fails raises ``MarkerUnavailable``: transient, the effect was not
  called, and the record is retried.
- **Writing** is one ``PutItem`` after the effect returned and its ``effect executed`` line was written. A write
  that fails is logged (``effect marker not updated``) and the record goes on: a later run calls the effect again.
  A crash between the effect's return and the write leaves no marker either: that window is the effect's own key's.
- **Off** when the record has no key (``raise_on_no_idempotency_key=False``) and when Powertools' idempotency is off
  (``POWERTOOLS_IDEMPOTENCY_DISABLED``): a control run sees every execution.

Powertools, boto3 and the standard library only.
"""

from __future__ import annotations

import os
import time
from typing import Any

from aws_lambda_powertools.shared.functions import strtobool
from botocore.exceptions import BotoCoreError, ClientError

from . import effect_keys
from .effects._context import MarkerTable
from .effects.unkeyed import (
    MAX_STORED_RESULT_BYTES,
    MarkerUnavailable,
    ResolvedTable,
    check_key_size,
    resolve_table,
    storable_result,
    stored_result,
)

#: What every result marker id holds after the key prefix: ``<key prefix>#effect-result#...``.
RESULT_INFIX = "effect-result"
#: The ``status`` of a result marker (one value: it is written once the effect returned).
DONE = "done"
#: Powertools' switch of its idempotency (``aws_lambda_powertools.shared.constants.IDEMPOTENCY_DISABLED_ENV``).
IDEMPOTENCY_DISABLED_ENV = "POWERTOOLS_IDEMPOTENCY_DISABLED"


def result_marker_id(key_prefix: str, effect: str, call: int, key: str) -> str:
    """``<key_prefix>#effect-result#<effect>#<call>#<key>`` (``effect_keys.form`` on the part after the infix)."""
    return f"{key_prefix}#{RESULT_INFIX}#{effect_keys.form(f'{effect}#{call}#{key}')}"


def enabled(key: Any) -> bool:
    """Whether a record keyed ``key`` keeps effect results: it has a key and Powertools' idempotency is on."""
    return key is not None and not strtobool(os.environ.get(IDEMPOTENCY_DISABLED_ENV, "false"))


class EffectResults:
    """The result markers in one marker table (the consumer's idempotency table, ``ConsumerState.markers``).

    :param markers: the table.
    """

    def __init__(self, markers: MarkerTable) -> None:
        self.markers = markers
        self._table: ResolvedTable | None = None

    @property
    def table(self) -> ResolvedTable:
        if self._table is None:
            self._table = resolve_table(None, self.markers)
        return self._table

    def marker(self, effect: str, call: int, key: str) -> str:
        """The id of the marker of call number ``call`` (1-based) of ``effect`` for the record keyed ``key``.

        :raises ValueError: the id is longer than the table's key holds.
        """
        marker = result_marker_id(self.markers.key_prefix, effect, call, key)
        check_key_size(self.table, marker)
        return marker

    def find(self, marker: str) -> tuple[bool, Any]:
        """``(True, the stored result)`` when the marker is there and not expired, else ``(False, None)``.

        :raises MarkerUnavailable: the read failed.
        """
        table = self.table
        try:
            item = table.client.get_item(TableName=table.name, Key=table.key(marker), ConsistentRead=True).get("Item")
        except (ClientError, BotoCoreError) as error:
            raise MarkerUnavailable(f"get_item on effect result {marker!r} failed: {error}") from error
        if not item or (item.get("status") or {}).get("S") != DONE:
            return False, None
        expiration = (item.get(table.expiry_attr) or {}).get("N")
        if expiration is not None and int(expiration) < int(time.time()):
            return False, None
        return True, stored_result(item)

    def keep(self, marker: str, result: Any, fields: dict[str, Any]) -> str | None:
        """Write the marker with ``result``; ``None`` when it was written, else why not (never raises).

        :param fields: the marker's other attributes (strings: the effect, the effect key, the record's key).
        """
        stored = storable_result(result)
        if stored is None:
            return (
                f"the result ({type(result).__name__}) is not JSON of at most {MAX_STORED_RESULT_BYTES} bytes: a "
                "later run of the record calls the effect again"
            )
        table = self.table
        now = int(time.time())
        item = {
            **table.key(marker),
            table.expiry_attr: {"N": str(now + table.expiry_seconds)},
            "status": {"S": DONE},
            "done_at": {"N": str(now)},
            "stored_result": {"S": stored},
            **{name: {"S": value} for name, value in fields.items() if isinstance(value, str)},
        }
        try:
            table.client.put_item(TableName=table.name, Item=item)
        except Exception as error:  # noqa: BLE001 - the effect's outcome stands; a later run calls it again
            return f"{type(error).__name__}: {error}"[:500]
        return None
