"""AWS's refusals in the tests' in-process moto: the local AWS's own (``effectively_once_local.aws.moto_refusals``
for SQS, ``moto_sns_lambda_refusals`` for SNS and Lambda; issue 58), which moto 5.2.5 does not give
(docs/local-aws-limits.md lists them)."""

from __future__ import annotations

import pytest

from effectively_once_local.aws import moto_refusals, moto_sns_lambda_refusals


def refuse_as_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now until the end of the test, moto in this process refuses the requests AWS refuses that moto as is
    accepts (a ``MessageDeduplicationId`` on a standard queue, more than 10 message attributes, an asynchronous
    ``Invoke`` over 1 MB, ...) and answers them with AWS's error, as the server the tooling starts does; moto's
    classes are restored after the test."""
    for cls, name in [*moto_refusals.patched_attributes(), *moto_sns_lambda_refusals.patched_attributes()]:
        monkeypatch.setattr(cls, name, getattr(cls, name))
    moto_refusals.apply_refusals()
    moto_sns_lambda_refusals.apply_sns_lambda_refusals()
