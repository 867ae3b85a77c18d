"""DynamoDB effect adapters: a conditional put and a transactional write, each answering a replay with what is stored.
boto3 + the standard library only; the caller hands in its own low-level client (``boto3.client("dynamodb")``).

Each item is written with its partition key attribute set to the adapter key (``_context.adapter_key``: the effect's
key, or ``<effect key>#<name>``) under ``attribute_not_exists(<key attribute>)``. The first execution writes it; a
replay (a kill between the write and the record's completion) is refused by the condition and answered with the
stored item, after comparing the attributes the caller says must agree. That holds for as long as the item exists:
there is no window but the item's own lifetime (a TTL attribute, a delete).

Items are given as plain Python values (``str``, ``int``, ``Decimal``, ``bytes``, ``bool``, ``None``, lists, dicts,
sets), serialized with boto3's ``TypeSerializer``, and returned deserialized with its ``TypeDeserializer`` (numbers
come back as ``Decimal``, binary as ``boto3.dynamodb.types.Binary``). Typed attribute values (``{"S": "x"}``) are not
taken: they would be serialized as maps.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from ..errors import InvalidEffectCall, PermanentError
from ._context import adapter_key

PUT_ADAPTER = "dynamodb.put_item"
TRANSACT_ADAPTER = "dynamodb.transact_write"

#: Longest partition key value, in UTF-8 bytes ("Partition key length", Constraints in Amazon DynamoDB:
#: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html).
MAX_PARTITION_KEY_BYTES = 2048
#: Most actions in one ``TransactWriteItems`` or ``TransactGetItems`` call (Amazon DynamoDB API Reference,
#: TransactWriteItems, ``TransactItems``: "Array Members: Minimum number of 1 item. Maximum number of 100 items").
MAX_TRANSACT_ITEMS = 100
#: Longest ``ClientRequestToken`` (Amazon DynamoDB API Reference, TransactWriteItems: "Length Constraints: Minimum
#: length of 1. Maximum length of 36").
TOKEN_CHARS = 36
#: How long DynamoDB answers a repeated ``ClientRequestToken`` itself, in seconds ("A client request token is valid
#: for 10 minutes after the first request that uses it is completed", Amazon DynamoDB API Reference,
#: TransactWriteItems, ``ClientRequestToken``). Past it, the ``attribute_not_exists`` conditions answer the replay.
TOKEN_WINDOW_SECONDS = 600

#: What each ``CancellationReasons`` code of a cancelled ``TransactWriteItems`` says about its action (Amazon DynamoDB
#: API Reference, TransactWriteItems, Errors, ``TransactionCanceledException``: the codes and when DynamoDB returns
#: each). ``absent``: the action was fine (the code ``None``): a keyed put's item is not stored. ``stored``: a
#: condition refused the action (``ConditionalCheckFailed``): a keyed put's item is there, and a condition of the
#: caller's own entries stays transient. ``transient``: the same request may succeed later (another write to the
#: item was in progress; throttling). ``permanent``: DynamoDB refuses the request as it stands, against the items
#: as they are (``ValidationError``: an item grown past 400 KB, a type mismatch, a number overflow;
#: ``ItemCollectionSizeLimitExceeded``): retried unchanged it fails again, so the record goes to the DLQ with its
#: reason rather than round the queue until ``maxReceiveCount``. A code not listed here, or a reason without one, is
#: transient. Only a stored keyed put's reason outranks the others: a replay is answered from the stored items.
ABSENT, STORED, TRANSIENT, PERMANENT = "absent", "stored", "transient", "permanent"
CANCELLATION_REASONS: Mapping[str, str] = MappingProxyType(
    {
        "None": ABSENT,
        "ConditionalCheckFailed": STORED,
        "TransactionConflict": TRANSIENT,
        "ThrottlingError": TRANSIENT,
        "ProvisionedThroughputExceeded": TRANSIENT,
        "ItemCollectionSizeLimitExceeded": PERMANENT,
        "ValidationError": PERMANENT,
    }
)

_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()
_ABSENT = object()


class ItemMismatch(PermanentError):
    """A replay found its key stored with other values: the effect was re-executed with another request under the
    same key (a reused key, or attributes that change between executions and are not in ``volatile=``). The message
    names the key, the table and the differing attribute names, never their values.

    :ivar key: the adapter key (the item's partition key value).
    :ivar table_name: the table of the item.
    :ivar attributes: the names of the differing attributes, sorted (empty when the stored items of a transaction
        do not all exist: the key was written by another request).
    """

    def __init__(self, message: str, *, key: str, table_name: str, attributes: tuple[str, ...]) -> None:
        super().__init__(message)
        self.key = key
        self.table_name = table_name
        self.attributes = attributes


class TokenMismatch(PermanentError):
    """DynamoDB answered ``IdempotentParameterMismatchException``: the transaction's ``ClientRequestToken`` was used
    in the last 10 minutes by another request, and the items that request would have stored are not there."""


class TransactionRefused(PermanentError):
    """DynamoDB refused the transaction as it stands (a ``permanent`` code of :data:`CANCELLATION_REASONS` for a
    keyed put, or for an entry of the caller's own while every keyed put's item is proven absent): the message names
    the key, each such entry's position and table, and its code and message."""


class StoredItemGone(Exception):
    """The condition refused a write because the key existed, but the stored item could not be read back (deleted
    in between, for example by its TTL). Transient: the next delivery writes the item again."""


@dataclass(frozen=True)
class TransactPut:
    """One keyed ``Put`` of ``transact_write``: ``item`` written to ``table_name`` with ``key_attribute`` (a String
    partition key) set to the adapter key, under ``attribute_not_exists(<key_attribute>)``.

    :ivar table_name: the table name or ARN.
    :ivar key_attribute: the table's partition key attribute (type ``S``).
    :ivar item: the attributes to write, plain Python values (without the key attributes).
    :ivar sort_key: ``(attribute, value)`` for a table with a sort key. :default: ``None``: a partition key only.
    :ivar compare: the attributes a replay must agree with. :default: ``None``: every attribute of ``item``.
    :ivar volatile: attributes left out of the comparison (a timestamp). :default: ``()``.
    """

    table_name: str
    key_attribute: str
    item: Mapping[str, Any]
    sort_key: tuple[str, Any] | None = None
    compare: Collection[str] | None = None
    volatile: Collection[str] = ()


def client_request_token(key: str, transact_items: Sequence[Mapping[str, Any]]) -> str:
    """The ``ClientRequestToken`` of ``transact_write``: the first 36 hex digits (``TOKEN_CHARS``) of the SHA-256 of
    the adapter key ``key`` and the canonical ``transact_items`` (the low-level entries as sent: JSON with sorted
    names, the members of ``SS``/``NS``/``BS`` sets sorted, binary values in base64). Two different requests never
    share a token: two stages of one app in one account and Region write other tables under the same effect key, and
    DynamoDB answers a token reused with other parameters ``IdempotentParameterMismatchException``. An identical
    replay keeps its token; a replay that differs (a ``volatile`` timestamp) gets another, and the
    ``attribute_not_exists`` conditions answer it."""
    canonical = json.dumps(
        [_canonical(entry) for entry in transact_items],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=_binary,
    )
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass") + b"\0" + canonical.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:TOKEN_CHARS]


_SET_TYPES = frozenset({"SS", "NS", "BS"})


def _canonical(value: Any) -> Any:
    """``value`` with each DynamoDB set's members in one order (a Python set serializes in hash order, which differs
    between processes)."""
    if isinstance(value, Mapping):
        if len(value) == 1 and next(iter(value)) in _SET_TYPES:
            ((set_type, members),) = value.items()
            return {set_type: sorted(members, key=_sortable)}
        return {name: _canonical(member) for name, member in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(member) for member in value]
    return value


def _sortable(member: Any) -> str:
    return _binary(member) if isinstance(member, bytes | bytearray) else str(member)


def _binary(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    raise TypeError(f"a TransactItems value of type {type(value).__name__} is not a DynamoDB wire value")


def put_item(
    *,
    client: Any,
    table_name: str,
    key_attribute: str,
    item: Mapping[str, Any],
    idempotency_key: str,
    name: str | None = None,
    sort_key: tuple[str, Any] | None = None,
    compare: Collection[str] | None = None,
    volatile: Collection[str] = (),
) -> dict[str, Any]:
    """Write ``item`` once under the adapter key, with ``PutItem`` under ``attribute_not_exists(<key_attribute>)``
    and ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` (a replay costs no extra read).

    :param client: a low-level DynamoDB client (``boto3.client("dynamodb")``).
    :param table_name: the table name or ARN.
    :param key_attribute: the table's partition key attribute (type ``S``): set to the adapter key.
    :param item: the attributes to write, plain Python values, without the key attributes.
    :param idempotency_key: the key the declared effect was called with.
    :param name: this call's name when the effect calls ``put_item`` more than once: the key becomes
        ``<idempotency_key>#<name>``. :default: ``None``.
    :param sort_key: ``(attribute, value)`` for a table with a sort key. :default: ``None``: a partition key only.
    :param compare: the attributes a replay must agree with; each must be in ``item``. :default: ``None``: every
        attribute of ``item`` (attributes another writer added to the stored item later are not compared).
    :param volatile: attributes left out of the comparison (a timestamp, a TTL). :default: ``()``.
    :returns: the item as written (first execution) or as stored (replay), with its key attributes, deserialized.
    :raises ItemMismatch: a replay whose compared attributes differ from the stored item's (permanent).
    :raises StoredItemGone: the key exists but its item could not be read back (transient).
    :raises InvalidEffectCall: the key is reused in this effect (``adapter_key``), over ``MAX_PARTITION_KEY_BYTES``, or
        the arguments disagree (``item`` holds a key attribute, ``compare`` names an attribute not in ``item``).
    :raises TypeError: ``compare`` or ``volatile`` is a string; a value ``TypeSerializer`` refuses (a ``float``).
    :raises botocore.exceptions.ClientError: any other DynamoDB error (throttling, a missing table, an item over
        400 KB): not permanent, so SQS retries it.
    """
    key = adapter_key(PUT_ADAPTER, idempotency_key, name)
    put = TransactPut(table_name, key_attribute, item, sort_key, compare, volatile)
    written = _wire_item(put, key)
    try:
        client.put_item(TableName=table_name, Item=written, **_condition(put))
    except ClientError as error:
        if _code(error) != "ConditionalCheckFailedException":
            raise
        stored = error.response.get("Item") or _get_item(client, put, written)
        return _replayed(PUT_ADAPTER, put, key, written, stored)
    return _plain(written)


def transact_write(
    *, client: Any, items: Sequence[TransactPut | Mapping[str, Any]], idempotency_key: str, name: str | None = None
) -> list[dict[str, Any]]:
    """Write ``items`` in one ``TransactWriteItems`` call, once under the adapter key.

    Each ``TransactPut`` becomes a ``Put`` keyed on the adapter key under ``attribute_not_exists`` (with
    ``ReturnValuesOnConditionCheckFailure=ALL_OLD``); a mapping is a ``TransactWriteItems`` entry in the low-level
    format (``{"Update": {...}}``), sent as given. The call carries ``ClientRequestToken=client_request_token(key,
    entries)``, a hash of the key and the request: for 10 minutes after it completes (``TOKEN_WINDOW_SECONDS``)
    DynamoDB answers an identical repeat as a success without writing; a repeat that differs (a ``volatile``
    timestamp), or one past the window, is refused by the conditions and answered from the stored items. A token
    mismatch (``IdempotentParameterMismatchException``: only another request hashing to the same 144 bits) is
    answered from the stored items too (read with ``TransactGetItems``). Entries given as mappings are never
    compared.

    :param client: a low-level DynamoDB client (``boto3.client("dynamodb")``).
    :param items: at least one ``TransactPut``, at most ``MAX_TRANSACT_ITEMS`` entries in all; no two
        ``TransactPut`` on one item (give them different tables or sort keys).
    :param idempotency_key: the key the declared effect was called with.
    :param name: this call's name when the effect calls ``transact_write`` more than once. :default: ``None``.
    :returns: one item per ``TransactPut``, in order: as written, or as stored on a replay (deserialized).
    :raises ItemMismatch: a replay whose compared attributes differ from a stored item's, or whose keyed items are
        stored only in part: some refused by their condition, the others proven absent (``None``) (permanent).
    :raises TransactionRefused: DynamoDB cancelled the transaction with a ``permanent`` reason of
        :data:`CANCELLATION_REASONS` (``ValidationError``, ``ItemCollectionSizeLimitExceeded``) for a keyed put, or
        for an entry of your own while every keyed item is proven absent (the reason ``None``) (permanent). A
        replay (every keyed item stored) is answered from the stored items whatever your entries met.
    :raises TokenMismatch: ``IdempotentParameterMismatchException`` and the items are not stored (permanent).
    :raises StoredItemGone: the keys exist but their items could not be read back (transient).
    :raises InvalidEffectCall: as ``put_item``; no ``TransactPut``, more than ``MAX_TRANSACT_ITEMS`` entries, two
        ``TransactPut`` on one item.
    :raises TypeError: as ``put_item``; an entry that is neither a ``TransactPut`` nor a mapping.
    :raises botocore.exceptions.ClientError: any other error, not permanent, so SQS retries it:
        ``TransactionCanceledException`` with a ``transient`` reason for a keyed put (``TransactionConflict``,
        throttling, a code :data:`CANCELLATION_REASONS` does not list), even beside a refused one, or with no keyed
        put refused (a condition of your own entries), or ``TransactionInProgressException`` (the same token in
        flight).
    """
    key = adapter_key(TRANSACT_ADAPTER, idempotency_key, name)
    request = _transaction(items, key)
    try:
        client.transact_write_items(
            TransactItems=request.entries, ClientRequestToken=client_request_token(key, request.entries)
        )
    except ClientError as error:
        stored = _replay_items(client, error, request, key)
        pairs = zip(request.puts, stored, strict=True)
        return [_replayed(TRANSACT_ADAPTER, put, key, written, item) for (put, written), item in pairs]
    return [_plain(written) for _, written in request.puts]


# --- requests --------------------------------------------------------------------------------------------------------
def _names(value: Collection[str] | None, what: str) -> set[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"{what} must be a collection of attribute names, not the string {value!r}")
    return set(value)


def _key_of(put: TransactPut, key: str) -> dict[str, Any]:
    """The item's primary key, serialized."""
    if not put.key_attribute:
        raise InvalidEffectCall("key_attribute must be the table's partition key attribute name")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_PARTITION_KEY_BYTES:
        raise InvalidEffectCall(
            f"the key {key[:64]!r}... is over DynamoDB's {MAX_PARTITION_KEY_BYTES}-byte partition key"
        )
    wire = {put.key_attribute: _SERIALIZER.serialize(key)}
    if put.sort_key is not None:
        attribute, value = put.sort_key
        if attribute == put.key_attribute:
            raise InvalidEffectCall(f"sort_key names the partition key attribute {attribute!r}")
        wire[attribute] = _SERIALIZER.serialize(value)
    return wire


def _wire_item(put: TransactPut, key: str) -> dict[str, Any]:
    """``put``'s whole item (key attributes included), serialized, after checking its arguments."""
    wire = _key_of(put, key)
    clashes = sorted(set(put.item) & set(wire))
    if clashes:
        raise InvalidEffectCall(f"item must not hold the key attributes {clashes}: the adapter sets them")
    compare, _ = _names(put.compare, "compare"), _names(put.volatile, "volatile")
    missing = sorted((compare or set()) - set(put.item))
    if missing:
        raise InvalidEffectCall(f"compare names attributes that are not in the item: {missing}")
    wire.update({attribute: _SERIALIZER.serialize(value) for attribute, value in put.item.items()})
    return wire


def _condition(put: TransactPut) -> dict[str, Any]:
    return {
        "ConditionExpression": "attribute_not_exists(#key)",
        "ExpressionAttributeNames": {"#key": put.key_attribute},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


@dataclass
class _Transaction:
    """A ``transact_write`` request: its ``TransactPut`` with their serialized items, every ``TransactItems`` entry in
    order, and the position of each ``TransactPut`` among them."""

    puts: list[tuple[TransactPut, dict[str, Any]]]
    entries: list[dict[str, Any]]
    positions: list[int]


def _transaction(items: Sequence[TransactPut | Mapping[str, Any]], key: str) -> _Transaction:
    request = _Transaction([], [], [])
    targets: set[tuple[str, str]] = set()
    for entry in items:
        if isinstance(entry, TransactPut):
            written = _wire_item(entry, key)
            target = (entry.table_name, repr(sorted(_primary_key(entry, written).items())))
            if target in targets:
                raise InvalidEffectCall(
                    f"two TransactPut write one item of table {entry.table_name!r}: give one a sort_key"
                )
            targets.add(target)
            request.puts.append((entry, written))
            request.positions.append(len(request.entries))
            request.entries.append({"Put": {"TableName": entry.table_name, "Item": written, **_condition(entry)}})
        elif isinstance(entry, Mapping):
            request.entries.append(dict(entry))
        else:
            raise TypeError(f"transact_write takes TransactPut or TransactWriteItems entries, not {type(entry)!r}")
    if not request.puts:
        raise InvalidEffectCall("transact_write needs at least one TransactPut: it is what refuses a replay")
    if len(request.entries) > MAX_TRANSACT_ITEMS:
        raise InvalidEffectCall(
            f"{len(request.entries)} entries: TransactWriteItems takes at most {MAX_TRANSACT_ITEMS}"
        )
    return request


# --- replays ---------------------------------------------------------------------------------------------------------
def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _plain(wire: Mapping[str, Any]) -> dict[str, Any]:
    return {attribute: _DESERIALIZER.deserialize(value) for attribute, value in wire.items()}


def _primary_key(put: TransactPut, written: Mapping[str, Any]) -> dict[str, Any]:
    names = [put.key_attribute] + ([put.sort_key[0]] if put.sort_key is not None else [])
    return {attribute: written[attribute] for attribute in names}


def _get_item(client: Any, put: TransactPut, written: Mapping[str, Any]) -> dict[str, Any]:
    """The stored item, read with a strongly consistent ``GetItem`` (a store that returns no ``ALL_OLD`` item)."""
    response = client.get_item(TableName=put.table_name, Key=_primary_key(put, written), ConsistentRead=True)
    item: dict[str, Any] = response.get("Item") or {}
    return item


def _replayed(
    adapter: str, put: TransactPut, key: str, written: Mapping[str, Any], stored: Mapping[str, Any]
) -> dict[str, Any]:
    """The stored item, if its compared attributes agree with ``written``."""
    if not stored:
        raise StoredItemGone(f"{adapter}: key {key!r} exists in table {put.table_name!r} but its item is gone")
    new, old = _plain(written), _plain(stored)
    compare = _names(put.compare, "compare")
    compared = (set(put.item) if compare is None else compare) - set(put.volatile) - set(_primary_key(put, written))
    differing = tuple(sorted(a for a in compared if new.get(a, _ABSENT) != old.get(a, _ABSENT)))
    if differing:
        raise ItemMismatch(
            f"{adapter}: key {key!r} in table {put.table_name!r} is stored with other values of "
            f"{', '.join(differing)}: a replay must write the same item (list attributes that may differ in "
            "volatile=)",
            key=key,
            table_name=put.table_name,
            attributes=differing,
        )
    return old


def _replay_items(client: Any, error: ClientError, request: _Transaction, key: str) -> list[dict[str, Any]]:
    """The stored items of a refused transaction that is a replay; re-raises ``error`` when it is not one."""
    code = _code(error)
    if code == "IdempotentParameterMismatchException":
        stored = _transact_get(client, request.puts)
        if not all(stored):
            raise TokenMismatch(
                f"{TRANSACT_ADAPTER}: the ClientRequestToken of key {key!r} was used in the last 10 minutes by "
                "another request, whose items are not stored"
            ) from error
        return stored
    reasons = error.response.get("CancellationReasons") or []
    if code != "TransactionCanceledException" or len(reasons) != len(request.entries):
        raise error
    kinds = [CANCELLATION_REASONS.get(reason.get("Code") or "<missing>", TRANSIENT) for reason in reasons]
    keyed = [kinds[position] for position in request.positions]
    if all(kind == STORED for kind in keyed):  # a replay: the items are there, whatever the other entries met
        items = [reasons[position].get("Item") or {} for position in request.positions]
        return items if all(items) else _transact_get(client, request.puts)
    if PERMANENT in keyed or (PERMANENT in kinds and all(kind == ABSENT for kind in keyed)):
        refusals = [
            f"entry {position} ({_entry_table(request.entries[position])}): {reasons[position].get('Code')} "
            f"{reasons[position].get('Message') or ''}".rstrip()
            for position, kind in enumerate(kinds)
            if kind == PERMANENT
        ]
        raise TransactionRefused(
            f"{TRANSACT_ADAPTER}: key {key!r}: DynamoDB refused the transaction as it stands: {'; '.join(refusals)}"
        ) from error
    if TRANSIENT in keyed or STORED not in keyed:  # a conflict or throttling; or a condition of the caller's own
        raise error
    # Some keyed items stored, the others proven absent (only "None" proves that): another request wrote the key.
    tables = sorted({put.table_name for (put, _), kind in zip(request.puts, keyed, strict=True) if kind == STORED})
    raise ItemMismatch(
        f"{TRANSACT_ADAPTER}: key {key!r} is stored in table(s) {tables} but not in all the transaction's "
        "tables: it was written by another request",
        key=key,
        table_name=tables[0],
        attributes=(),
    ) from error


def _entry_table(entry: Mapping[str, Any]) -> str:
    """``<action> on table <name>`` of a ``TransactWriteItems`` entry, for a message."""
    for action, body in entry.items():
        return f"{action} on table {body.get('TableName')!r}" if isinstance(body, Mapping) else action
    return "an empty entry"


def _transact_get(client: Any, puts: list[tuple[TransactPut, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The stored items of ``puts``, read together with ``TransactGetItems`` (serializable, so consistent); ``{}``
    for an item that is not there."""
    gets = [{"Get": {"TableName": put.table_name, "Key": _primary_key(put, written)}} for put, written in puts]
    responses = client.transact_get_items(TransactItems=gets).get("Responses") or [{} for _ in gets]
    return [response.get("Item") or {} for response in responses]
