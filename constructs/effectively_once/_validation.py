"""Shared configuration checks: errors (``ValueError``) and warnings naming the prop, the value, the rule
and its source.

Checks skip values that are unresolved tokens (they are only known at deploy time); settings *derived* from a
token are never skipped: they follow the token (:func:`template_seconds`) or, when CloudFormation cannot
compute them, the construct raises. The rules themselves,
with their sources, are listed in docs/validation.md; the AWS numbers they use live in ``limits.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import aws_cdk
from aws_cdk import Annotations, Duration, Token
from constructs import IConstruct

from . import limits

#: Prefix of every warning id this library adds (``Annotations.add_warning_v2``), so users can acknowledge
#: one with ``Annotations.of(scope).acknowledge_warning(id)``.
WARNING_ID_PREFIX = "effectively-once:"


def is_unresolved(value: Any) -> bool:
    """True when ``value`` (a number, string or Duration) is a token known only at deploy time."""
    if value is None:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        # A number token is a finite double; NaN and infinity cannot cross to jsii (the kernel fails on the JSON).
        return False
    if isinstance(value, Duration):
        return value.is_unresolved()
    return Token.is_unresolved(value)


def seconds(value: Duration | None) -> float | None:
    """A resolved Duration in seconds; ``None`` for ``None`` or an unresolved token (the check is skipped)."""
    if value is None or is_unresolved(value):
        return None
    return value.to_seconds()


def template_seconds(prop: str, value: Duration) -> float:
    """``value`` in seconds for a template property: a number, or for a deploy-time token a number token (it
    resolves to the token's own reference, e.g. ``{"Ref": "RetentionSeconds"}``).

    :raises ValueError: a token given in a unit other than seconds (``Duration.minutes(param)``): converting it
        needs arithmetic, which CloudFormation does not have.
    """
    if is_unresolved(value) and value.unit_label() != "seconds":
        raise fail(
            prop,
            value,
            "must be Duration.seconds(...) when it is a deploy-time token: it is written to the template in "
            "seconds, and CloudFormation has no arithmetic to convert another unit",
            limits.CFN_TOKEN_DOC,
        )
    return value.to_seconds()


@dataclass(frozen=True)
class Described:
    """A value a message shows by a description instead (``a 2100-byte value``): a long string, or a size."""

    text: str


def shown(value: Any) -> str:
    """A value as messages show it: a Duration in human units, a token as ``a deploy-time token``, a
    :class:`Described` value as its text."""
    if isinstance(value, Described):
        return value.text
    if isinstance(value, Duration):
        # A token Duration reads "<token> minutes": the unit is what the user can act on.
        return f"a deploy-time token ({value.to_human_string()})" if value.is_unresolved() else value.to_human_string()
    if is_unresolved(value):
        return "a deploy-time token"
    return repr(value)


def message(prop: str, value: Any, rule: str, source: str | None = None) -> str:
    """The library's message: ``<prop> <rule>, but <value> was given (source: ...)``."""
    text = f"{prop} {rule}, but {shown(value)} was given"
    if source:
        text += f" (source: {source})"
    return text


def fail(prop: str, value: Any, rule: str, source: str | None = None) -> ValueError:
    """Build the library's error (see :func:`message`)."""
    return ValueError(message(prop, value, rule, source))


def check_type(prop: str, value: Any, expected: type | tuple[type, ...], what: str, *, optional: bool = False) -> None:
    """Raise the library's error when ``value`` is not an instance of ``expected`` (``None`` allowed when
    ``optional``): a wrong type otherwise surfaces later as an ``AttributeError`` that names no prop.

    :param what: the expected type as the message shows it, e.g. ``"a ProcessingQueue or an ExistingQueue"``.
    """
    if value is None and optional:
        return
    if isinstance(expected, type) and expected is bool:
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, expected) and not isinstance(value, bool)
    if not ok:
        raise fail(prop, value, f"must be {what}{' or None' if optional else ''}")


def warn(scope: IConstruct, id: str, prop: str, value: Any, rule: str, source: str) -> None:
    """Add a warning on ``scope`` (id ``effectively-once:<id>``) worded as :func:`message`."""
    Annotations.of(scope).add_warning_v2(WARNING_ID_PREFIX + id, message(prop, value, rule, source))


def _number(value: float) -> str:
    """``10000`` for 10000.0, ``0.5`` for 0.5 (never an exponent)."""
    return str(int(value)) if float(value).is_integer() else str(value)


def check_int(prop: str, value: Any, source: str | None = None) -> bool:
    """Raise unless ``value`` is ``None``, a deploy-time token or an ``int``: every prop this library types ``int``.

    A float (even ``3.0``), NaN, infinity, a bool or a string fails here, before it reaches jsii: CloudFormation
    takes an integer, a float would be synthesized as is, and NaN or infinity crash the jsii kernel. A number token
    (``CfnParameter.value_as_number``) is a finite float in Python: it is recognised and skipped.

    :returns: whether ``value`` is a resolved ``int`` (the caller's range checks apply).
    """
    if value is None:
        return False
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    if isinstance(value, float) and is_unresolved(value):
        return False
    raise fail(prop, value, "must be an int (not a float, NaN, infinity, bool or string)", source)


def check_range(prop: str, value: float | None, low: float, high: float, source: str, *, integer: bool = True) -> None:
    """Raise when a resolved ``value`` lies outside ``low..high`` (inclusive).

    :param integer: ``value`` is an ``int`` prop (:func:`check_int` first); ``False`` for a number the library
        computed itself (seconds of a Duration).
    """
    if integer:
        if not check_int(prop, value, source):
            return
    elif value is None or is_unresolved(value):
        return
    assert value is not None
    if not low <= value <= high:
        raise fail(prop, value, f"must be between {_number(low)} and {_number(high)}", source)


def check_duration_range(prop: str, value: Duration | None, low: float, high: float, source: str) -> None:
    """Raise when a resolved Duration lies outside ``low..high`` seconds (inclusive); shown in human units."""
    value_seconds = seconds(value)
    if value_seconds is not None and not low <= value_seconds <= high:
        raise fail(prop, value, f"must be between {_number(low)} and {_number(high)} seconds", source)


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
