"""SQS's refusals in the tests' in-process moto: the local AWS's own (``effectively_once_local.aws.moto_refusals``,
issue 58), which moto 5.2.5 does not give (docs/local-aws-limits.md lists them)."""

from __future__ import annotations

import pytest

from effectively_once_local.aws import moto_refusals


def refuse_as_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now until the end of the test, moto in this process refuses the requests SQS refuses that moto as is
    accepts (a ``MessageDeduplicationId`` on a standard queue, more than 10 message attributes, ...), as the server
    the tooling starts does; moto's classes are restored after the test."""
    for cls, name in moto_refusals.patched_attributes():
        monkeypatch.setattr(cls, name, getattr(cls, name))
    moto_refusals.apply_refusals()
