"""The local AWS's limits, named (issue 43, item 6): the resource types of a stack that the local AWS (moto's
CloudFormation) skipped, told apart from the ones that do not matter here, instead of a symptom.

moto's CloudFormation creates the resource types it has a model for and skips the others, with a line in its log
(``No Moto CloudFormation support for <type>``) and nothing else: the stack deploys without them, and lists each as a
resource with an empty logical id. A reference to a skipped resource fails the deploy instead (``Template error:
instance of Fn::GetAtt references undefined resource HttpApi``). So:

- after a deploy, :func:`skipped_resources` compares the synthesized template's resources with the ones the stack
  lists (``ListStackResources``): each template resource not listed was skipped (a resource with a ``Condition`` is
  left out: its condition may have been false);
- after a failed deploy, :func:`failure_hint` names the template's resources of the types moto's log says it skipped.

Two kinds of skipped type are not a limit of the run, and are said apart (``harmless``): the ones the local runner
reads from the template itself (:data:`READ_FROM_TEMPLATE`: Lambda's asynchronous invocation settings, SNS
subscriptions to a function), and the ones that change nothing locally (:data:`NO_LOCAL_EFFECT`: resource policies,
which the local AWS does not enforce, alarms and dashboards, which it does not evaluate, and the CDK's metadata).
Every other skipped type is named before the first message is sent, with the page that says what to do
(:data:`DOCS_PAGE`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Skipped by the local AWS, and read from the template by the local runner instead.
READ_FROM_TEMPLATE = frozenset({"AWS::Lambda::EventInvokeConfig", "AWS::SNS::Subscription"})
#: Skipped by the local AWS, and changing nothing a local run does.
NO_LOCAL_EFFECT = frozenset(
    {
        "AWS::CDK::Metadata",
        "AWS::SQS::QueuePolicy",
        "AWS::SNS::TopicPolicy",
        "AWS::S3::BucketPolicy",
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::CompositeAlarm",
        "AWS::CloudWatch::Dashboard",
    }
)
#: The page listing the known skipped types and what a user can do.
DOCS_PAGE = "docs/local-aws-limits.md"
_UNSUPPORTED = re.compile(r"No Moto CloudFormation support for (\S+)")


@dataclass(frozen=True)
class Skipped:
    """The template's resources a deployed stack lacks, by type (each type's logical ids, sorted): ``types``, the
    ones a run may miss, and ``harmless``, the ones it does not (module docstring)."""

    types: dict[str, list[str]] = field(default_factory=dict)
    harmless: dict[str, list[str]] = field(default_factory=dict)


def _by_type(resources: dict[str, Any], logical_ids: list[str]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    types: dict[str, list[str]] = {}
    harmless: dict[str, list[str]] = {}
    for logical in sorted(logical_ids):
        kind = str(resources[logical].get("Type"))
        (harmless if kind in READ_FROM_TEMPLATE | NO_LOCAL_EFFECT else types).setdefault(kind, []).append(logical)
    return dict(sorted(types.items())), dict(sorted(harmless.items()))


def skipped_resources(template: dict[str, Any], deployed: set[str]) -> Skipped:
    """The resources of ``template`` (its ``Resources``) that the stack does not list: ``deployed`` holds the
    logical ids ``ListStackResources`` gave."""
    missing = [
        logical
        for logical, res in template.items()
        if isinstance(res, dict) and "Condition" not in res and logical not in deployed
    ]
    return Skipped(*_by_type(template, missing))


def skipped_line(stack: str, skipped: Skipped) -> str | None:
    """The start-up line of a stack deployed with parts skipped (``None`` when none that matter were)."""
    if not skipped.types:
        return None
    named = "; ".join(f"{kind} ({', '.join(ids)})" for kind, ids in skipped.types.items())
    return (
        f"stack {stack} deployed without {sum(map(len, skipped.types.values()))} resources the local AWS skipped"
        f" (it has no model for their types): {named}. The run drives its queues and functions; whatever needs those"
        f" parts will not work locally: see {DOCS_PAGE} (leave them out of the local run with a context flag)"
    )


def unsupported_in_log(log_path: Path) -> list[str]:
    """The resource types the local AWS's log says it skipped, each once, in order; none when there is no log."""
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return list(dict.fromkeys(_UNSUPPORTED.findall(text)))


def failure_hint(template_path: Path, log_path: Path) -> str | None:
    """After a failed deploy: the template's resources of the types the local AWS's log says it skipped, and what to
    do (``None`` when there are none, or no template)."""
    try:
        resources: dict[str, Any] = json.loads(template_path.read_text(encoding="utf-8")).get("Resources") or {}
    except (OSError, ValueError):
        return None
    unsupported = set(unsupported_in_log(log_path)) - {"AWS::CDK::Metadata"}
    found = [logical for logical, res in resources.items() if isinstance(res, dict) and res.get("Type") in unsupported]
    types, _ = _by_type(resources, found)  # the harmless ones are skipped in every such stack: not the cause
    named = "; ".join(f"{kind} ({', '.join(ids)})" for kind, ids in types.items())
    if not named:
        return None
    return (
        f"the local AWS skipped these resources of the stack (it has no model for their types): {named}; a"
        f" reference to one (Ref, Fn::GetAtt, an output) fails the deploy: see {DOCS_PAGE} (leave them out of the"
        " local run with a context flag)"
    )
