"""One execution environment's pieces: the handler loaded in process, the Lambda context, and the handler's stdout.

The handler is loaded in process from its code folder (the function's CDK asset) with the runtime package
(``effectively_once_runtime``) after it on ``sys.path``, where a Lambda layer would put it (``/opt/python`` comes
after the function's own code): locally moto ignores layers, so the runner plays the layer's part. The handler's
stdout passes through ``EffectTap``, which sees the runtime's effect lines as they are written.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..aws.mapping_config import MappingConfig
from ..chaos.fault_model import EventLog, InvocationChaos
from .poller_spec import PollerSpec


def packaged_lambda_src() -> Path:
    """The sample's source inside the installed library (``effectively_once/_lambda_src``, the wheel's package data),
    found without importing the library."""
    spec = importlib.util.find_spec("effectively_once")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return (Path(locations[0]) if locations else Path(__file__).resolve().parent) / "_lambda_src"


def runtime_root() -> str | None:
    """The folder holding the ``effectively_once_runtime`` package: the installed one, else the repository's
    ``lambda_src``, else the copy inside the wheel (``effectively_once/_lambda_src``)."""
    spec = importlib.util.find_spec("effectively_once_runtime")
    if spec is not None and spec.submodule_search_locations:
        return str(Path(list(spec.submodule_search_locations)[0]).parent)
    # tools/effectively_once_local/runner/execution_environment.py: the repository is three folders up.
    for candidate in (Path(__file__).resolve().parents[3] / "lambda_src", packaged_lambda_src()):
        if (candidate / "effectively_once_runtime" / "__init__.py").is_file():
            return str(candidate)
    return None


#: The runtime's effect line carries this message; matched as text first so that the tap parses only the lines that
#: may be effect lines.
EFFECT_MESSAGE = names.EFFECT_EXECUTED


class EffectTap(io.TextIOBase):
    """The handler's stdout: every write goes to ``sink`` at once; each complete line that is the runtime's effect
    line (JSON, ``message`` = ``effect executed``) is then handed to ``on_effect(idempotency_key, effect)``. The
    runtime flushes the line right after the effect returned, so the callback runs after the effect and before the
    record is completed — where a kill is "after the effect, before completion"."""

    def __init__(self, sink: Any, on_effect: Callable[[Any, Any], None], message: str = EFFECT_MESSAGE) -> None:
        super().__init__()
        self._sink = sink
        self._on_effect = on_effect
        self._message = message
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._sink.write(text)
        self._partial += text
        if "\n" in self._partial:
            self._sink.flush()
            *lines, self._partial = self._partial.split("\n")
            for line in lines:
                if self._message in line:
                    self._effect_line(line)
        return len(text)

    def _effect_line(self, line: str) -> None:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            return
        if isinstance(doc, dict) and doc.get(names.FIELD_MESSAGE) == self._message:
            self._on_effect(doc.get(names.FIELD_IDEMPOTENCY_KEY), doc.get(names.FIELD_EFFECT))

    def flush(self) -> None:
        self._sink.flush()


class LocalLambdaContext:
    """Lambda context with a real deadline: ``get_remaining_time_in_millis`` counts down from the timeout."""

    def __init__(self, mapping: MappingConfig, deadline: float) -> None:
        self.function_name = mapping.function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = mapping.function_memory_mb
        # The function lives in the queue's partition, region and account (arn:<partition>:sqs:<region>:<account>:...).
        partition, _, region, account = mapping.queue_arn.split(":")[1:5]
        self.invoked_function_arn = f"arn:{partition}:lambda:{region}:{account}:function:{mapping.function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{mapping.function_name}"
        self.log_stream_name = f"local/{os.getpid()}"
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def load_handler(spec: PollerSpec, chaos: InvocationChaos, provider_log: EventLog) -> Callable[..., Any]:
    """The function's handler (``module.attribute``), imported in process after the profile's seam, if any, was
    installed with ``chaos`` and ``provider_log``."""
    # The function's code first, then the runtime where its layer would be (after the code, like /opt/python).
    root = runtime_root()
    if root is not None and root not in sys.path:
        sys.path.insert(0, root)
    sys.path.insert(0, spec.handler_root)
    if spec.seam:
        module, _, function = spec.seam.partition(":")
        getattr(importlib.import_module(module), function)(chaos, provider_log)
    module_name, _, attr = spec.mapping.handler.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)  # type: ignore[no-any-return]
