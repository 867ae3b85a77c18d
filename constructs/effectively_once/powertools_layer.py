"""The public Powertools for AWS Lambda (Python) layer, resolved for the pinned release at deploy time.

Why SSM and not a table of ARNs: Powertools publishes, in each commercial region it serves, one public SSM
parameter per release, Python version and architecture whose value is the ARN of the layer version that carries
that release (``/aws/service/powertools/python/<arch>/python3.<minor>/<release>``). Resolving that parameter at
deploy time gives a layer that exists and carries :data:`POWERTOOLS_VERSION` in the deploying region, without a
layer version number derived by hand. The China (``aws-cn``) and GovCloud (``aws-us-gov``) partitions get copies of
the layers under other publisher accounts (cn-north-1: 498634801083; us-gov-east-1: 165087284144; us-gov-west-1:
165093116878) with their own layer version numbers and no SSM parameters, so no pinned release can be resolved
there: a stack whose region is known and not served fails at synth, naming ``powertools_layer``.

Sources: Powertools for AWS Lambda (Python) docs, "Installation" (Lambda Layer: "Using SSM Parameter Store",
"AWS China regions", "AWS GovCloud regions"); aws-powertools/powertools-lambda-python
``.github/workflows/update_ssm.yml`` (the regions and names written for each release) and
``.github/workflows/layers_partitions.yml`` (the partition copies, published without parameters).
"""

from __future__ import annotations

from aws_cdk import Stack, Token
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_ssm as ssm
from aws_cdk.region_info import RegionInfo
from constructs import Construct

from ._validation import fail
from .limits import POWERTOOLS_LAYER_DOC, POWERTOOLS_SSM_REGIONS

# --- Powertools layer pin (the one place) ----------------------------------------------------------------
POWERTOOLS_VERSION = "3.37.0"
"""Powertools release the layer carries: the same as aws-lambda-powertools in requirements.txt (a test checks)."""
POWERTOOLS_RUNTIME = lambda_.Runtime.PYTHON_3_14
"""The runtime the payment function runs on and the layer is resolved for (the newest Powertools supports)."""
POWERTOOLS_PARAMETER_PREFIX = "/aws/service/powertools/python"
"""Prefix of Powertools' public SSM parameters for Python (v3 layers)."""


def powertools_layer_parameter_name(
    architecture: lambda_.Architecture = lambda_.Architecture.X86_64,
    *,
    runtime: lambda_.Runtime = POWERTOOLS_RUNTIME,
    version: str = POWERTOOLS_VERSION,
) -> str:
    """Name of Powertools' public SSM parameter holding the layer ARN for one release.

    :param architecture: ``x86_64`` or ``arm64``. :default: ``lambda_.Architecture.X86_64``.
    :param runtime: a Python runtime (``python3.<minor>``). :default: :data:`POWERTOOLS_RUNTIME`.
    :param version: the Powertools release. :default: :data:`POWERTOOLS_VERSION`.
    :returns: e.g. ``/aws/service/powertools/python/arm64/python3.14/3.37.0``.
    :raises ValueError: ``runtime`` is not a Python runtime.
    """
    if not runtime.name.startswith("python3."):
        raise fail("runtime", runtime.name, "must be a Python 3 runtime (python3.<minor>)", POWERTOOLS_LAYER_DOC)
    return f"{POWERTOOLS_PARAMETER_PREFIX}/{architecture.name}/{runtime.name}/{version}"


def public_powertools_layer(
    scope: Construct,
    id: str = "PowertoolsLayer",
    *,
    architecture: lambda_.Architecture = lambda_.Architecture.X86_64,
    runtime: lambda_.Runtime = POWERTOOLS_RUNTIME,
) -> lambda_.ILayerVersion:
    """The public Powertools layer carrying :data:`POWERTOOLS_VERSION`, for ``architecture`` and ``runtime``.

    The ARN is the value of :func:`powertools_layer_parameter_name`, resolved by CloudFormation at deploy time
    in the deploying account and region (an ``AWS::SSM::Parameter::Value<String>`` template parameter, one per
    name and stack). In an environment-agnostic stack nothing about the partition is assumed: in a region where
    Powertools publishes no such parameter, CloudFormation rejects the stack before creating any resource.

    :param scope: where the imported layer is added.
    :param id: its construct id. :default: ``"PowertoolsLayer"``.
    :param architecture: ``lambda_.Architecture.X86_64`` or ``ARM_64``. :default: ``X86_64``.
    :param runtime: the function's Python runtime; the layer declares only this one, so CDK rejects a function on
        another (``IncompatibleLayerRuntime``). :default: :data:`POWERTOOLS_RUNTIME`.
    :raises ValueError: the stack's region is known and Powertools publishes no parameter there (the China and
        GovCloud partitions, regions newer than :data:`~effectively_once.limits.POWERTOOLS_SSM_REGIONS`): pass
        your own layer as ``powertools_layer``.
    """
    region = Stack.of(scope).region
    if not Token.is_unresolved(region) and region not in POWERTOOLS_SSM_REGIONS:
        partition = RegionInfo.get(region).partition or "unknown"
        raise fail(
            "powertools_layer",
            None,
            f"must be given in region {region} (partition {partition}): Powertools publishes no SSM parameter "
            f"{powertools_layer_parameter_name(architecture, runtime=runtime)} there (China and GovCloud layers "
            f"are copies under other accounts with their own version numbers), so no layer carrying Powertools "
            f"{POWERTOOLS_VERSION} can be resolved; pass a lambda_.ILayerVersion that does "
            f"(e.g. LayerVersion.from_layer_version_arn with the ARN Powertools lists for {region})",
            POWERTOOLS_LAYER_DOC,
        )
    arn = ssm.StringParameter.value_for_string_parameter(
        scope, powertools_layer_parameter_name(architecture, runtime=runtime)
    )
    # Declares the one runtime it was resolved for: Powertools builds one layer per Python version (the parameter
    # name carries python3.<minor>), so CDK rejects a function on another version instead of deploying a mismatch.
    return lambda_.LayerVersion.from_layer_version_attributes(
        scope, id, layer_version_arn=arn, compatible_runtimes=[runtime]
    )
