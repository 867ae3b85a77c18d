"""Powertools' public SSM parameters in moto: one bridge for the local tooling, on moto
:data:`.moto_patches.REQUIRED_MOTO_VERSION`. Applied by :func:`.moto_patches.apply` (the local AWS's server), whose
module docstring lists every patch and the module that holds it.

Bridged (moto 5.2.x): Powertools' public SSM parameters. ``PaymentProcessor`` resolves its layer at deploy time
from ``/aws/service/powertools/python/<arch>/python3.<minor>/<release>`` (an ``AWS::SSM::Parameter::Value``
template parameter); moto's CloudFormation looks that name up in its own store and answers a 500 when it is
missing, and moto refuses ``PutParameter`` under ``/aws/`` as AWS does. moto already serves some AWS-owned
public parameters (``/aws/service/global-infrastructure``, AMI ids) by loading them on first read; the bridge
adds Powertools' the same way: on the first read under ``/aws/service/powertools`` in an account and region, it
publishes one local layer version per architecture and Python version (a stand-in: the local runner runs
handlers in process with the installed Powertools) and writes the ``<release>`` and ``latest`` parameters
pointing at it, for the one release installed here (``aws-lambda-powertools``, which requirements.txt pins to
the constructs' ``POWERTOOLS_VERSION``; a test checks). Any other release stays missing, as on AWS for a release
that was never published, so a wrong pin fails the local deploy too.
"""

from __future__ import annotations

import base64
import io
import zipfile
from importlib.metadata import version
from typing import Any

#: Powertools' public parameters (see the module docstring) and the layers they name, as Powertools publishes
#: them (source: Powertools for AWS Lambda (Python) docs, Installation, Lambda Layer).
POWERTOOLS_PARAMETER_ROOT = "/aws/service/powertools"
POWERTOOLS_ARCHITECTURES = ("x86_64", "arm64")
POWERTOOLS_PYTHON_VERSIONS = ("3.10", "3.11", "3.12", "3.13", "3.14")


def powertools_release() -> str:
    """The Powertools release the local AWS publishes: the one installed with the local tooling."""
    return version("aws-lambda-powertools")


def _stand_in_layer_zip(release: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "python/EFFECTIVELY_ONCE_LOCAL_STAND_IN.txt",
            f"Local stand-in for the Powertools for AWS Lambda (Python) {release} layer: the local runner runs "
            "handlers in process with the installed aws-lambda-powertools.\n",
        )
    return buffer.getvalue()


def _load_powertools_parameters(parameters: Any) -> None:
    """Publish the stand-in layers in ``parameters``' account and region and write Powertools' parameters."""
    from collections import defaultdict

    from moto.awslambda.models import lambda_backends
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter

    release = powertools_release()
    content = {"ZipFile": base64.b64encode(_stand_in_layer_zip(release))}
    lambda_backend = lambda_backends[parameters.account_id][parameters.region_name]
    for arch in POWERTOOLS_ARCHITECTURES:
        for python in POWERTOOLS_PYTHON_VERSIONS:
            layer = lambda_backend.publish_layer_version(
                {
                    "LayerName": f"AWSLambdaPowertoolsPythonV3-python{python.replace('.', '')}-{arch}",
                    "Description": f"Powertools for AWS Lambda (Python) {release} (local stand-in)",
                    "Content": content,
                    "CompatibleRuntimes": [f"python{python}"],
                    "CompatibleArchitectures": [arch],
                }
            )
            for leaf in (release, "latest"):
                name = f"{POWERTOOLS_PARAMETER_ROOT}/python/{arch}/python{python}/{leaf}"
                # defaultdict's own __getitem__: ParameterDict's would trigger this loader again.
                defaultdict.__getitem__(parameters, name).append(
                    Parameter(  # type: ignore[abstract]  # moto's own loaders build it the same way
                        account_id=parameters.account_id,
                        name=name,
                        value=layer.arn,
                        parameter_type="String",
                        description=None,
                        allowed_pattern=None,
                        keyid=None,
                        last_modified_date=utcnow(),
                        version=1,
                        data_type="text",
                    )
                )


def powertools_parameters() -> None:
    """moto 5.2.5 serves some AWS-owned public SSM parameters, not Powertools' layer parameters (not a bug: a gap;
    ``PutParameter`` under ``/aws/`` is refused, as on AWS). The patch loads them on the first read under
    :data:`POWERTOOLS_PARAMETER_ROOT` in an account and region, as moto loads its own (see the module docstring).
    Tests: ``tests/local/test_local_powertools_layer.py``."""
    from moto.ssm import models as ssm_models

    check_loading_status = ssm_models.ParameterDict._check_loading_status

    def check_loading_status_with_powertools(self: Any, key: str) -> None:
        check_loading_status(self, key)
        if str(key or "").startswith(POWERTOOLS_PARAMETER_ROOT) and not getattr(self, "_powertools_loaded", False):
            self._powertools_loaded = True
            _load_powertools_parameters(self)

    ssm_models.ParameterDict._check_loading_status = check_loading_status_with_powertools  # type: ignore[method-assign]
