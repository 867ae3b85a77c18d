"""Locate the sample payment Lambda's source, installed or in a checkout.

A wheel ships it as package data at ``effectively_once/_lambda_src/payments/`` (pyproject's force-include); in a
source checkout (editable install, tests) it is the repository's ``lambda_src/`` next to ``constructs/``. Either
way the asset root is the directory *containing* ``payments/``, so the handler is ``payments.handler.lambda_handler``.
The asset holds ``payments/`` only: the runtime it runs on comes from the function's :class:`RuntimeLayer`, as for a
user's function (a copy in the asset would shadow the layer's: ``/var/task`` comes first on ``sys.path``).
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

#: Left out of the asset: byte code changes its hash without changing the code (and breaks snapshots).
ASSET_EXCLUDES = ["__pycache__", "*.pyc", "**/__pycache__"]
#: Left out of the sample's asset besides: every top-level entry of the source root but ``payments/`` (in a
#: checkout, ``lambda_src/`` also holds the runtime package, which the function gets from its layer).
SAMPLE_PACKAGE = "payments"


def lambda_source_root() -> Path:
    """The directory holding the ``payments`` package.

    :raises FileNotFoundError: neither the packaged copy nor the checkout's ``lambda_src/`` exists.
    """
    packaged = importlib.resources.files("effectively_once") / "_lambda_src"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parent.parent.parent / "lambda_src"
    if (checkout / "payments").is_dir():
        return checkout
    raise FileNotFoundError(
        f"the payment Lambda's source was found neither at {packaged} (installed wheel) nor at {checkout} (checkout)"
    )


def payment_function_code() -> lambda_.Code:
    """The asset of the sample payment Lambda: ``payments/`` without byte code."""
    root = lambda_source_root()
    others = sorted(p.name for p in root.iterdir() if p.name != SAMPLE_PACKAGE)
    return lambda_.Code.from_asset(str(root), exclude=[*ASSET_EXCLUDES, *others])
