"""No silent flags (issue 43, item 3): a chaos fault that cannot strike on the stack is known before the first send.

Once ``cdk synth`` has written the stack's template, and before any message is sent, :func:`stack_facts` reads
what the stack holds for each function the run drives (an SQS event source mapping's, an asynchronous target's):

- the kinds of its targets (``standard``, ``fifo``, ``async``);
- whether its code is built on ``effectively_once_runtime`` (a ``.py`` file of its asset names the package, or the
  asset holds it): only such a handler writes the runtime's effect line, where ``--crash-after-effect`` kills and
  ``--timeouts`` may stall;
- whether it may make a write the runner watches (``chaos/faults.py``: DynamoDB, S3, SQS, SNS, a SQL commit): its
  role's policies allow one of :data:`~effectively_once_local.chaos.faults.WRITE_OPERATIONS` (wildcards matched as
  IAM does), its code names ``sqlite3`` or ``psycopg``, the run counts effects in a SQL store, or the stack does not
  say (a role from outside the stack, a managed policy other than Lambda's logging ones, code that is not an asset).
  Policies count when the role lists them or they name the role (``AWS::IAM::Policy`` and ``ManagedPolicy`` by
  ``Roles``, ``RolePolicy`` by ``RoleName``). Moto does not enforce IAM, so a write the role does not allow would still
  be accepted locally: a function whose role allows no watched write is taken at its word, as AWS would refuse the
  write.

:func:`inert_faults` names each fault class asked for that has no place on such a stack:

- ``after_effect`` (``--crash-after-effect``): no function on the runtime;
- ``after_write`` (``--crash-after-write``): no function that may make a watched write; ``throttle``
  (``--throttle``): none that may make one through boto3 (SQL commits are never throttled);
- ``stall`` (``--timeouts``): neither;
- ``concurrent_duplicate`` (``--concurrent-duplicates``): every target a FIFO queue (its deduplication id drops the
  twin);
- ``async_duplicate`` (``--async-duplicate``): no asynchronous target;
- ``partial_batch_write`` (``--partial-batch-writes``): no function whose role allows DynamoDB ``BatchWriteItem``;
- ``batch_entry_failure`` (``--batch-entry-failures``): no function whose role allows a batch call answered per entry
  (``sqs:SendMessage``, ``sqs:DeleteMessage``, ``sqs:ChangeMessageVisibility``, ``sns:Publish``: the actions
  ``SendMessageBatch``, ``DeleteMessageBatch``, ``ChangeMessageVisibilityBatch`` and ``PublishBatch`` need). A
  function fed by an SQS queue is allowed the delete and the visibility change by its event source's grant, so
  this refuses only a stack whose functions no queue feeds and which send nothing to SQS or SNS.

:func:`drawn` then refuses, in one line (:class:`InertFlagError`, exit code 2), each such class whose flag the user
gave, naming the flag that would strike instead; a class left at its default is left out of the draw (its fraction
0, so an invocation drawn for it is not spent on a fate that does nothing) and listed in the report's
``faults.left_out`` with why and what would strike.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..aws.deploy import DeployError
from ..aws.stack_template import code_dir, logical_id
from ..chaos.fault_classes import FAULT_CLASSES, ChaosConfig, FaultClass
from ..chaos.faults import WRITE_OPERATIONS

#: What a handler's code names when it is built on the runtime, and when it commits SQL the runner watches.
_RUNTIME, _SQL = b"effectively_once_runtime", (b"sqlite3", b"psycopg")
#: The IAM actions of the watched writes (``dynamodb:PutItem``, ...), matched against a policy's actions.
_WATCHED_ACTIONS = tuple(f"{service}:{op}".lower() for service, ops in WRITE_OPERATIONS.items() for op in sorted(ops))
#: Managed policies that allow no watched write: Lambda's logging and queue-polling roles.
_NON_WRITING_MANAGED = ("AWSLambdaBasicExecutionRole", "AWSLambdaSQSQueueExecutionRole")
_ESM, _INVOKE_CONFIG, _QUEUE = "AWS::Lambda::EventSourceMapping", "AWS::Lambda::EventInvokeConfig", "AWS::SQS::Queue"
_ROLE = "AWS::IAM::Role"
#: The policy resources a template attaches to a role (``Roles``, or ``RoleName`` for a role policy).
_ATTACHED = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy")
_BATCH_WRITE = "dynamodb:batchwriteitem"
#: The IAM actions the batch calls answered per entry need (Amazon SQS Developer Guide, "Amazon SQS batch actions":
#: the permission for SendMessage, DeleteMessage or ChangeMessageVisibility sets it for the batch version; SNS
#: ``PublishBatch`` takes ``sns:Publish``).
_BATCH_CALLS = ("sqs:sendmessage", "sqs:deletemessage", "sqs:changemessagevisibility", "sns:publish")


class InertFlagError(ValueError):
    """A fault flag the user gave cannot strike on the stack: one line naming it, why, and the flag that would."""


@dataclass(frozen=True)
class StackFacts:
    """What the stack's template says of the functions a run drives (module docstring). ``functions``: their logical
    ids; ``on_runtime`` and ``writing``: those built on the runtime, and those that may make a watched write."""

    stack: str
    kinds: frozenset[str]
    functions: tuple[str, ...]
    on_runtime: tuple[str, ...]
    writing: tuple[str, ...]
    #: Those whose role may call DynamoDB ``BatchWriteItem`` (``--partial-batch-writes``). :default: none.
    batch_writing: tuple[str, ...] = ()
    #: Those that may make a watched write through boto3 (their role allows one, or they are on the runtime, whose
    #: DLQ sends are): what ``--throttle`` strikes; SQL commits are not. :default: none.
    aws_writing: tuple[str, ...] = ()
    #: Those whose role may make an SQS or SNS batch call answered per entry (``--batch-entry-failures``). :default:
    #: none.
    batch_calling: tuple[str, ...] = ()


@dataclass(frozen=True)
class Inert:
    """A fault class asked for that cannot strike: its class, the fraction asked, why, and what strikes instead."""

    fault: FaultClass
    asked: float
    why: str
    instead: str

    def row(self) -> dict[str, Any]:
        """The report's ``faults.left_out`` entry."""
        return {"fault": self.fault.name, "flag": self.fault.flag, "asked": self.asked, "why": self.why}

    def line(self) -> str:
        return f"{self.fault.flag} {self.asked:g}: {self.why}; {self.instead}"


def _targets(resources: dict[str, Any]) -> dict[str, str]:
    """``{function logical id: kind}`` of every function the run drives: an SQS mapping's (``fifo`` or ``standard``,
    by its queue), an asynchronous target's (``async``); a function both ways keeps every kind (``standard+async``)."""
    found: dict[str, set[str]] = {}
    for res in resources.values():
        props = res.get("Properties") or {}
        function = logical_id(props.get("FunctionName"))
        if function is None:
            continue
        if res.get("Type") == _ESM:
            queue = resources.get(logical_id(props.get("EventSourceArn")) or "") or {}
            if queue.get("Type") != _QUEUE:
                continue
            fifo = str((queue.get("Properties") or {}).get("FifoQueue", "")).lower() == "true"
            found.setdefault(function, set()).add("fifo" if fifo else "standard")
        elif res.get("Type") == _INVOKE_CONFIG and props.get("Qualifier", "$LATEST") == "$LATEST":
            found.setdefault(function, set()).add("async")
    return {function: "+".join(sorted(kinds)) for function, kinds in found.items()}


def _named(folder: Path | None, words: tuple[bytes, ...]) -> set[bytes] | None:
    """The ``words`` a ``.py`` file of ``folder`` holds (or a folder or file in it is named), in one pass over the
    asset; ``None``: no folder (the template does not say)."""
    if folder is None:
        return None
    found: set[bytes] = set()
    for path in folder.rglob("*"):
        found |= {w for w in words if w.decode() == path.name}
        if path.suffix == ".py" and path.is_file():
            text = path.read_bytes()
            found |= {w for w in words if w in text}
        if found >= set(words):
            break
    return found


def _actions(document: Any) -> list[str] | None:
    """The actions a policy document allows; ``None`` for one the template does not spell out."""
    if not isinstance(document, dict):
        return None
    statements = document.get("Statement")
    out: list[str] = []
    for statement in statements if isinstance(statements, list) else [statements]:
        if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
            continue
        action = statement.get("Action")
        if isinstance(action, str):
            out.append(action)
        elif isinstance(action, list) and all(isinstance(a, str) for a in action):
            out.extend(action)
        else:
            return None
    return out


def _role_allows(resources: dict[str, Any], function: dict[str, Any], wanted: tuple[str, ...]) -> bool:
    """Whether the function's role may call one of ``wanted`` (IAM actions, lower case: module docstring; unknown
    counts as yes)."""
    role = logical_id((function.get("Properties") or {}).get("Role"))
    if role is None or (resources.get(role) or {}).get("Type") != _ROLE:
        return True
    props = resources[role].get("Properties") or {}
    managed = props.get("ManagedPolicyArns") or []
    if any(not any(name in json.dumps(arn) for name in _NON_WRITING_MANAGED) for arn in managed):
        return True
    documents = [p.get("PolicyDocument") for p in props.get("Policies") or [] if isinstance(p, dict)]
    for res in resources.values():
        policy = res.get("Properties") or {}
        attached = [logical_id(r) for r in policy.get("Roles") or []] + [logical_id(policy.get("RoleName"))]
        if res.get("Type") in _ATTACHED and role in attached:
            documents.append(policy.get("PolicyDocument"))
    for document in documents:
        actions = _actions(document)
        if actions is None:
            return True
        if any(fnmatch.fnmatch(w, a.lower()) for a in actions for w in wanted):
            return True
    return False


def stack_facts(cdk_out: Path, stack: str, *, sql_store: bool = False) -> StackFacts:
    """What ``<cdk_out>/<stack>.template.json`` holds for a chaos run (module docstring). ``sql_store``: the run
    counts effects in a SQL store (its commits are watched writes wherever they come from).

    :raises DeployError: the template is missing or not JSON.
    """
    path = cdk_out / f"{stack}.template.json"
    try:
        resources: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")).get("Resources") or {}
    except (OSError, ValueError) as exc:
        raise DeployError(f"stack {stack}: its synthesized template {path} cannot be read: {exc}") from exc
    targets = _targets(resources)
    on_runtime, writing, batch_writing, aws_writing, batch_calling = [], [], [], [], []
    for function in sorted(targets):
        resource = resources.get(function) or {}
        try:
            folder: Path | None = code_dir(cdk_out, stack, function)
        except DeployError:
            folder = None  # inline or image code: the template does not say
        named = _named(folder, (_RUNTIME, *_SQL))
        runtime = named is None or _RUNTIME in named
        if runtime:
            on_runtime.append(function)
        sql = named is None or bool(named & set(_SQL))
        aws = runtime or _role_allows(resources, resource, _WATCHED_ACTIONS)
        if aws:
            aws_writing.append(function)
        if aws or sql or sql_store:
            writing.append(function)
        if _role_allows(resources, resource, (_BATCH_WRITE,)):
            batch_writing.append(function)
        if _role_allows(resources, resource, _BATCH_CALLS):
            batch_calling.append(function)
    kinds = frozenset(kind for joined in targets.values() for kind in joined.split("+"))
    found = (tuple(on_runtime), tuple(writing), tuple(batch_writing), tuple(aws_writing), tuple(batch_calling))
    return StackFacts(stack, kinds, tuple(sorted(targets)), *found)


def _writes_instead(facts: StackFacts) -> str:
    return "--crash-after-write kills right after any handler's writes" if facts.writing else _NO_WRITE_INSTEAD


def _no_effect_line(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if facts.on_runtime:
        return None
    why = f"no function the run drives ({drives}) is built on effectively_once_runtime, so no effect line is ever"
    return why + " written", _writes_instead(facts)


def _no_aws_write(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if facts.aws_writing:
        return None
    why = f"no function the run drives ({drives}) may make a DynamoDB, S3, SQS or SNS write (its role allows none;"
    return why + " a SQL commit is never throttled)", _writes_instead(facts)


def _no_watched_write(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if facts.writing:
        return None
    return f"no function the run drives ({drives}) may make a write the runner watches{_WATCHED}", _NO_WRITE_INSTEAD


def _no_effect_line_or_write(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if facts.writing or facts.on_runtime:
        return None
    return (
        f"no function the run drives ({drives}) writes the runtime's effect line or may make a watched write{_WATCHED}",
        "--crash-random kills at a moment inside any invocation",
    )


def _no_non_fifo_target(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if not facts.kinds or not facts.kinds <= {"fifo"}:
        return None
    return (
        "every target is a FIFO queue, whose deduplication id drops the twin",
        "--resend sends FIFO copies after the deduplication interval",
    )


def _no_batch_write(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if facts.batch_writing:
        return None
    why = f"no function the run drives ({drives}) may call DynamoDB BatchWriteItem (its role does not allow it)"
    return why, _writes_instead(facts)


def _no_batch_call(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if facts.batch_calling:
        return None
    why = (
        f"no function the run drives ({drives}) may make an SQS or SNS batch call (its role allows none of"
        " sqs:SendMessage, sqs:DeleteMessage, sqs:ChangeMessageVisibility, sns:Publish)"
    )
    return why, _writes_instead(facts)


def _no_async_target(facts: StackFacts, drives: str) -> tuple[str, str] | None:
    if "async" in facts.kinds:
        return None
    return (
        "no asynchronous target (an EventBridge rule's, an SNS topic's or a directly invoked function)",
        "--resend and --concurrent-duplicates send an SQS target's keys again",
    )


#: Per place a fault class needs (``FaultClass.place``, ``chaos/fault_classes.py``): why the stack has none and the
#: flag that would strike instead (``None``: it has one). ``drives``: the functions the run drives, for the message.
_NO_PLACE: dict[str, Callable[[StackFacts, str], tuple[str, str] | None]] = {
    "effect_line": _no_effect_line,
    "aws_write": _no_aws_write,
    "watched_write": _no_watched_write,
    "effect_line_or_write": _no_effect_line_or_write,
    "non_fifo_target": _no_non_fifo_target,
    "async_target": _no_async_target,
    "batch_write": _no_batch_write,
    "batch_call": _no_batch_call,
}


def _place(cls: FaultClass, facts: StackFacts) -> tuple[str, str] | None:
    """Why fault class ``cls`` has no place on the stack, and the flag that would strike instead; ``None``: it has
    (or it needs none)."""
    if not facts.functions or cls.place is None:
        return None  # the template names its functions in a way not read here: nothing can be told
    return _NO_PLACE[cls.place](facts, ", ".join(facts.functions))


_WATCHED = " (its role allows no DynamoDB, S3, SQS or SNS write, and no SQL commit is in its code)"
_NO_WRITE_INSTEAD = "--crash-random kills at a moment inside any invocation, --crash-after-complete after it returned"


def inert_faults(chaos: ChaosConfig, facts: StackFacts) -> list[Inert]:
    """Each fault class asked for (fraction above 0) that cannot strike on the stack ``facts`` describe."""
    fractions = asdict(chaos)
    found = []
    for cls in FAULT_CLASSES:
        asked = float(fractions[cls.field])
        place = _place(cls, facts) if asked > 0 else None
        if place is not None:
            found.append(Inert(cls, asked, *place))
    return found


def drawn(chaos: ChaosConfig, facts: StackFacts, given: Collection[str]) -> tuple[ChaosConfig, list[dict[str, Any]]]:
    """The chaos a run draws on the stack: every fault class that cannot strike (:func:`inert_faults`) left out (its
    fraction 0), with its ``faults.left_out`` row. ``given``: the flags the user gave (``--crash-after-effect``, ...).

    :raises InertFlagError: a class that cannot strike whose flag is in ``given``: one line naming each such flag, why,
        and what would strike instead.
    """
    inert = inert_faults(chaos, facts)
    refused = [i for i in inert if i.fault.flag in given]
    if refused:
        lines = "; and ".join(i.line() for i in refused)
        raise InertFlagError(f"stack {facts.stack}: cannot strike, refused before the first send: {lines}")
    fractions: dict[str, Any] = {i.fault.field: 0.0 for i in inert}
    return replace(chaos, **fractions), [i.row() | {"instead": i.instead} for i in inert]
