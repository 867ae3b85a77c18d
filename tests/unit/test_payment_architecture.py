"""PaymentProcessor's ``architecture`` (arm64 by default, x86_64 possible) and RuntimeLayer's architecture check:
the function and the Powertools layer it gets are built for one architecture (issue 15, section 3)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from effectively_once import PaymentProcessor, RuntimeLayer
from effectively_once.powertools_layer import POWERTOOLS_VERSION

from .helpers import ENV, inline_function, new_app, new_stack


@pytest.fixture(scope="module")
def processors() -> dict[str, Any]:
    stack = new_stack()
    built = {
        "default": PaymentProcessor(stack, "Default"),
        "x86_64": PaymentProcessor(stack, "X86", architecture=lambda_.Architecture.X86_64),
        "arm64": PaymentProcessor(stack, "Arm", architecture=lambda_.Architecture.ARM_64),
    }
    return {"stack": stack, "processors": built, "template": Template.from_stack(stack).to_json()}


def _function_and_layer_parameter(processors: dict[str, Any], kind: str) -> tuple[dict[str, Any], str]:
    stack, template = processors["stack"], processors["template"]
    function = processors["processors"][kind].function
    props = template["Resources"][stack.resolve(function.function_name)["Ref"]]["Properties"]
    (parameter,) = [
        template["Parameters"][layer["Ref"]] for layer in props["Layers"] if layer["Ref"] in template["Parameters"]
    ]
    return props, parameter["Default"]


@pytest.mark.parametrize(("kind", "architecture"), [("default", "arm64"), ("arm64", "arm64"), ("x86_64", "x86_64")])
def test_function_and_its_powertools_layer_follow_the_architecture(
    processors: dict[str, Any], kind: str, architecture: str
) -> None:
    props, parameter = _function_and_layer_parameter(processors, kind)

    assert props["Architectures"] == [architecture]
    assert parameter == f"/aws/service/powertools/python/{architecture}/python3.14/{POWERTOOLS_VERSION}"
    assert processors["processors"][kind].runtime_layer.architecture.name == architecture


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("arm64", r"^architecture must be a lambda_.Architecture \(X86_64 or ARM_64\), but 'arm64' was given"),
        (lambda_.Architecture.custom("riscv64"), r"^architecture must be x86_64 or arm64 .*'riscv64' was given"),
        (None, r"^architecture must be a lambda_.Architecture"),
    ],
)
def test_fails_on_an_architecture_that_is_not_arm64_or_x86_64(value: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        PaymentProcessor(new_stack(), "Payments", architecture=value)


def _function(stack: Stack, id: str, layers: list[lambda_.ILayerVersion], **props: Any) -> lambda_.Function:
    return inline_function(stack, id, runtime=lambda_.Runtime.PYTHON_3_14, layers=layers, **props)


def test_synth_fails_when_a_function_runs_on_another_architecture_than_its_runtime_layer() -> None:
    app = new_app()
    stack = Stack(app, "Mismatch", env=ENV)
    x86 = RuntimeLayer(stack, "RuntimeX86")  # Lambda's default, x86_64
    arm = RuntimeLayer(stack, "RuntimeArm", architecture=lambda_.Architecture.ARM_64)
    _function(stack, "ArmOnX86Layer", x86.layers, architecture=lambda_.Architecture.ARM_64)
    _function(stack, "DefaultOnArmLayer", arm.layers)  # no architecture: x86_64
    _function(stack, "Matching", arm.layers, architecture=lambda_.Architecture.ARM_64)

    with pytest.raises(RuntimeError, match="Validation failed") as raised:
        app.synth()

    text = str(raised.value)
    assert (
        "architecture of RuntimeLayer Mismatch/RuntimeX86 must be the architecture of every function using its "
        "Powertools layer (Powertools builds one layer per architecture), and function Mismatch/ArmOnX86Layer runs "
        "on arm64: give it a RuntimeLayer with architecture=lambda_.Architecture.ARM_64, but 'x86_64' was given"
    ) in text
    assert "function Mismatch/DefaultOnArmLayer runs on x86_64" in text
    assert "Mismatch/Matching" not in text


def test_a_given_powertools_layer_is_not_checked() -> None:
    app = new_app()
    stack = Stack(app, "Given", env=ENV)
    arn = "arn:aws:lambda:us-east-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:1"
    given = lambda_.LayerVersion.from_layer_version_arn(stack, "Powertools", arn)
    runtime = RuntimeLayer(stack, "Runtime", powertools_layer=given)  # x86_64, but the layer is the user's
    _function(stack, "Arm", runtime.layers, architecture=lambda_.Architecture.ARM_64)

    app.synth()  # no validation error
