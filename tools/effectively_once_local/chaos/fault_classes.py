"""One table of fault classes (issue 56, item 1): each kind of fault a chaos run can ask for, as one row of
:data:`FAULT_CLASSES`, and the chaos configuration the rows fill (:class:`ChaosConfig`).

A row holds all the tooling knows of its kind but how it is injected: its name in the report (the ``faults`` block's
keys), its :class:`ChaosConfig` field, its flag per command (``chaos``, ``demo``: name, default, help), what makes it
strike (shown when it did not), the place it needs on a stack (``place``: checked before the first send by
``any_stack/inert_faults.py`` and after the run by ``proof/faults_struck.py``), how it is counted (the report's paths
summed) and, for a kill or stall, its fate in the per-invocation draw (:meth:`ChaosConfig.fates`). From the rows are
built: both commands' fraction flags, their checks and their :class:`ChaosConfig` (``cli/fault_flags.py``), the draw,
the inert checks and the struck counts. ``tests/local/test_fault_classes.py`` holds every one of them to the table,
and fails on a flag accepted and never used.

A new fault kind is one row here (and its :class:`ChaosConfig` field beside it), plus its injector:
``fault_model.InvocationChaos`` for a kill or a stall (a new phase in ``fault_model.KILL_PHASES``), ``chaos/
sdk_faults.py`` for an SDK fault. A kind drawn per invocation takes the next ``draw`` turn, so a seed draws the fates
it drew before. A ``place`` not known yet also needs its rule in both checks (the test names the one missing).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: The commands whose flags the table builds.
COMMANDS = ("chaos", "demo")


@dataclass(frozen=True)
class Flag:
    """One command's flag for a fault class: ``--name``, its default fraction and its help."""

    name: str
    default: float
    help: str

    @property
    def dest(self) -> str:
        """Its ``argparse`` destination: ``--crash-after-effect`` -> ``crash_after_effect``."""
        return self.name.removeprefix("--").replace("-", "_")


@dataclass(frozen=True)
class FaultClass:
    """One fault class (module docstring). ``chaos``, ``demo``: its flag per command (``demo`` ``None``: the demo
    does not draw it). ``counted``: the report's paths (``("total", "kills", "after_write")``) whose counts add up
    to how many struck. ``place``: what a stack must hold for it to strike (``None``: any stack). ``fate``: its kill
    phase in the per-invocation draw, and ``draw`` its turn there (``None``: drawn apart, per key, event or call)."""

    name: str
    field: str
    chaos: Flag
    demo: Flag | None
    strikes: str
    counted: tuple[tuple[str, ...], ...]
    place: str | None = None
    fate: str | None = None
    draw: int | None = None

    @property
    def flag(self) -> str:
        """The chaos command's flag: the one the report's rows name."""
        return self.chaos.name

    def flag_of(self, command: str) -> Flag | None:
        """Its flag in ``command`` (one of :data:`COMMANDS`); ``None``: that command does not draw it."""
        return {"chaos": self.chaos, "demo": self.demo}[command]


def _kills(phase: str) -> tuple[tuple[str, ...], ...]:
    return (("total", "kills", phase),)


_WRITE_HELP = (
    "fraction of invocations killed right after a write the local AWS accepted (any effect, declared or not, or a DLQ"
    " send; each write in turn with even odds)"
)
_THROTTLE_HELP = (
    "fraction of the handler's write calls (DynamoDB, S3, SQS, SNS) failing with the service's throttling error"
    " (ProvisionedThroughputExceededException, SlowDown, RequestThrottled, Throttled) as after the SDK's own retries"
    " (never on the idempotency table; the handler must fail the record, not swallow it)"
)
_BATCH_HELP = (
    "fraction of DynamoDB BatchWriteItem calls answered with some or all of their requests in UnprocessedItems, a"
    " batch of one included, as an over-capacity table answers (never on the idempotency table; the handler must"
    " write them again)"
)
_ENTRIES_HELP = (
    "fraction of the entries of the handler's SQS SendMessageBatch, DeleteMessageBatch, ChangeMessageVisibilityBatch"
    " and SNS PublishBatch calls not performed and listed under Failed (SenderFault false, InternalError), as AWS"
    " answers in part with HTTP 200 (the handler must send them again)"
)

#: Every fault class, in the report's order (the ``faults`` block's keys). The per-invocation draw goes by ``draw``.
FAULT_CLASSES: tuple[FaultClass, ...] = (
    FaultClass(
        "after_effect",
        "crash_after_charge",
        Flag("--crash-after-effect", 0.03, "fraction of invocations killed at an effect line, before completion"),
        Flag(
            "--crash-after-charge", 0.03, "fraction of invocations killed after the charge, before its record completes"
        ),
        "kills at the runtime's effect line, so only a handler on effectively_once_runtime with a declared effect;"
        " --crash-after-write kills after any handler's writes",
        _kills("after_effect"),
        place="effect_line",
        fate="after_charge",
        draw=1,
    ),
    FaultClass(
        "after_write",
        "crash_after_write",
        Flag("--crash-after-write", 0.05, _WRITE_HELP),
        None,
        "kills after a write the local AWS accepted (DynamoDB, S3, SQS, SNS, a SQL commit): raise it or send more"
        " lines",
        _kills("after_write"),
        place="watched_write",
        fate="after_write",
        draw=4,
    ),
    FaultClass(
        "random_moment",
        "crash_random",
        Flag("--crash-random", 0.02, "fraction of invocations killed at a random moment inside the invocation"),
        None,
        "a moment drawn within twice the longest invocation so far (at least 1 s) strikes only if the invocation"
        " still runs then: a higher fraction or more lines",
        _kills("random_moment"),
        fate="random_moment",
        draw=5,
    ),
    FaultClass(
        "after_complete",
        "crash_after_complete",
        Flag(
            "--crash-after-complete",
            0.03,
            "fraction of invocations killed after the handler returned, before its delete",
        ),
        Flag(
            "--crash-after-complete",
            0.03,
            "fraction of invocations killed after the handler returned, before its delete",
        ),
        "one draw per invocation: raise it or send more lines",
        _kills("after_complete"),
        fate="after_complete",
        draw=2,
    ),
    FaultClass(
        "stall",
        "timeout",
        Flag(
            "--timeouts",
            0.02,
            "fraction of invocations stalled past the deadline at the first write the local AWS accepts (or effect"
            " line)",
        ),
        Flag("--timeouts", 0.02, "fraction of invocations stalled past the deadline"),
        "stalls at the first write the local AWS accepts or the effect line, so a handler with neither is never"
        " stalled; --crash-random strikes any handler",
        _kills("timeout"),
        place="effect_line_or_write",
        fate="timeout",
        draw=3,
    ),
    FaultClass(
        "resend",
        "resend",
        Flag("--resend", 0.10, "fraction of keys a producer resends"),
        Flag("--resend", 0.10, "fraction of payments a producer resends"),
        "one draw per key: raise it or send more keys",
        (("sends", "by_kind", "resend"), ("sends", "by_kind", "late_resend")),
    ),
    FaultClass(
        "concurrent_duplicate",
        "concurrent_duplicates",
        Flag("--concurrent-duplicates", 0.05, "fraction sent twice at once"),
        Flag("--concurrent-duplicates", 0.05, "fraction sent twice at once"),
        "never on a FIFO queue (its deduplication id drops the twin): --resend sends FIFO copies after the"
        " deduplication interval",
        (("sends", "by_kind", "concurrent_duplicate"),),
        place="non_fifo_target",
    ),
    FaultClass(
        "async_duplicate",
        "async_duplicate",
        Flag(
            "--async-duplicate",
            0.10,
            "fraction of the events to an asynchronous target (an EventBridge rule's or SNS topic's function) that"
            " Lambda's asynchronous queue delivers twice without an error",
        ),
        Flag(
            "--async-duplicate",
            0.10,
            "fraction of the events through the bus that Lambda's asynchronous queue delivers twice without an error",
        ),
        "only an asynchronous target (an EventBridge rule's, an SNS topic's or a directly invoked function) is"
        " delivered twice",
        (("async", "delivered_twice"),),
        place="async_target",
    ),
    FaultClass(
        "partial_batch_write",
        "partial_batch_write",
        Flag("--partial-batch-writes", 0.0, _BATCH_HELP),
        None,
        "a DynamoDB BatchWriteItem call off the idempotency table, one drawn per call, answered with some or all of its"
        " requests in UnprocessedItems: raise it or send more lines",
        (("sdk_faults", "by_kind", "unprocessed_items"),),
        place="batch_write",
    ),
    FaultClass(
        "throttle",
        "throttle",
        Flag("--throttle", 0.0, _THROTTLE_HELP),
        None,
        "a write call the runner watches (DynamoDB, S3, SQS, SNS), off the idempotency table, failing with the"
        " service's throttling error: raise it or send more lines",
        (("sdk_faults", "by_kind", "throttled"),),
        place="aws_write",
    ),
    FaultClass(
        "batch_entry_failure",
        "batch_entry_failure",
        Flag("--batch-entry-failures", 0.0, _ENTRIES_HELP),
        Flag("--batch-entry-failures", 0.0, _ENTRIES_HELP),
        "an entry of the handler's SQS or SNS batch call (SendMessageBatch, DeleteMessageBatch,"
        " ChangeMessageVisibilityBatch, PublishBatch), each entry drawn, answered under Failed: raise it or send more"
        " lines",
        (("sdk_faults", "by_kind", "failed_entries"),),
        place="batch_call",
    ),
)
#: A kill record's phase -> the class it counts for (each kill class's ``counted`` path, ``("total", "kills", phase)``):
#: a stall's kill is ``timeout``, a kill at the runtime's effect line ``after_effect``.
CLASS_OF_PHASE: dict[str, FaultClass] = {
    path[2]: cls for cls in FAULT_CLASSES for path in cls.counted if path[:2] == ("total", "kills")
}
#: The classes of the per-invocation draw, in its order (:meth:`ChaosConfig.fates`).
DRAWN: tuple[FaultClass, ...] = tuple(
    sorted((c for c in FAULT_CLASSES if c.draw is not None), key=lambda c: c.draw or 0)
)


def of_command(command: str) -> tuple[tuple[FaultClass, Flag], ...]:
    """The classes ``command`` draws, each with its flag there, in the table's order."""
    return tuple((c, flag) for c in FAULT_CLASSES if (flag := c.flag_of(command)) is not None)


def count(report: dict[str, Any], cls: FaultClass) -> int:
    """How many of ``cls`` struck: its ``counted`` paths' numbers in ``report`` added up (0 for a path missing)."""
    total = 0
    for path in cls.counted:
        node: Any = report
        for step in path:
            node = node.get(step) if isinstance(node, dict) else None
        total += int(node or 0)
    return total


@dataclass(frozen=True)
class ChaosConfig:
    """Fractions in 0..1, one field per fault class (:data:`FAULT_CLASSES`' ``field``), and the ``seed``. Per
    invocation, one draw picks at most one fate (:meth:`fates`): ``crash_after_charge`` (a kill after the side
    effect, before the record is completed: the payments charge, or any runtime handler's effect line),
    ``crash_after_complete``, ``timeout`` (a stall past the deadline: at the gateway seam, else at the first write the
    local AWS accepts or the effect line, whichever comes first), ``crash_after_write`` (a kill after a write the local
    AWS accepted, each such write of the invocation in turn with even odds, ``chaos/faults.py``) and ``crash_random`` (a
    kill at a random moment of the invocation, within twice its environment's longest invocation:
    ``InvocationChaos.random_window``); their sum is at most 1. ``resend`` and ``concurrent_duplicates`` are per
    key (the producer sends those twice). ``async_duplicate`` is per event of an asynchronous target
    (``aws.mapping_config.AsyncConfig``): the share of events that succeeded and are invoked once more at once,
    without an error, as Lambda's asynchronous queue occasionally delivers an event twice (AWS Lambda Developer Guide,
    "Invoking a Lambda function asynchronously"); it is drawn apart from the fates and not in their sum.

    :raises ValueError: a fraction outside 0..1, or fates adding up to more than 1.
    """

    resend: float = 0.0
    concurrent_duplicates: float = 0.0
    crash_after_charge: float = 0.0
    crash_after_complete: float = 0.0
    timeout: float = 0.0
    seed: int = 7
    crash_after_write: float = 0.0
    crash_random: float = 0.0
    #: :default: 0.0 (no duplicate deliveries).
    async_duplicate: float = 0.0
    #: Per DynamoDB ``BatchWriteItem`` call: the share answered with some or all of its requests in
    #: ``UnprocessedItems`` (``chaos/sdk_faults.py``); drawn apart from the fates. :default: 0.0.
    partial_batch_write: float = 0.0
    #: Per watched write call: the share failing with the service's throttling error, as after the SDK's retries
    #: (``chaos/sdk_faults.py``); drawn apart from the fates. :default: 0.0.
    throttle: float = 0.0
    #: Per entry of the handler's SQS and SNS batch calls answered per entry: the share not performed and listed
    #: under ``Failed`` (``chaos/sdk_faults.py``); drawn apart from the fates. :default: 0.0.
    batch_entry_failure: float = 0.0

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name != "seed" and not 0.0 <= value <= 1.0:
                raise ValueError(f"chaos fraction {name} must be between 0 and 1, but {value!r} was given")
        if sum(self.fates().values()) > 1.0:
            raise ValueError(f"the per-invocation fractions {', '.join(self.fates())} must not add up to more than 1")

    def fates(self) -> dict[str, float]:
        """The per-invocation fates (kill phases) and their fractions, in the order one draw picks among them
        (:data:`DRAWN`: the older ones first, so a seed draws the same fates as before for a config without the
        newer ones)."""
        return {str(c.fate): float(getattr(self, c.field)) for c in DRAWN}

    @property
    def enabled(self) -> bool:
        return any(v > 0 for k, v in asdict(self).items() if k != "seed")
