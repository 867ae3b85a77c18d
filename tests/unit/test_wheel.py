"""The built wheel, installed without the repository, in a user's CDK app outside it.

Builds the wheel (hatchling, no isolation: offline), installs it with ``pip install --no-deps --target``
(aws-cdk-lib comes from the test venv), and synthesizes a user's stack in a subprocess whose working
directory is outside the repository and whose ``sys.path`` has the install target first and no repository
path at all (the editable install's ``.pth`` entry is removed).
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
    from effectively_once import IdempotencyTable, IdempotentQueueConsumer, PaymentProcessor, ProcessingQueue

    app = App(outdir="cdk.out")
    stack = Stack(app, "UserStack")
    PaymentProcessor(stack, "Payments")
    Path("orders").mkdir(exist_ok=True)
    Path("orders/app.py").write_text("def handler(event, context):\\n    return {'batchItemFailures': []}\\n")
    orders = lambda_.Function(
        stack, "Orders", runtime=lambda_.Runtime.PYTHON_3_13, handler="app.handler",
        code=lambda_.Code.from_asset("orders"), timeout=Duration.seconds(15),
    )
    IdempotentQueueConsumer(
        stack, "OrdersConsumer", queue=ProcessingQueue(stack, "OrdersQueue"), function=orders,
        table=IdempotencyTable(stack, "OrdersIdempotency"),
    )
    app.synth()
    print(json.dumps({"module": effectively_once.__file__, "path": sys.path, "prefix": sys.prefix}))
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
        check=True, capture_output=True, text=True,
    )
    (built,) = dist.glob("effectively_once-*.whl")
    return built


@pytest.fixture(scope="module")
def user_app(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--target", str(target), str(wheel)],
        check=True, capture_output=True, text=True,
    )
    workdir = tmp_path_factory.mktemp("user-app")
    (workdir / "app.py").write_text(USER_APP)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "app.py", str(target), str(REPO)],
        cwd=workdir, env=env, check=True, capture_output=True, text=True,
    )
    return {"target": target, "cdk_out": workdir / "cdk.out", "report": json.loads(done.stdout.splitlines()[-1])}


def _payment_asset(cdk_out: Path) -> Path:
    """The payment function's asset directory, via its S3 key and the stack's asset manifest."""
    template = json.loads((cdk_out / "UserStack.template.json").read_text())
    keys = [
        r["Properties"]["Code"]["S3Key"] for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Handler") == "payments.handler.lambda_handler"
    ]
    assert len(keys) == 1
    files = json.loads((cdk_out / "UserStack.assets.json").read_text())["files"]
    return cdk_out / files[keys[0].removesuffix(".zip")]["source"]["path"]


def test_wheel_ships_py_typed_and_the_sample_handler(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "effectively_once/py.typed" in names
    assert "effectively_once/_lambda_src/payments/handler.py" in names
    # The runtime: top-level (the CDK side imports its names module; users' functions the rest) and in the asset.
    assert "effectively_once_runtime/names.py" in names
    assert "effectively_once_runtime/consumer.py" in names
    assert "effectively_once/_lambda_src/effectively_once_runtime/consumer.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_user_app_imports_the_installed_package_not_the_repository(user_app: dict) -> None:
    module = Path(user_app["report"]["module"]).resolve()
    assert user_app["target"].resolve() in module.parents
    report = user_app["report"]
    assert report["path"][0] == str(user_app["target"])
    assert not [p for p in report["path"] if p.startswith(str(REPO)) and not p.startswith(report["prefix"])]


def test_payment_handler_is_inside_the_lambda_asset(user_app: dict) -> None:
    asset = _payment_asset(user_app["cdk_out"])
    assert (asset / "payments" / "handler.py").is_file()
    assert (asset / "effectively_once_runtime" / "consumer.py").is_file(), "the sample runs on the runtime"


def test_lambda_asset_has_no_byte_code(user_app: dict) -> None:
    asset = _payment_asset(user_app["cdk_out"])
    assert not [p for p in asset.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]


def test_user_consumer_is_wired_to_the_users_function(user_app: dict) -> None:
    template = json.loads((user_app["cdk_out"] / "UserStack.template.json").read_text())
    mappings = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    orders = [k for k, r in template["Resources"].items()
              if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == "app.handler"]
    assert [m["FunctionResponseTypes"] for m in mappings if m["FunctionName"] == {"Ref": orders[0]}] == [
        ["ReportBatchItemFailures"]
    ]
