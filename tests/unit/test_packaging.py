"""Packaging: the `constructs` name is not shadowed, the public API, the Lambda asset and the normaliser."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import constructs
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3_assets as s3_assets

import effectively_once
from effectively_once import _assets
from effectively_once.runtime_layer import runtime_package_dir
from effectively_once.testing import normalize_template

from .helpers import REPO, new_app, new_stack


def test_constructs_resolves_into_site_packages_not_the_project() -> None:
    location = Path(constructs.__file__).resolve()
    assert REPO / "constructs" not in location.parents, location
    assert hasattr(constructs, "Construct")
    assert Path(sysconfig.get_paths()["purelib"]).resolve() in location.parents


def test_project_constructs_folder_has_no_init() -> None:
    # An __init__.py would shadow the `constructs` package (aws/aws-cdk#19301).
    assert not (REPO / "constructs" / "__init__.py").exists()


def test_public_api() -> None:
    assert sorted(effectively_once.__all__) == [
        "AlarmThresholds",
        "AsyncInvocationOptions",
        "EventAlarmThresholds",
        "ExistingQueue",
        "IdempotencyTable",
        "IdempotentEventConsumer",
        "IdempotentQueueConsumer",
        "IdempotentQueueConsumerOptions",
        "PaymentProcessor",
        "ProcessingQueue",
        "ProcessingQueueOptions",
        "RuntimeLayer",
    ]
    assert (Path(effectively_once.__file__).parent / "py.typed").exists()


def test_lambda_source_root_holds_the_payments_package() -> None:
    root = _assets.lambda_source_root()
    assert (root / "payments" / "settings.py").is_file()


def test_sample_asset_holds_the_payments_package_only() -> None:
    # The runtime comes from the RuntimeLayer: a copy in the asset (/var/task) would shadow the layer's.
    app = new_app()
    stack = new_stack(app)
    function = lambda_.Function(
        stack,
        "Sample",
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="payments.handler.lambda_handler",
        code=_assets.payment_function_code(),
    )
    key = stack.resolve((function.node.default_child).code)["s3Key"]  # type: ignore[union-attr]
    asset = Path(app.synth().directory) / f"asset.{key.removesuffix('.zip')}"
    assert sorted(p.name for p in asset.iterdir()) == ["payments"]
    assert (asset / "payments" / "handler.py").is_file()


def test_runtime_package_is_found_where_the_constructs_import_it_from() -> None:
    import effectively_once_runtime.names

    assert runtime_package_dir() == Path(effectively_once_runtime.names.__file__).resolve().parent


def _asset_hash(path: Path) -> str:
    return s3_assets.Asset(new_stack(), "Asset", path=str(path), exclude=_assets.ASSET_EXCLUDES).asset_hash


def test_asset_hash_ignores_byte_code(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    shutil.copytree(_assets.lambda_source_root(), clean, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dirty = tmp_path / "dirty"
    shutil.copytree(clean, dirty)
    (dirty / "payments" / "__pycache__").mkdir()
    (dirty / "payments" / "__pycache__" / "settings.cpython-314.pyc").write_bytes(b"\x00bytecode")
    (dirty / "payments" / "stray.pyc").write_bytes(b"\x00bytecode")
    assert _asset_hash(clean) == _asset_hash(dirty)


def test_normalize_template_replaces_hashes_and_drops_version_metadata() -> None:
    digest = "a" * 64
    template = {
        "Resources": {
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Code": {"S3Key": f"{digest}.zip"}}},
            "CDKMetadata": {"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:deflate64:..."}},
        },
        "Conditions": {"CDKMetadataAvailable": {"Fn::Or": []}},
    }
    assert normalize_template(template) == {
        "Resources": {"Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Code": {"S3Key": "<ASSET_HASH>.zip"}}}}
    }
    assert template["Resources"]["Fn"]["Properties"]["Code"]["S3Key"] == f"{digest}.zip"


def test_testing_helpers_import_without_aws_cdk() -> None:
    probe = "import sys, effectively_once.testing; print('aws_cdk' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO / "constructs"
    )
    assert done.stdout.strip() == "False"
