"""Locate the sample payment Lambda's source, installed or in a checkout.

A wheel ships it as package data at ``effectively_once/_lambda_src/`` (pyproject's force-include: ``payments/``
and the runtime it runs on, ``effectively_once_runtime/``); in a source checkout (editable install, tests) it is the
repository's ``lambda_src/`` next to ``constructs/``. Either way the asset root is the directory *containing*
``payments/`` and ``effectively_once_runtime/``, so the handler is ``payments.handler.lambda_handler``.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from aws_cdk import aws_lambda as lambda_

#: Left out of the asset: byte code changes its hash without changing the code (and breaks snapshots).
ASSET_EXCLUDES = ["__pycache__", "*.pyc", "**/__pycache__"]


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
    """The asset of the sample payment Lambda, without byte code."""
    return lambda_.Code.from_asset(str(lambda_source_root()), exclude=ASSET_EXCLUDES)
