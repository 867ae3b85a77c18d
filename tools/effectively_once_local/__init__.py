"""Local development tooling: a local AWS (moto server), deploy, an event source mapping runner, a producer,
chaos and the report. ``python -m effectively_once_local --help``.

The chaos proof for any stack: ``python -m effectively_once_local chaos --app-dir DIR --stack NAME --input FILE
--key JMESPATH`` or, from pytest, ``effectively_once_local.run_chaos(ChaosOptions(...))`` (docs: "Chaos proof for
any stack"). The entry points the docs name are re-exported here (:data:`ENTRY_POINTS`), loaded on first use.

Its own package, shipped in the library's wheel, with its dependencies in the ``[local]`` extra only (house rule 7:
the tooling imports the library, never the other way round). It imports the runtime (``effectively_once_runtime``)
and the library's CDK-free modules (``effectively_once.limits``), never ``aws_cdk``: the runner loads a handler by
path and the CDK app is deployed through the CDK CLI.

Its layers are its folders, bottom to top; a module imports only from its own folder and the ones below
(``tests/local/test_layers.py``):

- ``base/``: the AWS limits the tooling checks, the JSON Lines reader (input files and the run's logs), a run's
  throughput and peak memory;
- ``chaos/``: faults from outside at the SDK boundary, the fault model and the run's event log;
- ``traffic/``: the chaos command's input lines, the one producer (the plan of originals, duplicates and resends, the
  sending, the send log);
- ``aws/``: the local AWS (moto and its patches, Lambda's asynchronous inbox), the deploy (CDK CLI), discovery and
  the mapping configs it reads, read-back, the HTTP provider stand-in;
- ``runner/``: the event source mapping stand-in (one process per execution environment, chaos from outside) and
  Lambda's asynchronous invocation, played from the inbox;
- ``proof/``: attribution (what the platform's logs say of each message and kill), the per-key check and every line's
  state, effects counted from the stores;
- ``report/``: the terminal summary, the JSON report, the run's page;
- ``engine/``: the one pipeline every run goes through (deploy, discover, poll, send, drain) and its drain limit;
- ``redrive/``: the ``redrive`` command's job, the DLQs and the on-failure queues (the runs above redrive with it);
- ``any_stack/``: the chaos proof for any stack (the ``chaos`` command), its targets and its inert faults;
- ``payments/``: the payments profile, the only folder that knows the payments sample: the demo (its view, input,
  report, backlog, asynchronous leg) and the remote commands. ``any_stack/`` and ``payments/`` stand side by side:
  neither imports the other;
- ``cli/``: the command line: one module per subcommand (``*_command.py``; ``produce`` and ``report`` share
  ``remote_commands.py``), what their parsers share (``arguments.py``), and ``main.py``, which puts them together.

The old module paths (the flat ``effectively_once_local.esm``, ..., and ``effectively_once_local.profiles.chaos_run``,
...) still import, with a ``DeprecationWarning`` naming the new path, until 0.4.0 (``_moved.py``;
docs/deprecations.md).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from . import _moved

#: The ``[local]`` extra's packages, by the module each is imported as (``flask`` comes with ``moto[server]``).
_EXTRA_MODULES = ("moto", "flask", "boto3", "aws_lambda_powertools", "tqdm", "matplotlib")

#: ``{name: the module defining it}``: the entry points the docs name, importable from the package itself.
ENTRY_POINTS = {
    "run_chaos": "any_stack.chaos_run",
    "ChaosOptions": "any_stack.chaos_context",
    "run_demo": "payments.demo",
    "DemoOptions": "payments.demo",
    "MotoServer": "aws.server",
    "aws_env": "aws.server",
    "local_session": "aws.server",
    "local_endpoint": "aws.server",
    "ProviderStandIn": "aws.provider_stand_in",
    "main": "cli.main",
}

__all__ = sorted(ENTRY_POINTS)


def _missing_modules() -> list[str]:
    return [name for name in _EXTRA_MODULES if importlib.util.find_spec(name) is None]


if _missing := _missing_modules():
    raise ImportError(
        'effectively_once_local needs the [local] extra: pip install "effectively-once[local]" '
        f"(missing: {', '.join(_missing)})"
    )

_moved.install()


def __getattr__(name: str) -> Any:
    if name in ENTRY_POINTS:
        return getattr(importlib.import_module(f"{__name__}.{ENTRY_POINTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
