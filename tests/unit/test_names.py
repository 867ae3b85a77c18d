"""``effectively_once_runtime.names``: the one runtime module the CDK side imports. It needs only the standard
library, and the constructs' environment, alarms, dashboard and query definitions use its names."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Any

import pytest
from aws_cdk.assertions import Template

from effectively_once import IdempotentQueueConsumerOptions, PaymentProcessor
from effectively_once_runtime import names

from .helpers import REPO, new_stack

NAMES_PY = REPO / "lambda_src" / "effectively_once_runtime" / "names.py"


def _imported_modules(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.add("." if node.level else (node.module or "").split(".")[0])
    return found


def test_names_imports_only_the_standard_library() -> None:
    imported = _imported_modules(NAMES_PY.read_text(encoding="utf-8"))

    assert "." not in imported, "a relative import would pull in the runtime package's other modules"
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_the_import_check_finds_a_third_party_import() -> None:
    assert _imported_modules("import aws_lambda_powertools\nfrom . import consumer\n") == {"aws_lambda_powertools", "."}


def test_names_imports_with_powertools_boto3_and_cdk_unavailable() -> None:
    probe = (
        "import sys\n"
        "for blocked in ('aws_lambda_powertools', 'boto3', 'botocore', 'jmespath', 'aws_cdk', 'constructs'):\n"
        "    sys.modules[blocked] = None\n"
        "import effectively_once_runtime.names as n\n"
        "import effectively_once_runtime as r\n"
        "print(n.METRIC_FAILED_RECORDS, r.PermanentError.__name__)\n"
        "try:\n"
        "    r.Consumer\n"
        "except ImportError:\n"
        "    print('Consumer needs Powertools')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO / "lambda_src"
    )

    assert done.stdout.splitlines() == ["FailedRecords PermanentError", "Consumer needs Powertools"]


@pytest.fixture(scope="module")
def sandbox() -> dict[str, Any]:
    stack = new_stack()
    PaymentProcessor(
        stack,
        "Payments",
        service_name="shop",
        metrics_namespace="Shop",
        consumer_options=IdempotentQueueConsumerOptions(key_prefix="shop/payments"),
    )
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _of_type(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == type_]


def test_dashboard_shows_every_runtime_metric(sandbox: dict[str, Any]) -> None:
    (dashboard,) = _of_type(sandbox, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])

    for metric in names.EMF_METRICS:
        assert f'\\"{metric}\\",\\"{names.EMF_SERVICE_DIMENSION}\\",\\"shop\\"' in body, metric


def test_failed_records_alarm_reads_the_runtime_metric(sandbox: dict[str, Any]) -> None:
    alarms = [a for a in _of_type(sandbox, "AWS::CloudWatch::Alarm") if a.get("Namespace") == "Shop"]

    assert [a["MetricName"] for a in alarms] == [names.METRIC_FAILED_RECORDS]
    assert [d["Name"] for d in alarms[0]["Dimensions"]] == [names.EMF_SERVICE_DIMENSION]


def test_queries_filter_on_the_runtime_messages_and_fields(sandbox: dict[str, Any]) -> None:
    queries = "\n".join(q["QueryString"] for q in _of_type(sandbox, "AWS::Logs::QueryDefinition"))

    for message in (*names.OUTCOME_MESSAGES, *names.REJECTION_MESSAGES):
        assert f'"{message}"' in queries, message
    for field in (
        names.FIELD_CORRELATION_ID,
        names.FIELD_IDEMPOTENCY_KEY,
        names.FIELD_MESSAGE_ID,
        names.FIELD_RECEIVE_COUNT,
        names.FIELD_MESSAGE,
        names.FIELD_IDEMPOTENCY_ERROR,
        names.FIELD_IDEMPOTENCY_STATUS,
    ):
        assert f" {field}" in queries, field


def test_function_environment_uses_the_runtime_variable_names(sandbox: dict[str, Any]) -> None:
    (function,) = [
        f for f in _of_type(sandbox, "AWS::Lambda::Function") if f.get("Handler") == "payments.handler.lambda_handler"
    ]
    variables = function["Environment"]["Variables"]

    for name in (
        names.ENV_TABLE_NAME,
        names.ENV_EXPIRY_SECONDS,
        names.ENV_KEY_PREFIX,
        names.ENV_SERVICE_NAME,
        names.ENV_METRICS_NAMESPACE,
    ):
        assert name in variables, name
    assert variables[names.ENV_KEY_PREFIX] == "shop/payments"


def test_the_runbook_shows_the_failed_records_query_verbatim() -> None:
    from pathlib import Path

    from effectively_once.observability import FAILED_RECORDS_QUERY

    root = Path(__file__).resolve().parents[2]
    assert f'"{names.MSG_RECORD_FAILED}"' in FAILED_RECORDS_QUERY
    for page in ("docs/runbook.md", "docs/observability.md"):
        assert f"```\n{FAILED_RECORDS_QUERY}\n```" in (root / page).read_text(), page
