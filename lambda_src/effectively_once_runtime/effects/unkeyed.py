"""Un-keyed effects: calls that take no idempotency key (an email through SES, a chat webhook, a message to a standard
queue or topic). Nothing on the other side can answer a replay, so each call chooses what a replay after a crash does,
with ``delivery=`` (no default):

- ``"at_most_once"``: a marker is claimed with a conditional write *before* the call. A replay that finds the claim
  without its completion does not call again: it logs ``effect possibly lost`` and counts ``EffectsPossiblyLost``.
- ``"at_least_once"``: an attempt is counted on the marker before the call. A replay that finds an attempt without
  its completion calls again: it logs ``effect repeated`` and counts ``EffectsRepeated``.

Each attempt writes a token of its own (``attempt_token``) with its claim or its count, and compares it when a write
is refused: a write whose answer was lost and that the SDK sent again meets the item it wrote itself, and that is
no earlier attempt. The call goes on, its attempt counted once. Undoing a claim or a count (``not_sent``) needs the
token too, and removes it, so an undo sent again undoes nothing more.

In both modes a call that returned marks the marker ``done`` (with its result when it is small JSON), so a replay
after completion is a plain skip that returns the stored result. Both counts are upper bounds: a kill after the call
and before ``done`` is counted although the call happened (``possibly lost``), and a kill after the attempt and
before the call is counted although nothing was repeated (``repeated``).

Markers live in the consumer's idempotency table under ids of their own, ``<key prefix>#effect-marker#<adapter>#
<effect>#<key>`` (``effect_keys.form`` applied to the part after ``effect-marker#``), which always hold a ``#`` after
the prefix's and so never equal a Powertools record id (``<key prefix>#<32 hex characters>``); their TTL attribute
(``expiration``, epoch seconds) is the record's expiry (``IDEMPOTENCY_EXPIRY_SECONDS``) from the claim. A marker past
its expiration counts as absent, as Powertools treats an expired record. Powertools, boto3 and the standard library
only.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from botocore.exceptions import BotoCoreError, ClientError

from .. import effect_keys, names
from ..errors import InvalidEffectCall
from ._context import EffectCall, adapter_key, current
from ._context import MarkerTable as MarkerTable  # re-exported: its public home is this module

R = TypeVar("R")

AT_MOST_ONCE = "at_most_once"
AT_LEAST_ONCE = "at_least_once"
#: The values of ``delivery=``.
DELIVERY_MODES = (AT_MOST_ONCE, AT_LEAST_ONCE)
#: What every marker id holds after the key prefix: ``<key prefix>#effect-marker#...``.
MARKER_INFIX = "effect-marker"
#: The marker attribute holding the token of the attempt that claimed it or last counted an attempt on it.
TOKEN_ATTR = names.ATTEMPT_TOKEN_ATTR
#: A marker's ``status``: claimed or attempted (``pending``), returned (``done``), counted as possibly lost (``lost``).
PENDING, DONE, LOST = "pending", "done", "lost"
#: The largest result, in bytes of JSON, stored on a ``done`` marker (a replay returns it). DynamoDB holds 400 KB per
#: item (Amazon DynamoDB Developer Guide, "Service, account, and table quotas in Amazon DynamoDB"); the rest is left
#: for the marker's id and attributes.
MAX_STORED_RESULT_BYTES = 64 * 1024
#: A DynamoDB sort key value holds at most 1,024 bytes (same quotas page); a partition key,
#: ``names.DYNAMODB_MAX_PARTITION_KEY_BYTES``.
DYNAMODB_MAX_SORT_KEY_BYTES = 1024

_LOG = logging.getLogger(__name__)
_CONDITION_FAILED = "ConditionalCheckFailedException"
_CLIENTS: dict[str | None, Any] = {}
_CLIENTS_LOCK = threading.Lock()


class MarkerUnavailable(Exception):
    """The marker could not be claimed or read (throttling, a network error, a missing table): the call was not made.
    Transient: the record is retried."""


@dataclass(frozen=True)
class ResolvedTable:
    """The resolved marker table (a ``MarkerTable`` with its client built): client, name, key layout (Powertools'
    attribute names), prefix and expiry."""

    name: str
    client: Any
    key_prefix: str
    expiry_seconds: int
    key_attr: str = "id"
    expiry_attr: str = "expiration"
    sort_key_attr: str | None = None
    static_pk_value: str | None = None

    def key(self, marker: str) -> dict[str, Any]:
        """The marker's DynamoDB key: ``id`` = the marker id, or the static partition key plus the marker id as the
        sort key (a Powertools layer built with ``sort_key_attr``)."""
        if self.sort_key_attr is None:
            return {self.key_attr: {"S": marker}}
        return {self.key_attr: {"S": str(self.static_pk_value)}, self.sort_key_attr: {"S": marker}}


def check_delivery(delivery: str) -> str:
    """``delivery`` if it is one of ``DELIVERY_MODES``.

    :raises InvalidEffectCall: anything else.
    """
    if delivery not in DELIVERY_MODES:
        raise InvalidEffectCall(f"delivery must be one of {DELIVERY_MODES!r}, but {delivery!r} was given")
    return delivery


def rejected_by_aws(error: BaseException) -> bool:
    """Whether ``error`` proves an AWS call did nothing: a botocore ``ClientError`` with an HTTP 4xx status on the
    first attempt (a 4xx after botocore's own retries may follow an attempt that was performed and answered 5xx).
    Pass it as ``not_sent=`` for a callable that makes one AWS call."""
    if not isinstance(error, ClientError):
        return False
    meta = error.response.get("ResponseMetadata") or {}
    return 400 <= int(meta.get("HTTPStatusCode") or 0) < 500 and int(meta.get("RetryAttempts") or 0) == 0


def unkeyed(
    call: Callable[[], R],
    *,
    delivery: str,
    idempotency_key: str,
    name: str | None = None,
    markers: MarkerTable | None = None,
    not_sent: Callable[[BaseException], bool] | None = None,
) -> R | None:
    """Call ``call()`` (no arguments: wrap it, ``lambda: ses.send_email(...)``) at most or at least once per key.

    :param call: the un-keyed side effect.
    :param delivery: ``"at_most_once"`` or ``"at_least_once"`` (required, no default: see the module docstring).
    :param idempotency_key: the key the declared effect was called with.
    :param name: this call's name when the effect makes more than one un-keyed call. :default: ``None``.
    :param markers: the marker table outside a ``Consumer``. :default: ``None``: the consumer's idempotency table.
    :param not_sent: tells an exception of ``call`` that proves nothing was sent (e.g. :func:`rejected_by_aws`): the
        claim is released (``at_most_once``) or the attempt uncounted (``at_least_once``), so the retry calls again
        uncounted. :default: ``None``: every exception leaves the marker pending (a retry counts it).
    :returns: ``call()``'s result; on a replay after ``done``, the stored result (its JSON round trip) or ``None``
        when it was not JSON or larger than ``MAX_STORED_RESULT_BYTES``; ``None`` when the call was skipped as
        possibly lost.
    :raises TypeError: ``delivery`` not given; ``call`` not callable.
    :raises InvalidEffectCall: ``delivery`` not one of ``DELIVERY_MODES``; the key or name is invalid or used twice in
        one effect (``adapter_key``); no ``markers`` outside a ``Consumer``; the marker id too long for the table's key.
    :raises MarkerUnavailable: the marker could not be written or read (the call was not made).
    :raises Exception: whatever ``call`` raises (the marker stays pending unless ``not_sent`` says otherwise).
    """
    check_delivery(delivery)
    if not callable(call):
        raise TypeError(f"unkeyed takes a callable of no arguments, but {type(call).__name__} was given")
    key = adapter_key("unkeyed", idempotency_key, name)
    return run_marked("unkeyed", key, call, delivery=delivery, markers=markers, not_sent=not_sent)


def run_marked(
    adapter: str,
    key: str,
    call: Callable[[], R],
    *,
    delivery: str,
    markers: MarkerTable | None = None,
    not_sent: Callable[[BaseException], bool] | None = None,
) -> R | None:
    """The marker machinery of :func:`unkeyed` for an adapter that already formed its key (``adapter_key``)."""
    effect = current()
    table = resolve_table(effect, markers)
    marker = marker_id(table.key_prefix, adapter, effect.effect if effect is not None else "-", key)
    check_key_size(table, marker)
    run = _Marked(table, marker, delivery, _fields(effect, adapter, key, marker, delivery), effect)
    return run.execute(adapter, call, not_sent)


def marker_id(key_prefix: str, adapter: str, effect: str, key: str) -> str:
    """``<key_prefix>#effect-marker#<adapter>#<effect>#<key>`` (``effect_keys.form`` on the part after the infix)."""
    return f"{key_prefix}#{MARKER_INFIX}#{effect_keys.form(f'{adapter}#{effect}#{key}')}"


class _Marked:
    """One un-keyed call and its marker."""

    def __init__(self, table: ResolvedTable, marker: str, delivery: str, fields: dict[str, Any], effect: Any) -> None:
        self.table, self.marker, self.delivery, self.fields, self.effect = table, marker, delivery, fields, effect
        self.names = {"#k": table.key_attr, "#e": table.expiry_attr, "#s": "status", "#a": "attempts", "#t": TOKEN_ATTR}
        #: This attempt's token: a refused write that finds it met this attempt's own write (an SDK retry).
        self.token = uuid.uuid4().hex

    def execute(
        self, adapter: str, call: Callable[[], R], not_sent: Callable[[BaseException], bool] | None
    ) -> R | None:
        """Claim or count, then call (or skip); mark done after the call returned."""
        now = int(time.time())
        if self.delivery == AT_MOST_ONCE:
            _, found = self._put_new(adapter, now)
            if found is not None:
                return cast("R | None", self._replay_at_most_once(found))
        else:
            found, attempts = self._attempt(adapter, now)
            if found is not None:
                return cast("R | None", stored_result(found))
            if attempts > 1:
                self._count(names.MSG_EFFECT_REPEATED, names.METRIC_EFFECTS_REPEATED, attempts=attempts)
        try:
            result = call()
        except Exception as error:
            if not_sent is not None and not_sent(error):
                self._release()
            raise
        self._done(result)
        return result

    # --- the writes ---------------------------------------------------------------------------------------------

    def _request(self, condition: str, values: dict[str, Any], **more: Any) -> dict[str, Any]:
        used = f"{condition} {more.get('UpdateExpression', '')}"
        return {
            "TableName": self.table.name,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {k: v for k, v in self.names.items() if k in used},
            "ExpressionAttributeValues": values,
            **more,
        }

    def _item(self, adapter: str, now: int) -> dict[str, Any]:
        item = {
            **self.table.key(self.marker),
            self.table.expiry_attr: {"N": str(now + self.table.expiry_seconds)},
            "status": {"S": PENDING},
            "attempts": {"N": "1"},
            "claimed_at": {"N": str(now)},
            TOKEN_ATTR: {"S": self.token},
            "adapter": {"S": adapter},
            names.FIELD_DELIVERY: {"S": self.delivery},
            names.FIELD_EFFECT_KEY: {"S": self.fields[names.FIELD_EFFECT_KEY]},
        }
        if self.effect is not None:
            item[names.FIELD_EFFECT] = {"S": self.effect.effect}
            if isinstance(self.effect.record_key, str):
                item[names.FIELD_IDEMPOTENCY_KEY] = {"S": self.effect.record_key}
        return item

    def _put_new(self, adapter: str, now: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Put a fresh pending marker (one attempt) unless a live one exists: ``(response, None)`` when it was put
        (a refusal by this attempt's own put, sent again by the SDK, included), ``(None, the live marker)`` when
        not."""
        request = self._request(
            "attribute_not_exists(#k) OR #e < :now",
            {":now": {"N": str(now)}},
            Item=self._item(adapter, now),
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        response, found = self._write("put_item", request)
        if found is not None and _status(found) != DONE and self._own(found):  # done: another attempt completed it
            return {"Attributes": found}, None
        return response, found

    def _own(self, item: dict[str, Any]) -> bool:
        """Whether ``item`` holds this attempt's token: the write that refused ours was ours."""
        return (item.get(TOKEN_ATTR) or {}).get("S") == self.token

    def _attempt(self, adapter: str, now: int) -> tuple[dict[str, Any] | None, int]:
        """Count an attempt: ``(the done marker, 0)`` when the call completed before, else ``(None, attempts)``. A
        first attempt is one put; a later one a failed put (which returns the marker) and an update."""
        for _ in range(3):
            put, found = self._put_new(adapter, now)
            if put is not None:  # absent or expired: a first attempt
                return None, 1
            if found is not None and _status(found) == DONE:
                return found, 0
            request = self._request(
                "attribute_exists(#k) AND #e >= :now AND #s <> :done AND (attribute_not_exists(#t) OR #t <> :token)",
                {
                    ":now": {"N": str(now)},
                    ":done": {"S": DONE},
                    ":pending": {"S": PENDING},
                    ":one": {"N": "1"},
                    ":token": {"S": self.token},
                },
                Key=self.table.key(self.marker),
                UpdateExpression="SET #s = :pending, #t = :token ADD #a :one",
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            response, found = self._write("update_item", request)
            if response is None and found is not None and _status(found) != DONE and self._own(found):
                response = {"Attributes": found}  # the SDK sent the counted update again: counted once
            if response is not None:
                return None, int(response["Attributes"]["attempts"]["N"])
        # Each round lost a race (the marker expired, completed or vanished between the two writes).
        raise MarkerUnavailable(f"marker {self.marker!r} changed under every attempt to count an attempt")

    def _write(self, operation: str, request: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """One conditional write: ``(response, None)`` when it was made, ``(None, the existing item or {})`` when its
        condition failed."""
        try:
            return getattr(self.table.client, operation)(**request), None
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != _CONDITION_FAILED:
                raise MarkerUnavailable(f"{operation} on marker {self.marker!r} failed: {error}") from error
            return None, error.response.get("Item") or self._read()
        except BotoCoreError as error:
            raise MarkerUnavailable(f"{operation} on marker {self.marker!r} failed: {error}") from error

    def _read(self) -> dict[str, Any]:
        """The marker as stored now ({} when gone): for a condition failure that did not return the old item."""
        key = self.table.key(self.marker)
        try:
            item = self.table.client.get_item(TableName=self.table.name, Key=key, ConsistentRead=True)
        except (ClientError, BotoCoreError) as error:
            raise MarkerUnavailable(f"get_item on marker {self.marker!r} failed: {error}") from error
        return cast("dict[str, Any]", item.get("Item") or {})

    def _update(self, condition: str, update: str, values: dict[str, Any]) -> None:
        """A best-effort update: a failure is logged (``effect marker not updated``), never raised."""
        request = self._request(condition, values, Key=self.table.key(self.marker), UpdateExpression=update)
        try:
            self.table.client.update_item(**request)
        except Exception as error:  # noqa: BLE001 - the call's outcome stands; a replay reads the marker as it is
            self._not_updated(error)

    def _done(self, result: Any) -> None:
        values: dict[str, Any] = {":done": {"S": DONE}, ":now": {"N": str(int(time.time()))}}
        update = "SET #s = :done, done_at = :now"
        stored = storable_result(result)
        if stored is not None:
            values[":r"] = {"S": stored}
            update += ", stored_result = :r"
        self._update("attribute_exists(#k)", update, values)

    def _release(self) -> None:
        """Undo the claim or the attempt of a call that provably sent nothing (``not_sent``), only while the marker
        holds this attempt's token: the undo removes it, so an SDK retry of the undo (its first try landed, the
        answer was lost) changes nothing, and neither does an undo after another attempt claimed or counted since.
        A marker that is no longer this attempt's is left as it is, silently."""
        values = {":pending": {"S": PENDING}, ":token": {"S": self.token}}
        condition, key = "#s = :pending AND #t = :token", self.table.key(self.marker)
        if self.delivery == AT_LEAST_ONCE:
            values[":minus"] = {"N": "-1"}
            operation, request = (
                "update_item",
                self._request(condition, values, Key=key, UpdateExpression="REMOVE #t ADD #a :minus"),
            )
        else:
            operation, request = "delete_item", self._request(condition, values, Key=key)
        try:
            getattr(self.table.client, operation)(**request)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != _CONDITION_FAILED:
                self._not_updated(error)  # the claim or the attempt stays: a retry counts it, an upper bound
        except Exception as error:  # noqa: BLE001 - as above
            self._not_updated(error)

    def _not_updated(self, error: BaseException) -> None:
        reason = {names.FIELD_ERROR_TYPE: type(error).__name__, names.FIELD_REASON: f"{error}"[:500]}
        _warn(self.effect, names.MSG_EFFECT_MARKER_NOT_UPDATED, {**self.fields, **reason})

    # --- replays ------------------------------------------------------------------------------------------------

    def _replay_at_most_once(self, found: dict[str, Any]) -> Any:
        status = _status(found)
        if status == DONE:
            return stored_result(found)
        if status != LOST:
            self._count(names.MSG_EFFECT_POSSIBLY_LOST, names.METRIC_EFFECTS_POSSIBLY_LOST)
            # Counted once: later replays find "lost" and skip silently. A kill before this write counts it again.
            self._update("#s = :pending", "SET #s = :lost", {":pending": {"S": PENDING}, ":lost": {"S": LOST}})
        return None

    def _count(self, message: str, metric: str, **extra: Any) -> None:
        _warn(self.effect, message, {**self.fields, **extra})
        metrics = self.effect.metrics if self.effect is not None else None
        if metrics is not None:
            from aws_lambda_powertools.metrics import MetricUnit

            metrics.add_metric(name=metric, unit=MetricUnit.Count, value=1)


# --- helpers ------------------------------------------------------------------------------------------------------


def _fields(effect: EffectCall | None, adapter: str, key: str, marker: str, delivery: str) -> dict[str, Any]:
    return {
        names.FIELD_IDEMPOTENCY_KEY: effect.record_key if effect is not None else key,
        names.FIELD_EFFECT: effect.effect if effect is not None else adapter,
        names.FIELD_EFFECT_KEY: key,
        names.FIELD_EFFECT_MARKER: marker,
        names.FIELD_DELIVERY: delivery,
    }


def _warn(effect: EffectCall | None, message: str, fields: dict[str, Any]) -> None:
    """A WARNING line through the consumer's Logger (flushed: a kill right after must not lose it), else the
    module's standard ``logging`` logger (``effectively_once_runtime.effects.unkeyed``)."""
    logger = effect.logger if effect is not None else None
    if logger is None:
        _LOG.warning(message, extra=fields)
        return
    logger.warning(message, extra=fields)
    logger.registered_handler.flush()


def _status(item: dict[str, Any]) -> str | None:
    return cast("str | None", (item.get("status") or {}).get("S"))


def storable_result(result: Any) -> str | None:
    try:
        text = json.dumps(result, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return text if len(text.encode()) <= MAX_STORED_RESULT_BYTES else None


def stored_result(item: dict[str, Any]) -> Any:
    text = (item.get("stored_result") or {}).get("S")
    return None if text is None else json.loads(text)


def check_key_size(table: ResolvedTable, marker: str) -> None:
    limit = names.DYNAMODB_MAX_PARTITION_KEY_BYTES if table.sort_key_attr is None else DYNAMODB_MAX_SORT_KEY_BYTES
    size = len(marker.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise InvalidEffectCall(
            f"the effect marker id is {size} bytes, more than the {limit} a DynamoDB key holds (Amazon DynamoDB "
            "Developer Guide, Service, account, and table quotas): use a shorter key prefix"
        )


def resolve_table(effect: EffectCall | None, markers: MarkerTable | None) -> ResolvedTable:
    """The explicit ``markers``, else the declaring consumer's idempotency table (``EffectCall.markers``)."""
    table = markers if markers is not None else effect.markers if effect is not None else None
    if table is None:
        raise InvalidEffectCall(
            "an un-keyed effect outside a Consumer's declared effect needs markers=MarkerTable(table_name=..., "
            "key_prefix=...)"
        )
    return ResolvedTable(
        table.table_name,
        table.client or _shared_client(table.table_name),
        table.key_prefix,
        table.expiry_seconds,
        key_attr=table.key_attr,
        expiry_attr=table.expiry_attr,
        sort_key_attr=table.sort_key_attr,
        static_pk_value=table.static_pk_value,
    )


def _shared_client(table_name: str) -> Any:
    """One DynamoDB client per Region for the execution environment (built in the Region of a table ARN)."""
    from ..settings import table_region

    region = table_region("table_name", table_name)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(region)
        if client is None:
            import boto3

            client = _CLIENTS[region] = (
                boto3.client("dynamodb", region_name=region) if region else boto3.client("dynamodb")
            )
        return client
