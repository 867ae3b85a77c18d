"""What Lambda would lack (issue 33, item 8): each Python function's imports, resolved against its asset, its layers,
the Lambda runtime, the Powertools layer and the allow-lists before any traffic. On ``cdk.out`` folders written here
(a template and asset folders, as the CDK CLI lays them out); the examples' real ``cdk.out`` is checked by the
proof runs, which deploy through ``pipeline.local_deployment``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.aws.lambda_imports import MissingImports, check_imports, missing_imports

HANDLER = """
import json
import os
from decimal import Decimal

import boto3
from aws_lambda_powertools import Logger
from effectively_once_runtime import Consumer

import helpers
from billing.rules import fee
"""


def _cdk_out(
    tmp_path: Path, code: dict[str, str], *, layers: list[Any] | None = None, runtime: str = "python3.14"
) -> Path:
    """``cdk.out`` with stack ``S``: function ``Fn`` (its asset ``asset.fn`` holding ``code``), the runtime layer
    (``asset.runtime/python/effectively_once_runtime``) and the Powertools layer's SSM parameter."""
    out = tmp_path / "cdk.out"
    for name, text in code.items():
        path = out / "asset.fn" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (out / "asset.runtime" / "python" / "effectively_once_runtime").mkdir(parents=True)
    resources = {
        "Fn": {
            "Type": "AWS::Lambda::Function",
            "Metadata": {"aws:asset:path": "asset.fn"},
            "Properties": {
                "Runtime": runtime,
                "Handler": "app.lambda_handler",
                "Layers": layers if layers is not None else [{"Ref": "RuntimeLayer"}, {"Ref": "Powertools"}],
            },
        },
        "RuntimeLayer": {"Type": "AWS::Lambda::LayerVersion", "Metadata": {"aws:asset:path": "asset.runtime"}},
    }
    parameters = {
        "Powertools": {
            "Type": "AWS::SSM::Parameter::Value<String>",
            "Default": "/aws/service/powertools/python/x86_64/python3.14/3.37.0",
        }
    }
    (out / "S.template.json").write_text(json.dumps({"Parameters": parameters, "Resources": resources}))
    return out


OWN = {"helpers.py": "", "billing/__init__.py": "", "billing/rules.py": "from . import tables\nfee = 1\n"}


def test_a_function_importing_what_lambda_has_passes(tmp_path: Path) -> None:
    out = _cdk_out(tmp_path, {"app.py": HANDLER, **OWN})

    assert missing_imports(out, "S") == []
    check_imports(out, "S")


def test_a_driver_the_venv_has_and_nothing_ships_fails_naming_module_and_function(tmp_path: Path) -> None:
    """psycopg is in the venv (requirements-dev.txt), so the local run passed; on Lambda the import fails."""
    code = {"app.py": HANDLER + "\ndef connect():\n    import psycopg\n    return psycopg\n", **OWN}
    out = _cdk_out(tmp_path, code)

    with pytest.raises(MissingImports) as raised:
        check_imports(out, "S")

    assert isinstance(raised.value, DeployError)
    [missing] = raised.value.missing
    assert (missing.function, missing.module, missing.file) == ("Fn", "psycopg", "app.py")
    assert "function Fn imports 'psycopg' (app.py), which Lambda would not find" in str(raised.value)
    assert "--allow-import" in str(raised.value)


def test_a_driver_shipped_in_the_asset_or_a_layer_passes(tmp_path: Path) -> None:
    code = {"app.py": "import psycopg\nimport psycopg_binary\n", "psycopg/__init__.py": "import typing_extensions\n"}
    code["psycopg-3.3.6.dist-info/RECORD"] = "psycopg/__init__.py,sha256=x,1\n"
    out = _cdk_out(tmp_path, code)
    layer = out / "asset.runtime" / "python" / "lib" / "python3.14" / "site-packages" / "psycopg_binary"
    layer.mkdir(parents=True)

    assert missing_imports(out, "S") == [], "psycopg in the asset (its own imports not read), psycopg_binary in a layer"


def test_powertools_and_its_bundled_packages_count_only_with_its_layer(tmp_path: Path) -> None:
    out = _cdk_out(tmp_path, {"app.py": "import aws_lambda_powertools\nimport pydantic\n"}, layers=[])

    assert sorted(m.module for m in missing_imports(out, "S")) == ["aws_lambda_powertools", "pydantic"]


def test_only_what_the_handler_loads_is_read(tmp_path: Path) -> None:
    """Tests and scripts beside the handler are never loaded on Lambda; a module of the asset the handler imports
    is read, its own imports included."""
    code = {
        "app.py": "from billing import rules\n",
        "billing/__init__.py": "",
        "billing/rules.py": "from .tables import FEES\n",
        "billing/tables.py": "import yaml\nFEES = {}\n",
        "tests/test_app.py": "import pytest\n",
        "scripts/seed.py": "import faker\n",
    }
    [missing] = missing_imports(_cdk_out(tmp_path, code), "S")

    assert (missing.module, missing.file) == ("yaml", "billing/tables.py")


def test_optional_and_type_only_imports_are_not_required(tmp_path: Path) -> None:
    code = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import mypy_boto3_sqs
try:
    import orjson as fastjson
except ImportError:
    fastjson = None
try:
    import ujson
except (ModuleNotFoundError, ValueError):
    ujson = None
import sys
if sys.version_info < (3, 11):
    import tomli
from contextlib import suppress
with suppress(ImportError):
    import simdjson
"""
    assert missing_imports(_cdk_out(tmp_path, {"app.py": code}), "S") == []


def test_a_module_removed_from_the_functions_python_is_missing(tmp_path: Path) -> None:
    """The host's Python 3.11 still has cgi; the function's python3.13 has not (PEP 594)."""
    new = _cdk_out(tmp_path / "new", {"app.py": "import cgi\nimport distutils\n"}, runtime="python3.13")
    old = _cdk_out(tmp_path / "old", {"app.py": "import cgi\n"}, runtime="python3.11")

    assert sorted(m.module for m in missing_imports(new, "S")) == ["cgi", "distutils"]
    assert missing_imports(old, "S") == []
    newest = _cdk_out(tmp_path / "newest", {"app.py": "import annotationlib\nfrom compression import zstd\n"})
    assert missing_imports(newest, "S") == [], "added by 3.14, unknown to the host's 3.11"


def test_the_allow_list_and_an_unread_layer(tmp_path: Path) -> None:
    foreign = "arn:aws:lambda:us-east-1:123456789012:layer:drivers:4"
    out = _cdk_out(tmp_path, {"app.py": "import psycopg\n"}, layers=[foreign])

    [missing] = missing_imports(out, "S")
    assert missing.unread_layers == (json.dumps(foreign),)
    assert "cannot be read here" in missing.line()
    assert missing_imports(out, "S", allowed=["psycopg"]) == []


def test_functions_of_other_runtimes_and_without_an_asset_are_not_read(tmp_path: Path) -> None:
    out = _cdk_out(tmp_path, {"app.py": "import psycopg\n"}, runtime="nodejs22.x")

    assert missing_imports(out, "S") == []
    with pytest.raises(DeployError, match="no synthesized template"):
        missing_imports(out, "Other")


def test_the_effects_example_ships_the_driver_the_local_run_has() -> None:
    """Its layer's pin is requirements-dev.txt's, where the local run gets psycopg from."""
    root = Path(__file__).resolve().parents[2]
    shipped = [line for line in (root / "examples/effects/drivers.txt").read_text().splitlines() if "psycopg" in line]
    pinned = [line for line in (root / "requirements-dev.txt").read_text().splitlines() if line.startswith("psycopg[")]

    assert shipped == pinned == ["psycopg[binary]==3.3.6"]
