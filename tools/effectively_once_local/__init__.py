"""Local development tooling: a local AWS (moto server), deploy, an event source mapping runner, a producer,
chaos and the report. ``python -m effectively_once_local --help``.

The chaos proof for any stack: ``python -m effectively_once_local chaos --app-dir DIR --stack NAME --input FILE
--key JMESPATH`` or, from pytest, ``effectively_once_local.stack_run.run_chaos(ChaosOptions(...))`` (README "Chaos
proof for any stack").

Its own package, shipped in the library's wheel, with its dependencies in the ``[local]`` extra only (house rule 7:
the tooling imports the library, never the other way round). It imports the runtime (``effectively_once_runtime``)
and the library's CDK-free modules (``effectively_once.limits``), never ``aws_cdk``: the runner loads a handler by
path and the CDK app is deployed through the CDK CLI.
"""

from __future__ import annotations

import importlib.util

#: The ``[local]`` extra's packages, by the module each is imported as (``flask`` comes with ``moto[server]``).
_EXTRA_MODULES = ("moto", "flask", "boto3", "aws_lambda_powertools", "tqdm", "matplotlib")


def _missing_modules() -> list[str]:
    return [name for name in _EXTRA_MODULES if importlib.util.find_spec(name) is None]


if _missing := _missing_modules():
    raise ImportError(
        'effectively_once_local needs the [local] extra: pip install "effectively-once[local]" '
        f"(missing: {', '.join(_missing)})"
    )
