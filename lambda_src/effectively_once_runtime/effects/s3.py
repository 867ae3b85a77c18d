"""S3: an object written once per effect key (``put_object``). boto3/botocore and the standard library only.

The object key is derived from the effect key (``prefix`` + the adapter key, or an ``object_name`` template naming
the object by the business key or the effect key: :func:`object_key`), the write is ``PutObject`` with
``If-None-Match: *``, and the body's SHA-256 goes with it as user metadata (:data:`HASH_METADATA`). S3 refuses a
conditional put on a key that already holds an object with ``412 Precondition Failed`` (a replay: the effect ran
before and a kill came before its record was completed); the adapter then reads the object back (``GetObject``) and
compares the hash: the same body answers with the stored object, another body is :class:`S3ContentMismatch`
(permanent). Two conditional puts on one key at the same time: S3 lets one through and may answer the other ``409
ConditionalRequestConflict``, "On a 409 failure you should retry the upload"; the adapter retries after
:data:`CONFLICT_RETRY_DELAYS_SECONDS`, then reads back.

Sources: Amazon S3 User Guide, How to prevent object overwrites with conditional writes
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html); Amazon S3 API Reference, PutObject,
``If-None-Match`` (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html); Naming Amazon S3 objects
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..errors import InvalidEffectCall, PermanentError
from ._context import adapter_key, current

#: The adapter's name (``adapter_key``'s ``adapter``, and in error messages).
ADAPTER = "s3.put_object"
#: The user metadata key holding the body's SHA-256 (hex), sent as ``x-amz-meta-effectively-once-sha256``.
HASH_METADATA = "effectively-once-sha256"
#: Longest object key S3 takes: "a maximum length of 1,024 bytes when encoded in UTF-8" (Naming Amazon S3 objects).
MAX_OBJECT_KEY_BYTES = 1024
#: Seconds waited before each retry of a put answered ``409 ConditionalRequestConflict`` (then the object is read
#: back). Short: the other writer's put is under way, and S3 answers the retry 412 once it is done.
CONFLICT_RETRY_DELAYS_SECONDS = (0.05, 0.1, 0.2)

#: The placeholders of ``object_name``: the record's business key, and the key the effect was called with.
KEY_PLACEHOLDER, EFFECT_KEY_PLACEHOLDER = "{key}", "{effect_key}"

_HASH_CHUNK_BYTES = 1024 * 1024
_sleep = time.sleep  # the tests record the waits instead


@dataclass(frozen=True)
class S3Object:
    """The object an effect wrote: the same on a replay.

    :ivar bucket: the bucket name.
    :ivar key: the object key (``prefix`` + the adapter key).
    :ivar etag: the object's ``ETag`` as S3 returns it (quoted).
    :ivar version_id: the object's version id in a versioned bucket, else ``None``.
    """

    bucket: str
    key: str
    etag: str
    version_id: str | None = None


class S3ContentMismatch(PermanentError):
    """The object under the effect's key holds another body than this call's: the same effect key was used for
    different content (a bug in the effect, or another writer on the key). Permanent: every retry would meet the same
    object. The message names the bucket and key, never the content.

    :ivar bucket: the bucket name.
    :ivar key: the object key.
    """

    def __init__(self, bucket: str, key: str) -> None:
        super().__init__(
            f"{ADAPTER}: s3://{bucket}/{key} already holds another body than this call's (its SHA-256 differs): the "
            "same effect key was used for different content"
        )
        self.bucket = bucket
        self.key = key


class S3WriteConflict(Exception):
    """Every put was answered ``409 ConditionalRequestConflict`` (or ``412`` with the object gone by the read-back)
    and no object was found under the key afterwards. Transient: the record is retried (SQS redelivers it).

    :ivar bucket: the bucket name.
    :ivar key: the object key.
    """

    def __init__(self, bucket: str, key: str) -> None:
        super().__init__(
            f"{ADAPTER}: s3://{bucket}/{key}: the conditional put met a concurrent write "
            f"{len(CONFLICT_RETRY_DELAYS_SECONDS) + 1} times and no object was there afterwards; retry the record"
        )
        self.bucket = bucket
        self.key = key


def _checked_key(key: str) -> str:
    size = len(key.encode("utf-8"))
    if size > MAX_OBJECT_KEY_BYTES:
        raise InvalidEffectCall(
            f"{ADAPTER}: the object key is {size} bytes in UTF-8, over S3's {MAX_OBJECT_KEY_BYTES} (Naming Amazon S3 "
            "objects): shorten prefix="
        )
    return key


def object_key(template: str, *, effect_key: str, record_key: Any) -> str:
    """The object key an ``object_name`` template names: its one placeholder filled, ``{key}`` with the record's
    business key (``EffectCall.record_key``) or ``{effect_key}`` with the key the effect was called with (the
    adapter key: with ``name=``, ``<effect key>#<name>``). Every other character is kept as it is. A ``{key}``
    object is one per record: two effects, or two calls with ``name=`` (refused), of one record must not both write
    it, or the second is a replay with another body (:class:`S3ContentMismatch`). The chaos command's ``--effect
    bucket:NAME:TEMPLATE`` takes the same template.

    :raises InvalidEffectCall: not exactly one placeholder; ``{key}`` with no business key (outside a declared effect,
        or a record processed without one).
    """
    found = template.count(KEY_PLACEHOLDER) + template.count(EFFECT_KEY_PLACEHOLDER)
    if found != 1:
        raise InvalidEffectCall(
            f"{ADAPTER}: object_name {template!r} needs exactly one of {KEY_PLACEHOLDER} (the record's business key) "
            f"or {EFFECT_KEY_PLACEHOLDER} (the key the effect was called with)"
        )
    if EFFECT_KEY_PLACEHOLDER in template:
        return template.replace(EFFECT_KEY_PLACEHOLDER, effect_key)
    if not isinstance(record_key, str) or not record_key:
        raise InvalidEffectCall(
            f"{ADAPTER}: object_name {template!r} names the object by the record's business key, and this call has "
            "none (outside a declared effect, or a record without a key): use {effect_key}"
        )
    return template.replace(KEY_PLACEHOLDER, record_key)


def put_object(
    *,
    client: Any,
    bucket: str,
    body: bytes,
    idempotency_key: str,
    name: str | None = None,
    prefix: str = "",
    object_name: str | None = None,
    content_type: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> S3Object:
    """Write ``body`` to ``s3://<bucket>/<prefix><adapter key>`` (or the ``object_name`` template's key) once: the
    first call writes it, a replay (the same key and body) returns the stored object without writing.

    Call it inside a declared effect with the key the effect was handed::

        @consumer.effect
        def store_receipt(order: dict, *, idempotency_key: str) -> S3Object:
            return put_object(client=s3, bucket=BUCKET, body=render(order), idempotency_key=idempotency_key,
                              prefix="receipts/")

    The window: as long as the object stays under its key. A lifecycle expiration or a delete ends it, and a replay
    after that writes the object again. Only the body is compared on a replay: ``content_type`` and ``metadata``
    are written with the first put and not checked afterwards. An object under the key without
    :data:`HASH_METADATA` (written by something else) is compared by hashing its body.

    :param client: a boto3 S3 client (``boto3.client("s3")``); it needs ``s3:PutObject`` and ``s3:GetObject`` on
        the keys.
    :param bucket: the bucket name.
    :param body: the object's content, in memory (PutObject takes at most 5 GB).
    :param idempotency_key: the key the declared effect was called with (at most 128 printable ASCII characters in
        the ``"scoped"`` mode).
    :param name: tells apart two calls in one effect: the second writes under ``<key>#<name>``. :default: ``None``.
    :param prefix: put before the adapter key, for example ``"receipts/"``; with the adapter key, at most
        :data:`MAX_OBJECT_KEY_BYTES` bytes in UTF-8. :default: ``""``.
    :param object_name: the object key as a template instead of ``prefix``: ``"invoices/{key}.json"`` (the
        business key) or ``"receipts/{effect_key}.json"`` (the effect key), :func:`object_key`. :default: ``None``.
    :param content_type: the object's ``Content-Type``. :default: ``None`` (S3's ``binary/octet-stream``).
    :param metadata: more user metadata (``x-amz-meta-*``), not :data:`HASH_METADATA`; S3 takes at most 2 KB of user
        metadata in all (Amazon S3 User Guide, Working with object metadata). :default: ``None``.
    :returns: the stored object (:class:`S3Object`), the same on a replay.
    :raises S3ContentMismatch: the key already holds another body (permanent: the record goes to the DLQ).
    :raises S3WriteConflict: concurrent writes on the key kept answering 409 and nothing was stored (transient).
    :raises InvalidEffectCall: an empty ``idempotency_key`` or ``name``; in one effect, a second call with the same
        ``name``; a key over :data:`MAX_OBJECT_KEY_BYTES` bytes; ``metadata`` naming :data:`HASH_METADATA`; an
        ``object_name`` with ``prefix``, with ``name=`` and ``{key}``, or one :func:`object_key` refuses.
    :raises TypeError: ``body`` is not ``bytes``.
    :raises botocore.exceptions.ClientError: any other S3 error (no such bucket, access denied), as S3 answered it.
    """
    if not isinstance(body, bytes):
        raise TypeError(f"{ADAPTER}: body must be bytes, not {type(body).__name__}")
    extra = dict(metadata or {})
    if any(k.lower() == HASH_METADATA for k in extra):
        raise InvalidEffectCall(f"{ADAPTER}: metadata must not name {HASH_METADATA!r}: the adapter writes it")
    key = _checked_key(_name(idempotency_key, name, prefix, object_name))
    digest = hashlib.sha256(body).hexdigest()
    typed = {} if content_type is None else {"ContentType": content_type}
    request = {"Bucket": bucket, "Key": key, "Body": body, "IfNoneMatch": "*", **typed}
    return _put_once(client, {**request, "Metadata": {**extra, HASH_METADATA: digest}}, digest)


def _name(idempotency_key: str, name: str | None, prefix: str, object_name: str | None) -> str:
    """The object key: ``prefix`` + the adapter key, or the ``object_name`` template filled."""
    if object_name is None:
        return prefix + adapter_key(ADAPTER, idempotency_key, name)
    if prefix:
        raise InvalidEffectCall(f"{ADAPTER}: give prefix= or object_name=, not both (the template holds the whole key)")
    if name is not None and KEY_PLACEHOLDER in object_name:
        raise InvalidEffectCall(
            f"{ADAPTER}: object_name {object_name!r} names one object per record ({KEY_PLACEHOLDER}); with name= "
            f"two calls would write it: use {EFFECT_KEY_PLACEHOLDER}"
        )
    effect = current()
    return object_key(
        object_name,
        effect_key=adapter_key(ADAPTER, idempotency_key, name),
        record_key=effect.record_key if effect is not None else None,
    )


def _put_once(client: Any, request: dict[str, Any], digest: str) -> S3Object:
    """``PutObject`` with ``IfNoneMatch="*"``: the new object, or the one already stored with the same body; a 409
    (another write under way) is retried after ``CONFLICT_RETRY_DELAYS_SECONDS``.

    :raises S3ContentMismatch: the key holds another body. :raises S3WriteConflict: every attempt answered 409.
    """
    bucket, key = request["Bucket"], request["Key"]
    for delay in (*CONFLICT_RETRY_DELAYS_SECONDS, None):
        try:
            written = client.put_object(**request)
        except ClientError as error:
            status = _status(error)
            if status not in (409, 412):
                raise
            if status == 412 and (stored := _read_back(client, bucket, key, digest)) is not None:
                return stored
            if delay is None:
                break
            _sleep(delay)  # 409: the other write is under way; 412 then gone: deleted meanwhile, write again
        else:
            return S3Object(bucket, key, written["ETag"], written.get("VersionId"))
    stored = _read_back(client, bucket, key, digest)
    if stored is None:
        raise S3WriteConflict(bucket, key)
    return stored


def _status(error: Any) -> int | None:
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


def _read_back(client: Any, bucket: str, key: str, digest: str) -> S3Object | None:
    """The object under ``key`` if its body hashes to ``digest``; ``None`` when there is none.

    :raises S3ContentMismatch: it holds another body.
    """
    try:
        response = client.get_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if _status(error) == 404:
            return None
        raise
    stream = response["Body"]
    try:
        stored = (response.get("Metadata") or {}).get(HASH_METADATA)
        if stored is None:  # not written by this adapter: hash what is there
            sha = hashlib.sha256()
            for chunk in stream.iter_chunks(_HASH_CHUNK_BYTES):
                sha.update(chunk)
            stored = sha.hexdigest()
    finally:
        stream.close()
    if stored != digest:
        raise S3ContentMismatch(bucket, key)
    return S3Object(bucket, key, response["ETag"], response.get("VersionId"))
