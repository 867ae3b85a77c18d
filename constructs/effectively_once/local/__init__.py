"""Local development tooling: a local AWS (moto server), deploy, an event source mapping runner, a producer,
chaos and the report. ``python -m effectively_once.local --help``.

The chaos proof for any stack: ``python -m effectively_once.local chaos --app-dir DIR --stack NAME --input FILE
--key JMESPATH`` or, from pytest, ``effectively_once.local.stack_run.run_chaos(ChaosOptions(...))`` (README "Chaos
proof for any stack").

Nothing here imports the CDK or the construct library: the runner loads a handler by path (house rule 4), and
the CDK app is deployed through the CDK CLI. Needs the ``[local]`` extra (moto, boto3, Powertools, tqdm).
"""
