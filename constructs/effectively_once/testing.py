"""Helpers for users' snapshot tests of stacks built with this library.

``normalize_template`` makes a synthesized template stable across handler edits, stray ``__pycache__``
directories (both change asset hashes) and CDK upgrades (version metadata).
"""

from __future__ import annotations

import re
from typing import Any

_HASH = re.compile(r"\b[0-9a-f]{64}\b")
#: Placeholder for every 64-hex asset hash.
ASSET_HASH = "<ASSET_HASH>"


def normalize_template(template: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of a CloudFormation template (the dict of ``Template.to_json()``) with:

    - every 64-hex string (asset hashes in ``S3Key``, asset paths, image tags) replaced by ``<ASSET_HASH>``,
      in values and keys;
    - the ``AWS::CDK::Metadata`` resource and its ``CDKMetadataAvailable`` condition removed (they encode
      the CDK version and construct analytics).

    The input is not modified.
    """
    result = _replace_hashes(template)
    resources = result.get("Resources", {})
    for logical_id in [k for k, v in resources.items() if v.get("Type") == "AWS::CDK::Metadata"]:
        del resources[logical_id]
    conditions = result.get("Conditions")
    if conditions is not None:
        conditions.pop("CDKMetadataAvailable", None)
        if not conditions:
            del result["Conditions"]
    return result


def _replace_hashes(value: Any) -> Any:
    if isinstance(value, str):
        return _HASH.sub(ASSET_HASH, value)
    if isinstance(value, dict):
        return {_replace_hashes(k): _replace_hashes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_hashes(v) for v in value]
    return value
