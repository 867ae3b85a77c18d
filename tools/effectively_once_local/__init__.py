"""Local development tooling: a local AWS (moto server), deploy, an event source mapping runner, a producer,
chaos and the report. ``python -m effectively_once_local --help``.

The chaos proof for any stack: ``python -m effectively_once_local chaos --app-dir DIR --stack NAME --input FILE
--key JMESPATH`` or, from pytest, ``effectively_once_local.stack_run.run_chaos(ChaosOptions(...))`` (docs: "Chaos
proof for any stack").

Its own package, shipped in the library's wheel, with its dependencies in the ``[local]`` extra only (house rule 7:
the tooling imports the library, never the other way round). It imports the runtime (``effectively_once_runtime``)
and the library's CDK-free modules (``effectively_once.limits``), never ``aws_cdk``: the runner loads a handler by
path and the CDK app is deployed through the CDK CLI.

Layers, bottom to top; a module imports only from its own layer and the ones below (``tests/local/test_layers.py``):

- base: ``limits``, ``json_lines`` (input files and the run's logs), ``faults`` (writes seen at the SDK boundary),
  ``chaos`` (the fault model, the event log), ``figures``, ``async_queue`` (Lambda's asynchronous-invocation queue,
  locally: the inbox, the retry delays, the on-failure record);
- input and traffic: ``chaos_input`` (the chaos command's input lines), ``traffic`` (the one producer: the plan of
  originals, duplicates and resends, the sending, the send log);
- runner: ``esm`` (the event source mapping stand-in, one process per execution environment, chaos from outside);
- local AWS: ``_moto_server`` and ``server`` (moto and its patches), ``deploy`` (the CDK CLI), ``stack``
  (discovery), ``readback`` (queue depths, table scans, the DLQ reader, the attribute copy), ``provider`` (an HTTP
  provider stand-in on 127.0.0.1 honouring ``Idempotency-Key``, its call log);
- checks: ``attribution`` (what the platform's logs say of each message and kill), ``effects`` (the per-key check
  and every line's state), ``stores`` (effects counted from the stores a run names),
  ``html_report`` (the run's page);
- pipeline: ``pipeline`` (deploy or reuse, discover, send, poll, drain: the one pipeline);
- profiles: the chaos run for any stack (``stack_run``) and the payments demo (``demo`` with ``sandbox``,
  ``producer``, ``report``, ``backlog``, ``async_leg``, the bus leg; ``remote`` and ``redrive`` for deployed stacks);
- command line: ``__main__``.
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
