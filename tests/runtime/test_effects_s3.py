"""The S3 effect adapter (``effects.s3.put_object``, issue 24 item 2) against moto's S3 in process, and its 409 path
with botocore's Stubber (moto never answers 409)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import Stubber
from moto import mock_aws

from effectively_once_runtime.effects import _context, s3
from effectively_once_runtime.errors import InvalidEffectCall, PermanentError

REGION = "us-east-1"
BUCKET = "effects"
KEY = "shop/orders#receipt#order-1"


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A boto3 S3 client on moto in process, with the bucket :data:`BUCKET`."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        c = boto3.client("s3", region_name=REGION)
        c.create_bucket(Bucket=BUCKET)
        yield c


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The adapter's waits before each retry, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(s3, "_sleep", recorded.append)
    return recorded


def _put(client: Any, body: bytes, **options: Any) -> s3.S3Object:
    return s3.put_object(client=client, bucket=BUCKET, body=body, idempotency_key=KEY, **options)


def _in_effect() -> Any:
    return _context.running(_context.EffectCall(record_key="order-1", effect="receipt", effect_key=KEY))


def test_moto_answers_412_to_a_conditional_put_on_an_existing_key(client: Any) -> None:
    # What the adapter's replay path stands on, checked on moto 5.2.5 itself (S3 answers the same).
    client.put_object(Bucket=BUCKET, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=BUCKET, Key="k", Body=b"second", IfNoneMatch="*")

    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=BUCKET, Key="k")["Body"].read() == b"first"


def test_the_first_put_writes_the_object_with_its_hash(client: Any) -> None:
    written = _put(client, b"receipt 1", prefix="receipts/", content_type="text/plain", metadata={"order": "1"})

    stored = client.get_object(Bucket=BUCKET, Key=f"receipts/{KEY}")
    assert written == s3.S3Object(BUCKET, f"receipts/{KEY}", stored["ETag"], None)
    assert stored["Body"].read() == b"receipt 1"
    assert stored["ContentType"] == "text/plain"
    assert stored["Metadata"] == {"order": "1", s3.HASH_METADATA: hashlib.sha256(b"receipt 1").hexdigest()}


def test_a_replay_returns_the_same_object_without_writing(client: Any) -> None:
    first = _put(client, b"receipt 1")
    modified = client.head_object(Bucket=BUCKET, Key=KEY)["LastModified"]
    calls: list[str] = []
    client.meta.events.register("before-call.s3.*", lambda model, **_: calls.append(model.name))

    replay = _put(client, b"receipt 1")

    assert replay == first
    assert calls == ["PutObject", "GetObject"], "refused (412), then read back"
    assert client.head_object(Bucket=BUCKET, Key=KEY)["LastModified"] == modified


def test_a_replay_in_a_versioned_bucket_returns_the_same_version(client: Any) -> None:
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    first = _put(client, b"receipt 1")

    assert first.version_id
    assert _put(client, b"receipt 1") == first
    assert len(client.list_object_versions(Bucket=BUCKET)["Versions"]) == 1


def test_another_body_under_the_same_key_is_a_permanent_error(client: Any) -> None:
    _put(client, b"receipt 1")

    with pytest.raises(s3.S3ContentMismatch) as mismatch:
        _put(client, b"SECRET receipt 2")

    assert isinstance(mismatch.value, PermanentError)
    assert (mismatch.value.bucket, mismatch.value.key) == (BUCKET, KEY)
    assert f"s3://{BUCKET}/{KEY}" in str(mismatch.value)
    assert "SECRET" not in str(mismatch.value), "the message never carries content"
    assert client.get_object(Bucket=BUCKET, Key=KEY)["Body"].read() == b"receipt 1"


@pytest.mark.parametrize(("existing", "same"), [(b"receipt 1", True), (b"other", False)], ids=["same", "other"])
def test_an_object_without_the_hash_is_compared_by_its_body(client: Any, existing: bytes, same: bool) -> None:
    # Written by something else (no hash metadata): the adapter hashes what is there.
    client.put_object(Bucket=BUCKET, Key=KEY, Body=existing)
    etag = client.head_object(Bucket=BUCKET, Key=KEY)["ETag"]

    if same:
        assert _put(client, b"receipt 1") == s3.S3Object(BUCKET, KEY, etag, None)
    else:
        with pytest.raises(s3.S3ContentMismatch):
            _put(client, b"receipt 1")


def test_name_gives_each_call_of_one_effect_its_own_key(client: Any) -> None:
    with _in_effect():
        receipt = _put(client, b"receipt", name="receipt")
        invoice = _put(client, b"invoice", name="invoice")
        with pytest.raises(InvalidEffectCall, match="called twice"):
            _put(client, b"invoice", name="invoice")

    assert (receipt.key, invoice.key) == (f"{KEY}#receipt", f"{KEY}#invoice")
    assert client.get_object(Bucket=BUCKET, Key=f"{KEY}#invoice")["Body"].read() == b"invoice"
    with _in_effect():  # the next execution of the effect (a replay): the same objects
        assert _put(client, b"receipt", name="receipt") == receipt


def test_bad_arguments_are_refused_before_any_call(client: Any) -> None:
    calls: list[str] = []
    client.meta.events.register("before-call.s3.*", lambda model, **_: calls.append(model.name))

    fits = "é" * 498 + "/"  # 997 bytes in UTF-8, + the 27 of KEY: S3's 1,024
    assert len(_put(client, b"x", prefix=fits).key.encode()) == s3.MAX_OBJECT_KEY_BYTES
    with pytest.raises(InvalidEffectCall, match="1025 bytes"):
        _put(client, b"x", prefix="a" + fits)
    with pytest.raises(InvalidEffectCall, match=s3.HASH_METADATA):
        _put(client, b"x", metadata={"Effectively-Once-SHA256": "0" * 64})
    with pytest.raises(InvalidEffectCall, match="idempotency_key"):
        s3.put_object(client=client, bucket=BUCKET, body=b"x", idempotency_key="")
    with pytest.raises(TypeError, match="bytes"):
        _put(client, "text")  # type: ignore[arg-type]

    assert calls == ["PutObject"], "only the key that fits was written"


# --- object_name: the object key as a template (issue 30, item 5) ------------------------------------------------
def test_object_name_names_the_object_by_the_business_key_or_the_effect_key(client: Any) -> None:
    with _in_effect():
        invoice = _put(client, b"invoice", object_name="invoices/{key}.json", name=None)
    with _in_effect():
        receipt = _put(client, b"receipt", object_name="receipts/{effect_key}.json", name="receipt")
    with _in_effect():  # a replay: the same object, nothing written
        assert _put(client, b"invoice", object_name="invoices/{key}.json") == invoice

    assert invoice.key == "invoices/order-1.json", "the record's business key, as the docs' own example names it"
    assert receipt.key == f"receipts/{KEY}#receipt.json"
    assert client.get_object(Bucket=BUCKET, Key="invoices/order-1.json")["Body"].read() == b"invoice"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"object_name": "invoices/{key}.json", "prefix": "x/"}, "prefix= or object_name=, not both"),
        ({"object_name": "invoices/order.json"}, "needs exactly one of {key}"),
        ({"object_name": "i/{key}/{effect_key}.json"}, "needs exactly one of {key}"),
        ({"object_name": "invoices/{key}.json", "name": "invoice"}, "names one object per record"),
    ],
)
def test_object_name_is_refused_before_any_call_when_it_cannot_name_one_object(
    client: Any, options: dict[str, Any], message: str
) -> None:
    with _in_effect(), pytest.raises(InvalidEffectCall, match=message):
        _put(client, b"x", **options)
    assert client.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_object_name_with_the_business_key_needs_a_declared_effect(client: Any) -> None:
    with pytest.raises(InvalidEffectCall, match="has none .*use \\{effect_key\\}"):
        _put(client, b"x", object_name="invoices/{key}.json")
    assert _put(client, b"x", object_name="r/{effect_key}").key == f"r/{KEY}"


# --- the 409 path (AWS only: moto serialises nothing and never answers 409) --------------------------------------
def _stubbed() -> tuple[Any, Stubber]:
    client = boto3.client("s3", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    return client, Stubber(client)


def _put_params(body: bytes) -> dict[str, Any]:
    return {
        "Bucket": BUCKET,
        "Key": KEY,
        "Body": body,
        "IfNoneMatch": "*",
        "Metadata": {s3.HASH_METADATA: hashlib.sha256(body).hexdigest()},
    }


def _conflict(stub: Stubber, body: bytes) -> None:
    stub.add_client_error(
        "put_object",
        service_error_code="ConditionalRequestConflict",
        service_message="A conflicting operation occurred",
        http_status_code=409,
        expected_params=_put_params(body),
    )


def _stored(body: bytes, etag: str = '"e1"') -> dict[str, Any]:
    return {
        "Body": StreamingBody(io.BytesIO(body), len(body)),
        "ETag": etag,
        "Metadata": {s3.HASH_METADATA: hashlib.sha256(body).hexdigest()},
    }


def test_a_409_is_retried_then_the_412_is_read_back(waits: list[float]) -> None:
    client, stub = _stubbed()
    _conflict(stub, b"receipt 1")
    stub.add_client_error(
        "put_object",
        service_error_code="PreconditionFailed",
        http_status_code=412,
        expected_params=_put_params(b"receipt 1"),
    )
    stub.add_response("get_object", _stored(b"receipt 1"), {"Bucket": BUCKET, "Key": KEY})

    with stub:
        result = _put(client, b"receipt 1")
        stub.assert_no_pending_responses()

    assert result == s3.S3Object(BUCKET, KEY, '"e1"', None)
    assert waits == [s3.CONFLICT_RETRY_DELAYS_SECONDS[0]]


def test_a_409_then_another_body_is_the_permanent_error(waits: list[float]) -> None:
    client, stub = _stubbed()
    _conflict(stub, b"receipt 1")
    stub.add_client_error("put_object", service_error_code="PreconditionFailed", http_status_code=412)
    stub.add_response("get_object", _stored(b"the other writer's"), {"Bucket": BUCKET, "Key": KEY})

    with stub, pytest.raises(s3.S3ContentMismatch):
        _put(client, b"receipt 1")


def test_409s_to_the_end_read_back_the_winner_or_raise_a_transient_error(waits: list[float]) -> None:
    attempts = len(s3.CONFLICT_RETRY_DELAYS_SECONDS) + 1
    client, stub = _stubbed()
    for _ in range(attempts):
        _conflict(stub, b"receipt 1")
    stub.add_response("get_object", _stored(b"receipt 1", '"won"'), {"Bucket": BUCKET, "Key": KEY})
    for _ in range(attempts):
        _conflict(stub, b"receipt 1")
    stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404)

    with stub:
        assert _put(client, b"receipt 1").etag == '"won"', "the concurrent writer's object, the same body"
        with pytest.raises(s3.S3WriteConflict) as conflict:
            _put(client, b"receipt 1")
        stub.assert_no_pending_responses()

    assert not isinstance(conflict.value, PermanentError), "transient: SQS redelivers the record"
    assert waits == [*s3.CONFLICT_RETRY_DELAYS_SECONDS] * 2


def test_a_412_whose_object_is_gone_by_the_read_back_writes_again(waits: list[float]) -> None:
    # Deleted (or expired by a lifecycle rule) between the refusal and the read: the key is free again.
    client, stub = _stubbed()
    stub.add_client_error("put_object", service_error_code="PreconditionFailed", http_status_code=412)
    stub.add_client_error("get_object", service_error_code="NoSuchKey", http_status_code=404)
    stub.add_response("put_object", {"ETag": '"again"'}, _put_params(b"receipt 1"))

    with stub:
        assert _put(client, b"receipt 1") == s3.S3Object(BUCKET, KEY, '"again"', None)
    assert waits == [s3.CONFLICT_RETRY_DELAYS_SECONDS[0]]


@pytest.mark.parametrize(
    ("code", "status"), [("AccessDenied", 403), ("NoSuchBucket", 404), ("InternalError", 500), ("SlowDown", 503)]
)
def test_other_errors_are_raised_as_s3_answered_them(code: str, status: int, waits: list[float]) -> None:
    client, stub = _stubbed()
    stub.add_client_error("put_object", service_error_code=code, http_status_code=status)

    with stub, pytest.raises(ClientError) as raised:
        _put(client, b"receipt 1")

    assert raised.value.response["Error"]["Code"] == code
    assert waits == []


# --- each :raises condition of the docstrings (issue 55, item 6b) ---------------------------------------------------
def test_an_empty_name_is_refused_before_any_call(client: Any) -> None:
    with pytest.raises(InvalidEffectCall, match="name must be a non-empty string or None"):
        _put(client, b"x", name="")

    assert client.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0


def test_object_name_with_the_business_key_is_refused_for_a_record_processed_without_one(client: Any) -> None:
    keyless = _context.EffectCall(record_key=None, effect="receipt", effect_key=KEY)

    with _context.running(keyless), pytest.raises(InvalidEffectCall, match="a record without a key"):
        _put(client, b"x", object_name="invoices/{key}.json")

    assert client.list_objects_v2(Bucket=BUCKET).get("KeyCount") == 0
