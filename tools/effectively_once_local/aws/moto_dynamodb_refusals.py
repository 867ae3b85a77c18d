"""DynamoDB requests the local AWS refuses, as AWS does: three fixes for moto
:data:`.moto_patches.REQUIRED_MOTO_VERSION`'s DynamoDB, applied by :func:`.moto_patches.apply` (the local AWS's
server) and by the runtime tests' in-process moto (``tests/runtime/conftest.py``), all three through
:func:`apply_dynamodb_refusals`. docs/local-aws-limits.md lists every rule, with the ones moto already refuses.

Fixed (moto 5.2.5), ``BatchWriteItem`` (:func:`batch_write_item_checks`, docs/moto-bugs.md, reports 21 and 22):
moto writes a batch of any length (AWS: at most 25 requests in all, each table's list 1 to 25); it compares whole
put items, not their keys, so two puts of one key with other attributes, or a put and a delete of one key, both run
(AWS refuses the batch: "Provided list of item keys contains duplicates"), while one key written to two tables is
refused (AWS accepts it); and it writes the puts before an oversized one is refused (AWS refuses the batch, writing
nothing).

Fixed (moto 5.2.5), ``TransactWriteItems``' ``ClientRequestToken`` (:func:`client_request_tokens`, report 23): moto
ignores it. AWS answers a repeat of a successful transaction's token, for 10 minutes after it completed, as a
success that writes nothing when the request is the same, and ``IdempotentParameterMismatchException`` when it is not.

Fixed (moto 5.2.5), item sizes (:func:`item_sizes_as_aws_counts`, report 24): moto counts a number by its text,
lists and maps without their overhead, an attribute an update replaces twice, and stops at 405,000 bytes; a nested
``SET`` that grows an item is never checked, and an update refused for its size keeps the actions before the refused
one. AWS counts as :func:`aws_size` does, refuses an item over :data:`MAX_ITEM_BYTES`, and an update that would make
one changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, InvalidOperation
from functools import wraps
from typing import Any

from .moto_locking import DYNAMODB_ITEM_LOCK

#: The most requests one ``BatchWriteItem`` takes, over all its tables ("There are more than 25 requests in the
#: batch", Amazon DynamoDB API Reference, BatchWriteItem,
#: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchWriteItem.html).
BATCH_WRITE_MAX_REQUESTS = 25
#: AWS's messages for a batch too long: one table's list (the ``RequestItems`` constraint, as public reports quote it:
#: boto/boto3#483, dtan4/valec#46; abridged: AWS prints the request's value after "Value", ``Value '{t=[...]}'``, which
#: is left out here), and the tables together (mapbox/cardboard#39, zio/zio-dynamodb#77).
BATCH_LIST_LENGTH_MESSAGE = (
    "1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy "
    "constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal "
    "to 1]"
)
BATCH_TOO_MANY_MESSAGE = "Too many items requested for the BatchWriteItem call"
#: AWS's message for two requests of one batch on one item (mirrorfm/core#8, boto/boto3#605).
BATCH_DUPLICATES_MESSAGE = "Provided list of item keys contains duplicates"
#: How long a successful transaction's ``ClientRequestToken`` is remembered, in seconds ("A client request token is
#: valid for 10 minutes after the first request that uses it is completed", Amazon DynamoDB API Reference,
#: TransactWriteItems, https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
TOKEN_WINDOW_SECONDS = 600
#: The largest item, in bytes as :func:`aws_size` counts them: 400 KB ("Service, account, and table quotas in Amazon
#: DynamoDB", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html), 400 x 1,024
#: bytes (moto's own note: "the actual limit is between 409 and 410KB"; dynalite, built against DynamoDB: 409600).
MAX_ITEM_BYTES = 400 * 1024

_MARK = "__effectively_once_refusal__"
_TOKENS = "_effectively_once_client_request_tokens"  # on each DynamoDB backend: token -> (request, completed, answer)
_clock = time.monotonic  # when a transaction completed (tests set it)
_whole_update = threading.local()  # .active: an update expression runs; its size is checked when it ends


def _replace(cls: type, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Set ``cls.name`` to ``make(cls.name)`` once: a second call finds its mark and changes nothing."""
    current = getattr(cls, name)
    marks = set()
    function = current
    while function is not None:
        marks.add(getattr(function, _MARK, None))
        function = getattr(function, "__wrapped__", None)
    if make.__name__ in marks:
        return
    replacement = make(current)
    setattr(replacement, _MARK, make.__name__)
    setattr(cls, name, replacement)


# --- item sizes -------------------------------------------------------------------------------------------------------
def _number_bytes(text: str) -> int:
    """A number's size: 1 byte per two significant digits, plus 1 (leading and trailing zeros trimmed)."""
    try:
        digits = "".join(map(str, Decimal(text).as_tuple().digits)).strip("0")
    except (InvalidOperation, TypeError, ValueError):
        return len(str(text).encode("utf-8"))
    return (len(digits) + 1) // 2 + 1


def _binary_bytes(value: Any) -> int:
    """A binary value's raw bytes (moto keeps it as bytes, or as the base64 text it was sent as)."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, TypeError, ValueError):
        return len(str(value).encode("utf-8"))


def _utf8(text: Any) -> int:
    return len(str(text).encode("utf-8", "surrogatepass"))


def aws_size(value: Any) -> int:
    """The size of one attribute value (a moto ``DynamoType``, or the wire form ``{"S": "x"}``), without its name, as
    AWS counts it (Amazon DynamoDB Developer Guide, "DynamoDB item sizes and formats",
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html): a string its
    UTF-8 bytes, a number 1 byte per two significant digits plus 1, a binary its raw bytes, a null or a Boolean 1, a
    set the sum of its members, a list or a map 3 bytes plus, per element, 1 byte and the element's size (a map's
    element with its name's UTF-8 bytes)."""
    kind, raw = _typed(value)
    if kind == "S":
        return _utf8(raw)
    if kind == "N":
        return _number_bytes(raw)
    if kind == "B":
        return _binary_bytes(raw)
    if kind == "SS":
        return sum(_utf8(member) for member in raw)
    if kind == "NS":
        return sum(_number_bytes(member) for member in raw)
    if kind == "BS":
        return sum(_binary_bytes(member) for member in raw)
    if kind == "L":
        return 3 + sum(1 + aws_size(element) for element in raw)
    if kind == "M":
        return 3 + sum(1 + _utf8(name) + aws_size(element) for name, element in raw.items())
    return 1  # BOOL, NULL


def _typed(value: Any) -> tuple[str, Any]:
    """``(type, value)`` of a ``DynamoType`` or a wire value; anything else counted as its text (as moto does)."""
    if isinstance(value, Mapping) and len(value) == 1:
        ((kind, raw),) = value.items()
        return str(kind), raw
    if hasattr(value, "type") and hasattr(value, "value"):
        return str(value.type), value.value
    return "S", str(value)


def item_bytes(attributes: Iterable[tuple[str, Any]]) -> int:
    """An item's size: each attribute's name (UTF-8 bytes) and value (:func:`aws_size`)."""
    return sum(_utf8(name) + aws_size(value) for name, value in attributes)


def _size_as_aws_counts(_size: Callable[..., int]) -> Callable[..., int]:
    @wraps(_size)
    def size(self: Any) -> int:
        return aws_size(self)

    return size


def _setitem_within_the_limit(setitem: Callable[..., None]) -> Callable[..., None]:
    """``LimitedSizeDict.__setitem__`` that refuses an item over :data:`MAX_ITEM_BYTES` (the attribute it replaces
    not counted), except while an update expression runs: :func:`_update_as_a_whole` checks the item it leaves."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge

    @wraps(setitem)
    def set_attribute(self: Any, key: str, value: Any) -> None:
        if not getattr(_whole_update, "active", False):
            others = item_bytes((name, held) for name, held in self.items() if name != key)
            if others + item_bytes([(key, value)]) > MAX_ITEM_BYTES:
                raise ItemSizeTooLarge
        dict.__setitem__(self, key, value)

    return set_attribute


def _update_as_a_whole(execute: Callable[..., None]) -> Callable[..., None]:
    """``UpdateExpressionExecutor.execute`` that checks the size of the item the whole expression leaves, and puts
    the item back as it was when that is too large, or when an action fails (moto's ``update_item`` answers
    ``ItemSizeTooLarge`` with ``ItemSizeToUpdateTooLarge``)."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge

    @wraps(execute)
    def execute_whole(self: Any, node: Any = None) -> None:
        if node is not None or getattr(_whole_update, "active", False):
            return execute(self, node)
        attributes = self.item.attrs
        before = {name: copy.deepcopy(value) for name, value in attributes.items()}
        _whole_update.active = True
        try:
            execute(self)
            if item_bytes(attributes.items()) > MAX_ITEM_BYTES:
                raise ItemSizeTooLarge
        except Exception:
            dict.clear(attributes)
            dict.update(attributes, before)
            raise
        finally:
            _whole_update.active = False
        return None

    return execute_whole


def item_sizes_as_aws_counts() -> None:
    """Count item sizes as AWS does and refuse an item over :data:`MAX_ITEM_BYTES`; a second call changes nothing.

    moto 5.2.5: ``DynamoType.size`` counts a number's text (``"1000"``: 4 bytes; AWS: 2) and a list or map without
    its 3 bytes and 1 per element; ``LimitedSizeDict.__setitem__`` counts the attribute it replaces too and refuses
    above 405,000 bytes; a nested ``SET`` (``m.x = :v``) never reaches it; an update refused midway keeps its earlier
    actions. The patch counts with :func:`aws_size`, checks the item an update expression leaves, as a whole, and
    puts it back when it is refused. docs/moto-bugs.md, report 24; tests: ``test_item_sizes_are_counted_as_aws_counts``,
    ``test_an_update_is_checked_as_a_whole_and_a_refused_one_changes_nothing``."""
    from moto.dynamodb.models.dynamo_type import DynamoType, LimitedSizeDict
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor

    _replace(DynamoType, "size", _size_as_aws_counts)
    _replace(LimitedSizeDict, "__setitem__", _setitem_within_the_limit)
    _replace(UpdateExpressionExecutor, "execute", _update_as_a_whole)


# --- BatchWriteItem ---------------------------------------------------------------------------------------------------
def _check_batch_lengths(request_items: Mapping[str, list[Any]]) -> None:
    from moto.dynamodb.exceptions import MockValidationException

    if any(not 1 <= len(requests) <= BATCH_WRITE_MAX_REQUESTS for requests in request_items.values()):
        raise MockValidationException(BATCH_LIST_LENGTH_MESSAGE)
    if sum(len(requests) for requests in request_items.values()) > BATCH_WRITE_MAX_REQUESTS:
        raise MockValidationException(BATCH_TOO_MANY_MESSAGE)


def _key_part(value: Any) -> Any:
    """One key attribute's value, comparable (``{"N": "1.0"}`` and ``{"N": "1"}`` are one number)."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return repr(value)
    kind, raw = _typed(value)
    if kind == "N":
        try:
            return kind, Decimal(raw).normalize()
        except (InvalidOperation, TypeError, ValueError):
            return kind, raw
    return kind, bytes(raw) if isinstance(raw, bytearray) else raw


def _check_batch_requests(backend: Any, request_items: Mapping[str, list[Any]]) -> None:
    """Refuse two requests on one item (of one table), and a put of an item over :data:`MAX_ITEM_BYTES`."""
    from moto.dynamodb.exceptions import ItemSizeTooLarge, MockValidationException

    seen: set[tuple[Any, ...]] = set()
    for table_name, requests in request_items.items():
        table = backend.get_table(table_name)
        names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        for request in requests:
            put, delete = request.get("PutRequest"), request.get("DeleteRequest")
            attributes = (put or {}).get("Item") or (delete or {}).get("Key") or {}
            target = (table.name, *(_key_part(attributes.get(name)) for name in names))
            if target in seen:
                raise MockValidationException(BATCH_DUPLICATES_MESSAGE)
            seen.add(target)
            if put and item_bytes(attributes.items()) > MAX_ITEM_BYTES:
                raise ItemSizeTooLarge


def _checked_batch_write(batch_write_item: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(batch_write_item)
    def checked(self: Any) -> Any:
        request_items = self.body.get("RequestItems") or {}
        _check_batch_lengths(request_items)
        _check_batch_requests(self.dynamodb_backend, request_items)
        # moto's own duplicate check compares whole put items across tables: the keys were checked above.
        self._contains_duplicates = lambda keys: False
        return batch_write_item(self)

    return checked


def batch_write_item_checks() -> None:
    """Refuse a ``BatchWriteItem`` as AWS does before writing anything; a second call changes nothing.

    moto 5.2.5: ``DynamoHandler.batch_write_item`` takes any number of requests; it refuses two puts only when their
    whole items are equal, two deletes of one key, and one key written to two tables, never a put and a delete of one
    key; and it writes the puts one by one, so an oversized one is refused after the ones before it were written. The
    patch checks the lengths (:data:`BATCH_WRITE_MAX_REQUESTS`), the keys per table and the items' sizes first.
    docs/moto-bugs.md, reports 21 and 22; tests: ``test_a_batch_write_of_more_than_25_requests_is_refused``,
    ``test_two_requests_on_one_item_are_refused``, ``test_one_key_in_two_tables_is_accepted``."""
    from moto.dynamodb.responses import DynamoHandler

    _replace(DynamoHandler, "batch_write_item", _checked_batch_write)


# --- ClientRequestToken -----------------------------------------------------------------------------------------------
def _idempotent_parameter_mismatch() -> Exception:
    from moto.dynamodb.exceptions import ERROR_TYPE_PREFIX, DynamodbException

    return DynamodbException(
        ERROR_TYPE_PREFIX + "IdempotentParameterMismatchException",
        "DynamoDB rejected the request because you retried a request with a different payload but with an "
        "idempotent token that was already used.",
    )


def _remembered(backend: Any) -> OrderedDict[str, tuple[dict[str, Any], float, Any]]:
    """The backend's tokens still in their window, oldest first (the older ones are forgotten here)."""
    tokens: OrderedDict[str, tuple[dict[str, Any], float, Any]] = backend.__dict__.setdefault(_TOKENS, OrderedDict())
    now = _clock()
    while tokens and now - next(iter(tokens.values()))[1] > TOKEN_WINDOW_SECONDS:
        tokens.popitem(last=False)
    return tokens


def _idempotent_transaction(transact_write_items: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(transact_write_items)
    def transact(self: Any) -> Any:
        token = self.body.get("ClientRequestToken")
        if token is None:
            return transact_write_items(self)
        request = {name: value for name, value in self.body.items() if name != "ClientRequestToken"}
        with DYNAMODB_ITEM_LOCK:  # a repeat waits for the first to complete
            tokens = _remembered(self.dynamodb_backend)
            if token in tokens:
                first, _, answer = tokens[token]
                if first != request:
                    raise _idempotent_parameter_mismatch()
                return answer
            answer = transact_write_items(self)
            tokens[token] = (request, _clock(), answer)
            return answer

    return transact


def client_request_tokens() -> None:
    """Answer a ``TransactWriteItems`` that repeats a ``ClientRequestToken`` as AWS does; a second call changes
    nothing.

    moto 5.2.5: ``DynamoHandler.transact_write_items`` ignores the token: a repeat runs again (its conditions then
    refuse it, or an ``ADD`` counts twice), and a repeat with another request runs too. The patch remembers each
    successful transaction's token and request on the backend for :data:`TOKEN_WINDOW_SECONDS` from its completion:
    within it, the same request is answered as the first was without writing, another request with
    ``IdempotentParameterMismatchException`` (HTTP 400); a transaction that failed leaves its token free.
    docs/moto-bugs.md, report 23; tests: ``test_a_token_reused_with_another_request_is_refused``,
    ``test_a_token_reused_with_the_same_request_writes_nothing``."""
    from moto.dynamodb.responses import DynamoHandler

    _replace(DynamoHandler, "transact_write_items", _idempotent_transaction)


def apply_dynamodb_refusals() -> None:
    """:func:`batch_write_item_checks`, :func:`client_request_tokens` and :func:`item_sizes_as_aws_counts`; a second
    call changes nothing."""
    batch_write_item_checks()
    client_request_tokens()
    item_sizes_as_aws_counts()
