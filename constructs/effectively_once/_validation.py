"""Shared configuration checks: each raises ``ValueError`` naming the prop, the value and the rule.

Values that are unresolved tokens are skipped (they are only known at deploy time). Issue 5 extends
this module with the full rule set of shared/DESIGN.md.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Token


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
