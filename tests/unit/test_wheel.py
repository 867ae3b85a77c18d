"""The built wheel, installed without the repository, in a user's CDK app outside it.

Builds the wheel (hatchling, no isolation: offline), installs it with ``pip install --no-deps --target``
(aws-cdk-lib comes from the test venv), and synthesizes a user's stack in a subprocess whose working
directory is outside the repository and whose ``sys.path`` has the install target first and no repository
path at all (the editable install's ``.pth`` entry is removed). The stack holds the sample and a user's own
handler folder (``orders/orders.py`` on the runtime) given the runtime by ``RuntimeLayer`` in one line; then
that handler runs one SQS event, twice, against moto with the runtime imported from the layer's ``python/``
folder only (neither the install target nor the repository on the path), as Lambda would from ``/opt/python``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from .helpers import REPO

USER_APP = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path

    target, repo = sys.argv[1], sys.argv[2]
    # Keep the venv's site-packages (aws-cdk-lib; the venv may live inside the repository), drop every other
    # repository path (the editable install's constructs/ entry) and the working directory.
    in_repo = lambda p: p.startswith(repo) and not p.startswith(sys.prefix)
    sys.path[:] = [target] + [p for p in sys.path if p and not in_repo(p) and p != target]

    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_lambda as lambda_

    import effectively_once
    import effectively_once_runtime.names
    from effectively_once import (
        IdempotencyTable, IdempotentQueueConsumer, PaymentProcessor, ProcessingQueue, RuntimeLayer,
    )

    app = App(outdir="cdk.out")
    stack = Stack(app, "UserStack")
    PaymentProcessor(stack, "Payments")
    orders = lambda_.Function(
        stack, "Orders", runtime=lambda_.Runtime.PYTHON_3_13, architecture=lambda_.Architecture.ARM_64,
        handler="orders.lambda_handler", code=lambda_.Code.from_asset("orders"), timeout=Duration.seconds(15),
        layers=RuntimeLayer(
            stack, "Runtime", architecture=lambda_.Architecture.ARM_64, runtime=lambda_.Runtime.PYTHON_3_13
        ).layers,
    )
    IdempotentQueueConsumer(
        stack, "OrdersConsumer", queue=ProcessingQueue(stack, "OrdersQueue"), function=orders,
        table=IdempotencyTable(stack, "OrdersIdempotency"), key_prefix="shop/orders",
    )
    app.synth()
    print(json.dumps({
        "module": effectively_once.__file__, "names": effectively_once_runtime.names.__file__,
        "path": sys.path, "prefix": sys.prefix,
    }))
    """
)

#: The user's own handler: the runtime's example shape (key, validation, one declared effect).
ORDERS_HANDLER = textwrap.dedent(
    """
    from effectively_once_runtime import Consumer

    consumer = Consumer(key="order_id", validate="[total, currency]", key_prefix="shop/orders", service="orders")
    CONFIRMED = []


    @consumer.effect
    def confirm(order, *, idempotency_key):
        CONFIRMED.append(idempotency_key)
        return {"confirmation": f"c-{idempotency_key}"}


    @consumer.record
    def handle(order):
        return confirm(order)


    lambda_handler = consumer.handler
    """
)

#: Runs one SQS event through the user's handler twice against moto (in process). sys.path: the layer's python/
#: folder, the handler folder, then the venv's site-packages (Powertools, boto3, moto) without the repository and
#: without the install target: the runtime can only come from the layer.
RUN_HANDLER = textwrap.dedent(
    """
    import json, os, sys, types

    layer_python, handler_dir, target, repo = sys.argv[1:5]
    keep = lambda p: p and not p.startswith(target) and not (p.startswith(repo) and not p.startswith(sys.prefix))
    sys.path[:] = [layer_python, handler_dir] + [p for p in sys.path if keep(p)]
    os.environ.update({
        "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing", "IDEMPOTENCY_TABLE_NAME": "idempotency",
        "IDEMPOTENCY_EXPIRY_SECONDS": "3600",
    })
    os.environ.pop("AWS_ENDPOINT_URL", None)

    import boto3
    from moto import mock_aws

    with mock_aws():
        boto3.client("dynamodb").create_table(
            TableName="idempotency", KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        )
        import orders
        import effectively_once_runtime

        context = types.SimpleNamespace(
            function_name="orders", function_version="$LATEST", memory_limit_in_mb=128, aws_request_id="r-1",
            invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:orders",
            get_remaining_time_in_millis=lambda: 15000,
        )
        body = json.dumps({"order_id": "o-1", "total": 12, "currency": "EUR"})
        record = {
            "messageId": "m-1", "receiptHandle": "h-1", "body": body, "attributes": {"ApproximateReceiveCount": "1"},
            "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs", "awsRegion": "us-east-1",
            "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
        }
        first = orders.lambda_handler({"Records": [record]}, context)
        again = orders.lambda_handler({"Records": [dict(record, messageId="m-2")]}, context)
        stored = boto3.client("dynamodb").scan(TableName="idempotency")["Items"]
    print(json.dumps({
        "runtime": effectively_once_runtime.__file__, "first": first, "again": again,
        "confirmed": orders.CONFIRMED, "stored": sorted(i["status"]["S"] for i in stored),
    }))
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    (built,) = dist.glob("effectively_once-*.whl")
    return built


@pytest.fixture(scope="module")
def user_app(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    workdir = tmp_path_factory.mktemp("user-app")
    (workdir / "app.py").write_text(USER_APP)
    (workdir / "orders").mkdir()
    (workdir / "orders" / "orders.py").write_text(ORDERS_HANDLER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "app.py", str(target), str(REPO)],
        cwd=workdir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return {
        "target": target,
        "cdk_out": workdir / "cdk.out",
        "report": json.loads(done.stdout.splitlines()[-1]),
        "workdir": workdir,
        "env": env,
    }


def _template(cdk_out: Path) -> dict:
    return json.loads((cdk_out / "UserStack.template.json").read_text())


def _asset(cdk_out: Path, key: str) -> Path:
    """An asset's staged folder, from its S3 key and the stack's asset manifest."""
    files = json.loads((cdk_out / "UserStack.assets.json").read_text())["files"]
    return cdk_out / files[key.removesuffix(".zip")]["source"]["path"]


def _orders_function(cdk_out: Path) -> dict:
    (props,) = [
        r["Properties"]
        for r in _template(cdk_out)["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == "orders.lambda_handler"
    ]
    return props


def _orders_runtime_layer(cdk_out: Path) -> Path:
    """The staged asset of the runtime layer on the user's function."""
    resources = _template(cdk_out)["Resources"]
    (layer,) = [
        resources[ref["Ref"]]
        for ref in _orders_function(cdk_out)["Layers"]
        if "Ref" in ref and resources.get(ref["Ref"], {}).get("Type") == "AWS::Lambda::LayerVersion"
    ]
    return _asset(cdk_out, layer["Properties"]["Content"]["S3Key"])


def _payment_asset(cdk_out: Path) -> Path:
    """The payment function's asset directory, via its S3 key and the stack's asset manifest."""
    keys = [
        r["Properties"]["Code"]["S3Key"]
        for r in _template(cdk_out)["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "payments.handler.lambda_handler"
    ]
    assert len(keys) == 1
    return _asset(cdk_out, keys[0])


def test_wheel_ships_py_typed_and_the_sample_handler(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "effectively_once/py.typed" in names
    assert "effectively_once/_lambda_src/payments/handler.py" in names
    # The runtime ships once, top-level: the CDK side imports its names module, RuntimeLayer builds the layer from it.
    assert "effectively_once_runtime/names.py" in names
    assert "effectively_once_runtime/consumer.py" in names
    assert "effectively_once/runtime_layer.py" in names
    assert not [n for n in names if n.startswith("effectively_once/_lambda_src/effectively_once_runtime/")]
    # The local tooling: its own top-level package, and the deprecated alias inside the library.
    assert {"effectively_once_local/__init__.py", "effectively_once_local/__main__.py"} <= set(names)
    assert "effectively_once_local/cli/main.py" in names
    assert "effectively_once_local/aws/moto_patches.py" in names
    # The modules whose patches moto_patches applies (python -m effectively_once_local.aws.moto_patches).
    patches = (
        "moto_sqs_cost",
        "moto_locking",
        "moto_deduplication",
        "moto_powertools",
        "moto_async_bridges",
        "moto_refusals",
        "moto_sns_lambda_refusals",
    )
    assert {f"effectively_once_local/aws/{module}.py" for module in patches} <= set(names)
    assert "effectively_once_local/aws/moto_dynamodb_refusals.py" in names  # DynamoDB's refusals (issue 58, item 1b)
    runner = (
        "mapping_runner",
        "poller_spec",
        "batch_poller",
        "async_poller",
        "execution_environment",
        "request_counter",
    )
    assert {f"effectively_once_local/runner/{module}.py" for module in runner} <= set(names)
    # Lambda's asynchronous inbox and the mapping configs are the local AWS's (issue 56, item 4).
    assert {f"effectively_once_local/aws/{module}.py" for module in ("async_inbox", "mapping_config")} <= set(names)
    # The profiles' folders by job.
    jobs = ("engine/pipeline", "redrive/dlq_redrive", "any_stack/chaos_run", "payments/demo")
    assert {f"effectively_once_local/{module}.py" for module in jobs} <= set(names)
    assert sorted(n for n in names if n.startswith("effectively_once/local/")) == [
        "effectively_once/local/__init__.py",
        "effectively_once/local/__main__.py",
    ]
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_user_app_imports_the_installed_package_not_the_repository(user_app: dict) -> None:
    module = Path(user_app["report"]["module"]).resolve()
    assert user_app["target"].resolve() in module.parents
    report = user_app["report"]
    assert report["path"][0] == str(user_app["target"])
    assert not [p for p in report["path"] if p.startswith(str(REPO)) and not p.startswith(report["prefix"])]
    assert user_app["target"].resolve() in Path(report["names"]).resolve().parents, "names from the wheel"


def test_payment_handler_is_inside_the_lambda_asset(user_app: dict) -> None:
    asset = _payment_asset(user_app["cdk_out"])
    assert (asset / "payments" / "handler.py").is_file()
    assert sorted(p.name for p in asset.iterdir()) == ["payments"], "the runtime comes from the layer"


def test_lambda_asset_has_no_byte_code(user_app: dict) -> None:
    asset = _payment_asset(user_app["cdk_out"])
    assert not [p for p in asset.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]


def test_user_consumer_is_wired_to_the_users_function(user_app: dict) -> None:
    template = json.loads((user_app["cdk_out"] / "UserStack.template.json").read_text())
    mappings = [
        r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"
    ]
    orders = [
        k
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == "orders.lambda_handler"
    ]
    assert [m["FunctionResponseTypes"] for m in mappings if m["FunctionName"] == {"Ref": orders[0]}] == [
        ["ReportBatchItemFailures"]
    ]


def test_users_function_has_the_runtime_layer_powertools_and_the_environment(user_app: dict) -> None:
    cdk_out = user_app["cdk_out"]
    function = _orders_function(cdk_out)
    parameters = _template(cdk_out)["Parameters"]
    powertools = [parameters[ref["Ref"]]["Default"] for ref in function["Layers"] if ref["Ref"] in parameters]
    assert powertools == ["/aws/service/powertools/python/arm64/python3.13/3.37.0"]
    assert _orders_runtime_layer(cdk_out).is_dir()
    assert function["Environment"]["Variables"]["IDEMPOTENCY_KEY_PREFIX"] == "shop/orders"
    assert {"IDEMPOTENCY_TABLE_NAME", "IDEMPOTENCY_EXPIRY_SECONDS"} <= set(function["Environment"]["Variables"])


def test_runtime_layer_asset_holds_the_wheels_runtime_source(user_app: dict) -> None:
    layer = _orders_runtime_layer(user_app["cdk_out"])
    installed = user_app["target"] / "effectively_once_runtime"
    shipped = sorted(p.relative_to(layer).as_posix() for p in layer.rglob("*") if p.is_file())
    assert shipped == sorted(
        f"python/effectively_once_runtime/{p.relative_to(installed).as_posix()}"
        for p in installed.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    assert (
        "python/effectively_once_runtime/__init__.py" in shipped
        and "python/effectively_once_runtime/names.py" in shipped
    )
    assert (layer / "python/effectively_once_runtime/consumer.py").read_bytes() == (
        installed / "consumer.py"
    ).read_bytes()


@pytest.fixture(scope="module")
def handler_run(user_app: dict) -> dict:
    layer_python = _orders_runtime_layer(user_app["cdk_out"]) / "python"
    script = user_app["workdir"] / "run_handler.py"
    script.write_text(RUN_HANDLER)
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            str(layer_python),
            str(user_app["workdir"] / "orders"),
            str(user_app["target"]),
            str(REPO),
        ],
        cwd=user_app["workdir"],
        env=user_app["env"],
        check=True,
        capture_output=True,
        text=True,
    )
    return {"layer_python": layer_python, **json.loads(done.stdout.splitlines()[-1])}


def test_users_handler_runs_on_the_runtime_from_the_layer(handler_run: dict) -> None:
    assert handler_run["layer_python"].resolve() in Path(handler_run["runtime"]).resolve().parents
    assert handler_run["first"] == {"batchItemFailures": []}
    assert handler_run["again"] == {"batchItemFailures": []}, "a resend is answered from the stored record"
    assert len(handler_run["confirmed"]) == 1, "the effect ran once for two deliveries of one order"
    # The record alone: a first delivery keeps its effect's result in memory only (effect_results.py)
    assert handler_run["stored"] == ["COMPLETED"]
