"""Helpers for users' snapshot tests of stacks built with this library.

``normalize_template`` makes a synthesized template stable across handler edits, stray ``__pycache__``
directories (both change asset hashes) and CDK upgrades (version metadata); ``snapshot_template`` synthesizes
a stack and normalises it in one call. With syrupy (``pip install syrupy``), in a test module::

    from aws_cdk import App, Stack
    from syrupy.extensions.json import JSONSnapshotExtension

    from effectively_once import PaymentProcessor
    from effectively_once.testing import snapshot_template


    def test_payments_stack(snapshot):
        stack = Stack(App(), "Payments")
        PaymentProcessor(stack, "Payments")
        assert snapshot_template(stack) == snapshot.use_extension(JSONSnapshotExtension)

The first ``pytest --snapshot-update`` writes ``__snapshots__/<module>/test_payments_stack.json``; later runs
fail on any change to the template except asset hashes and CDK version metadata. Importing this module does
not import aws-cdk-lib (``snapshot_template`` imports it when called).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_cdk import Stack
    from aws_cdk.assertions import Template

_HASH = re.compile(r"\b[0-9a-f]{64}\b")
#: Placeholder for every 64-hex asset hash.
ASSET_HASH = "<ASSET_HASH>"


def normalize_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of a CloudFormation template (the dict of ``Template.to_json()``) with:

    - every 64-hex string (asset hashes in ``S3Key``, asset paths, image tags) replaced by ``<ASSET_HASH>``,
      in values and keys;
    - the ``AWS::CDK::Metadata`` resource and its ``CDKMetadataAvailable`` condition removed (they encode
      the CDK version and construct analytics).

    The input is not modified.
    """
    result: dict[str, Any] = _replace_hashes(template)
    resources = result.get("Resources", {})
    for logical_id in [k for k, v in resources.items() if v.get("Type") == "AWS::CDK::Metadata"]:
        del resources[logical_id]
    conditions = result.get("Conditions")
    if conditions is not None:
        conditions.pop("CDKMetadataAvailable", None)
        if not conditions:
            del result["Conditions"]
    return result


def snapshot_template(stack: Stack | Template) -> dict[str, Any]:
    """Synthesize ``stack`` and return its template normalised by :func:`normalize_template`.

    :param stack: the stack to synthesize (with ``aws_cdk.assertions.Template.from_stack``; its app's context
        and feature flags apply), or an already synthesized ``Template`` (saves a synth in a test module that
        has one).
    :returns: a JSON-serialisable dict, to compare with a syrupy ``snapshot`` (``JSONSnapshotExtension``).
    """
    from aws_cdk.assertions import Template

    template = stack if isinstance(stack, Template) else Template.from_stack(stack)
    return normalize_template(template.to_json())


def _replace_hashes(value: Any) -> Any:
    if isinstance(value, str):
        return _HASH.sub(ASSET_HASH, value)
    if isinstance(value, Mapping):
        return {_replace_hashes(k): _replace_hashes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_hashes(v) for v in value]
    return value
