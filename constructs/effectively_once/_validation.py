"""Shared configuration checks: each raises ``ValueError`` naming the prop, the value and the rule.

Values that are unresolved tokens are skipped (they are only known at deploy time). Issue 5 extends
this module with the full rule set of shared/DESIGN.md.
"""

from __future__ import annotations

from typing import Any

import aws_cdk
from aws_cdk import Duration, Token
from constructs import IConstruct


def is_unresolved(value: Any) -> bool:
    """True when ``value`` (a number, string or Duration) is a token known only at deploy time."""
    if value is None:
        return False
    if isinstance(value, Duration):
        return value.is_unresolved()
    return Token.is_unresolved(value)


def fail(prop: str, value: Any, rule: str, source: str | None = None) -> ValueError:
    """Build the library's error: ``<prop> <rule>, but <value> was given (source: ...)``."""
    shown = value.to_human_string() if isinstance(value, Duration) and not value.is_unresolved() else repr(value)
    message = f"{prop} {rule}, but {shown} was given"
    if source:
        message += f" (source: {source})"
    return ValueError(message)


def check_range(prop: str, value: float | None, low: float, high: float, source: str) -> None:
    """Raise when a resolved ``value`` lies outside ``low..high`` (inclusive)."""
    if value is None or is_unresolved(value):
        return
    if not low <= value <= high:
        raise fail(prop, value, f"must be between {low:g} and {high:g}", source)


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge a rule-pack finding (cdk-nag 3.x) on ``scope``, with the reason a reviewer reads.

    ``scope`` should be the narrowest construct: the L1 resource the finding is about. The acknowledgement is
    construct metadata (``Validations.ACKNOWLEDGED_RULES_METADATA_KEY``): the template does not change, and
    the library needs no cdk-nag dependency. CDK versions without ``Validations`` get no acknowledgement.

    :param rule_id: the pack's rule id, e.g. ``Serverless-LambdaDLQ``.
    :param reason: why the finding does not apply (shown in cdk-nag's audit trail).
    """
    validations = getattr(aws_cdk, "Validations", None)
    if validations is not None:
        validations.of(scope).acknowledge(aws_cdk.Acknowledgment(id=rule_id, reason=reason))
