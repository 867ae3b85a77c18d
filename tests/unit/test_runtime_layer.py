"""RuntimeLayer: the runtime package as a layer (``python/effectively_once_runtime/``, no byte code, a stable asset
hash), built without Docker from the installed package, plus the Powertools layer for the function's architecture
and runtime; one line on a user's function (issue 13, section 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from effectively_once import IdempotencyTable, IdempotentQueueConsumer, ProcessingQueue, RuntimeLayer
from effectively_once.powertools_layer import POWERTOOLS_VERSION
from effectively_once.runtime_layer import runtime_package_dir, stage_runtime_layer

from .helpers import ENV, find_one, new_app

PACKAGE = "python/effectively_once_runtime"


def _user_stack(app: App, *, architecture: lambda_.Architecture, id: str) -> Stack:
    """A user's stack: their own function, the runtime in one line, wired by IdempotentQueueConsumer."""
    stack = Stack(app, id, env=ENV)
    function = lambda_.Function(
        stack,
        "Orders",
        runtime=lambda_.Runtime.PYTHON_3_14,
        architecture=architecture,
        handler="orders.lambda_handler",
        code=lambda_.Code.from_inline("lambda_handler = None\n"),
        layers=RuntimeLayer(stack, "Runtime", architecture=architecture).layers,
    )
    IdempotentQueueConsumer(
        stack,
        "Consumer",
        queue=ProcessingQueue(stack, "Queue"),
        function=function,
        table=IdempotencyTable(stack, "Table"),
    )
    return stack


@pytest.fixture(scope="module")
def synthesized() -> dict[str, Any]:
    app = new_app()
    stacks = {
        "x86_64": _user_stack(app, architecture=lambda_.Architecture.X86_64, id="X86"),
        "arm64": _user_stack(app, architecture=lambda_.Architecture.ARM_64, id="Arm"),
    }
    assembly = app.synth()
    return {"templates": {a: Template.from_stack(s) for a, s in stacks.items()}, "outdir": Path(assembly.directory)}


def _function(template: Template) -> dict[str, Any]:
    return find_one(template, "AWS::Lambda::Function", {"Handler": "orders.lambda_handler"})[1]["Properties"]


def _layer_asset(outdir: Path, template: Template) -> Path:
    (layer,) = template.find_resources("AWS::Lambda::LayerVersion").values()
    key = layer["Properties"]["Content"]["S3Key"]
    return outdir / f"asset.{key.removesuffix('.zip')}"


@pytest.mark.parametrize("architecture", ["x86_64", "arm64"])
def test_function_gets_the_runtime_and_the_powertools_layer(synthesized: dict[str, Any], architecture: str) -> None:
    # The order of a function's Layers is CDK's (sorted by construct path under the recognizeLayerVersion flag);
    # it does not matter here: the two layers hold different packages under /opt/python.
    template = synthesized["templates"][architecture]
    refs = [layer["Ref"] for layer in _function(template)["Layers"]]
    (layer_id,) = template.find_resources("AWS::Lambda::LayerVersion")
    assert layer_id in refs
    (powertools,) = [ref for ref in refs if ref != layer_id]
    assert template.to_json()["Parameters"][powertools] == {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": f"/aws/service/powertools/python/{architecture}/python3.14/{POWERTOOLS_VERSION}",
    }


@pytest.mark.parametrize("architecture", ["x86_64", "arm64"])
def test_runtime_layer_declares_both_architectures_and_the_supported_runtimes(
    synthesized: dict[str, Any], architecture: str
) -> None:
    (layer,) = synthesized["templates"][architecture].find_resources("AWS::Lambda::LayerVersion").values()
    assert layer["Properties"]["CompatibleArchitectures"] == ["x86_64", "arm64"]
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.11", "python3.12", "python3.13", "python3.14"]


def test_user_function_gets_the_runtime_environment(synthesized: dict[str, Any]) -> None:
    variables = _function(synthesized["templates"]["arm64"])["Environment"]["Variables"]
    assert {"IDEMPOTENCY_TABLE_NAME", "IDEMPOTENCY_EXPIRY_SECONDS"} <= set(variables)


def test_layer_asset_is_the_runtime_package_under_python(synthesized: dict[str, Any]) -> None:
    asset = _layer_asset(synthesized["outdir"], synthesized["templates"]["x86_64"])
    source = runtime_package_dir()
    shipped = sorted(p.relative_to(asset / PACKAGE).as_posix() for p in (asset / PACKAGE).rglob("*") if p.is_file())
    expected = sorted(
        p.relative_to(source).as_posix()
        for p in source.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    assert {"__init__.py", "names.py", "consumer.py"} <= set(shipped)
    assert shipped == expected
    assert sorted(p.name for p in asset.iterdir()) == ["python"], "only python/ (Lambda puts /opt/python on sys.path)"
    for name in expected:
        assert (asset / PACKAGE / name).read_bytes() == (source / name).read_bytes()


def test_both_stacks_share_one_layer_asset(synthesized: dict[str, Any]) -> None:
    keys = {
        json.dumps(t.find_resources("AWS::Lambda::LayerVersion")[k]["Properties"]["Content"]["S3Key"])
        for t in synthesized["templates"].values()
        for k in t.find_resources("AWS::Lambda::LayerVersion")
    }
    assert len(keys) == 1


def _copy_package(tmp_path: Path) -> Path:
    copy = tmp_path / "effectively_once_runtime"
    shutil.copytree(runtime_package_dir(), copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return copy


def test_staging_leaves_out_byte_code_and_keeps_the_hash(tmp_path: Path) -> None:
    clean = _copy_package(tmp_path / "clean")
    dirty = _copy_package(tmp_path / "dirty")
    (dirty / "__pycache__").mkdir()
    (dirty / "__pycache__" / "names.cpython-314.pyc").write_bytes(b"\x00bytecode")
    (dirty / "stray.pyc").write_bytes(b"\x00bytecode")
    staged_clean, staged_dirty = stage_runtime_layer(clean), stage_runtime_layer(dirty)
    assert staged_clean == staged_dirty, "the staging folder is named after the content, byte code excluded"
    assert not [p for p in staged_dirty.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    assert (staged_dirty / PACKAGE / "names.py").is_file()


def test_staging_follows_a_source_change_and_repairs_an_altered_folder(tmp_path: Path) -> None:
    source = _copy_package(tmp_path)
    before = stage_runtime_layer(source)
    (source / "names.py").write_text((source / "names.py").read_text() + "\n# changed\n")
    after = stage_runtime_layer(source)
    assert after != before and (after / PACKAGE / "names.py").read_text().endswith("# changed\n")
    (after / PACKAGE / "names.py").write_text("tampered = True\n")
    again = stage_runtime_layer(source)
    assert (again / PACKAGE / "names.py").read_bytes() == (source / "names.py").read_bytes()


def test_fails_on_a_folder_that_is_not_the_package(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="has no __init__.py"):
        stage_runtime_layer(tmp_path)


@pytest.mark.parametrize("region", ["cn-north-1", "us-gov-west-1"])
def test_fails_in_unserved_regions_naming_powertools_layer(region: str) -> None:
    stack = Stack(new_app(), "Stack", env=Environment(account="123456789012", region=region))
    with pytest.raises(ValueError, match=rf"^powertools_layer must be given in region {region} "):
        RuntimeLayer(stack, "Runtime", architecture=lambda_.Architecture.ARM_64)


def test_given_powertools_layer_is_used_in_china() -> None:
    stack = Stack(new_app(), "Stack", env=Environment(account="123456789012", region="cn-north-1"))
    arn = "arn:aws-cn:lambda:cn-north-1:498634801083:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:37"
    given = lambda_.LayerVersion.from_layer_version_arn(stack, "Powertools", arn)
    runtime = RuntimeLayer(stack, "Runtime", architecture=lambda_.Architecture.ARM_64, powertools_layer=given)
    assert runtime.layers == [given, runtime.layer]


def test_fails_on_a_runtime_the_layer_does_not_serve() -> None:
    with pytest.raises(ValueError, match=r"^runtime must be one of python3.11, python3.12, python3.13, python3.14"):
        RuntimeLayer(Stack(new_app(), "Stack"), "Runtime", runtime=lambda_.Runtime.PYTHON_3_10)


def test_fails_on_an_architecture_lambda_does_not_offer() -> None:
    with pytest.raises(ValueError, match=r"^architecture must be x86_64 or arm64"):
        RuntimeLayer(Stack(new_app(), "Stack"), "Runtime", architecture=lambda_.Architecture.custom("riscv64"))


def test_cdk_rejects_a_function_on_another_python_than_the_powertools_layer() -> None:
    stack = Stack(new_app(), "Stack")
    layers = RuntimeLayer(stack, "Runtime", runtime=lambda_.Runtime.PYTHON_3_14).layers
    with pytest.raises(RuntimeError, match="incompatible with this layer"):
        lambda_.Function(
            stack,
            "Fn",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="orders.lambda_handler",
            code=lambda_.Code.from_inline("x = 1\n"),
            layers=layers,
        )
