"""The local tooling's tests (``effectively_once_local``): shared settings; the runtime's helpers stay in
``tests/runtime/conftest.py``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from effectively_once_local.aws.mapping_config import MappingConfig
from effectively_once_local.aws.server import ACCOUNT, REGION

PARTITION = "aws"  # REGION's partition: ARNs are built from it, never from a literal "arn:aws:"
REPO = Path(__file__).resolve().parents[2]
#: This checkout's packages first, for a subprocess: the tooling, the library and the runtime under test, whatever
#: the environment's editable install points at.
SOURCE_PATH = os.pathsep.join(str(REPO / folder) for folder in ("tools", "constructs", "lambda_src"))


def source_env(**overrides: str) -> dict[str, str]:
    """``os.environ`` with :data:`SOURCE_PATH` first on ``PYTHONPATH``, and ``overrides``."""
    path = os.pathsep.join(p for p in (SOURCE_PATH, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **overrides}


def mapping_config(**overrides: Any) -> MappingConfig:
    """A local event source mapping's settings (``effectively_once_local.runner.mapping_runner.MappingConfig``) for a
    standard queue with the sandbox's defaults (batch 10, visibility timeout 12 s, maxReceiveCount 5, 2 s function
    timeout), with ``overrides``."""
    fields: dict[str, Any] = {
        "label": "standard",
        "queue_url": "http://localhost/q",
        "queue_arn": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:q",
        "batch_size": 10,
        "batching_window_seconds": 0,
        "visibility_timeout_seconds": 12,
        "max_receive_count": 5,
        "function_name": "f",
        "function_timeout_seconds": 2,
        "function_memory_mb": 256,
        "function_env": {},
        "handler": "payments.handler.lambda_handler",
    }
    return MappingConfig(**{**fields, **overrides})
