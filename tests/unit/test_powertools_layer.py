"""The Powertools layer in every partition: resolved at deploy time from Powertools' public SSM parameter for the
pinned release where Powertools publishes one, a synth error naming ``powertools_layer`` where it does not, and
nothing built on an assumed ``aws`` partition (issue 12, section 1)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk import Environment, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from aws_cdk.region_info import RegionInfo

from effectively_once import PaymentProcessor
from effectively_once.limits import POWERTOOLS_SSM_REGIONS
from effectively_once.payment_processor import PAYMENT_ARCHITECTURE, PAYMENT_RUNTIME
from effectively_once.powertools_layer import (
    POWERTOOLS_VERSION,
    powertools_layer_parameter_name,
    public_powertools_layer,
)

from .helpers import new_app

ACCOUNT = "123456789012"
X86 = f"/aws/service/powertools/python/x86_64/python3.14/{POWERTOOLS_VERSION}"
ARM = f"/aws/service/powertools/python/arm64/python3.14/{POWERTOOLS_VERSION}"
#: What Powertools' docs list for cn-north-1 (account 498634801083): the user's own pin in that partition.
CHINA_LAYER = "arn:aws-cn:lambda:cn-north-1:498634801083:layer:AWSLambdaPowertoolsPythonV3-python314-arm64:37"


def _stack(region: str | None, id: str = "Stack") -> Stack:
    env = Environment(account=ACCOUNT, region=region) if region else None
    return Stack(new_app(), id, env=env)


def _layers(template: Template) -> list[Any]:
    """The function's layers but the runtime's (a LayerVersion of the stack, RuntimeLayer): Powertools'."""
    (function,) = template.find_resources("AWS::Lambda::Function").values()
    runtime = [{"Ref": id} for id in template.find_resources("AWS::Lambda::LayerVersion")]
    assert len(runtime) == 1 and runtime[0] in function["Properties"]["Layers"]
    return [layer for layer in function["Properties"]["Layers"] if layer not in runtime]


def _ssm_parameter(template: Template, ref: Any) -> dict[str, Any]:
    return template.to_json()["Parameters"][ref["Ref"]]


def _literal_partitions(template: Template) -> set[str]:
    """Every partition written as a literal ARN prefix anywhere in the template."""
    return set(re.findall(r'"arn:(aws[a-z-]*):', json.dumps(template.to_json())))


@pytest.fixture(scope="module")
def agnostic() -> Template:
    stack = Stack(new_app(), "Agnostic")  # no env: account, region and partition unknown until deploy
    PaymentProcessor(stack, "Payments")
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def china_with_layer() -> Template:
    stack = _stack("cn-north-1", "China")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Powertools", CHINA_LAYER)
    PaymentProcessor(stack, "Payments", powertools_layer=layer)
    return Template.from_stack(stack)


def test_us_east_1_layer_is_the_pinned_release_for_the_function_architecture_and_runtime() -> None:
    stack = _stack("us-east-1")
    processor = PaymentProcessor(stack, "Payments")
    template = Template.from_stack(stack)
    props = template.to_json()["Resources"][stack.resolve(processor.function.function_name)["Ref"]]["Properties"]
    (layer,) = _layers(template)
    assert props["Architectures"] == [PAYMENT_ARCHITECTURE.name] and props["Runtime"] == PAYMENT_RUNTIME.name
    assert _ssm_parameter(template, layer) == {
        "Type": "AWS::SSM::Parameter::Value<String>",
        "Default": (
            f"/aws/service/powertools/python/{PAYMENT_ARCHITECTURE.name}/{PAYMENT_RUNTIME.name}/{POWERTOOLS_VERSION}"
        ),
    }
    assert "017000801446" not in json.dumps(template.to_json()), "no layer version derived by hand"


def test_environment_agnostic_stack_assumes_no_partition(agnostic: Template) -> None:
    (layer,) = _layers(agnostic)
    assert _ssm_parameter(agnostic, layer)["Default"] == ARM  # PaymentProcessor's default architecture
    assert _literal_partitions(agnostic) == set()


@pytest.mark.parametrize("region", ["cn-north-1", "cn-northwest-1", "us-gov-west-1", "us-gov-east-1"])
def test_fails_at_synth_in_china_and_govcloud_naming_powertools_layer(region: str) -> None:
    with pytest.raises(ValueError, match=rf"^powertools_layer must be given in region {region} \(partition aws-"):
        PaymentProcessor(_stack(region), "Payments")


def test_fails_at_synth_in_a_commercial_region_powertools_does_not_serve() -> None:
    assert RegionInfo.get("me-central-1").partition == "aws"  # in the aws partition, yet no parameter there
    with pytest.raises(ValueError, match=r"^powertools_layer must be given in region me-central-1 \(partition aws\)"):
        PaymentProcessor(_stack("me-central-1"), "Payments")


def test_explicit_powertools_layer_is_used_in_china(china_with_layer: Template) -> None:
    assert _layers(china_with_layer) == [CHINA_LAYER]
    defaults = [p.get("Default", "") for p in china_with_layer.to_json().get("Parameters", {}).values()]
    assert not [d for d in defaults if d.startswith("/aws/service/powertools")], (
        "no parameter lookup with a layer given"
    )


def test_nothing_in_a_china_stack_is_built_on_the_aws_partition(china_with_layer: Template) -> None:
    assert _literal_partitions(china_with_layer) == {"aws-cn"}  # only the user's own layer ARN


@pytest.mark.parametrize(
    ("architecture", "name"), [(lambda_.Architecture.X86_64, X86), (lambda_.Architecture.ARM_64, ARM)]
)
def test_both_architectures_resolve(architecture: lambda_.Architecture, name: str) -> None:
    assert powertools_layer_parameter_name(architecture) == name
    stack = _stack("eu-west-1")
    layer = public_powertools_layer(stack, architecture=architecture)
    ref = stack.resolve(layer.layer_version_arn)
    assert Template.from_stack(stack).to_json()["Parameters"][ref["Ref"]]["Default"] == name


@pytest.mark.parametrize("architecture", [lambda_.Architecture.X86_64, lambda_.Architecture.ARM_64])
def test_both_architectures_fail_in_govcloud(architecture: lambda_.Architecture) -> None:
    with pytest.raises(ValueError, match=r"^powertools_layer must be given in region us-gov-west-1"):
        public_powertools_layer(_stack("us-gov-west-1"), architecture=architecture)


def test_served_regions_are_all_in_the_aws_partition() -> None:
    assert {RegionInfo.get(r).partition for r in POWERTOOLS_SSM_REGIONS} == {"aws"}


def test_fails_on_a_runtime_that_is_not_python() -> None:
    with pytest.raises(ValueError, match=r"^runtime must be a Python 3 runtime"):
        powertools_layer_parameter_name(runtime=lambda_.Runtime.NODEJS_22_X)
