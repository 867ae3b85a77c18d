"""A chaos run's options (:class:`ChaosOptions`: the chaos command's flags, or a test's) and the context computed once
from them: how the run reads a business key (:class:`Keys`), the stores it counts effects in (:class:`StoreSpecs`),
how it drives the stack (:class:`DriveSettings`) and where its verdict goes (:class:`Verdict`).
``chaos_run.run_chaos`` alone takes the whole options; each step of the run takes the parts it needs
(``tests/local/test_chaos_context.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from effectively_once_runtime import names
from effectively_once_runtime.events import Expression
from effectively_once_runtime.identity import normalizer

from ..chaos.fault_model import ChaosConfig
from ..chaos.write_services import SqlCommits
from ..proof.key_check import log_lines
from ..proof.store_kinds import kind_of
from ..proof.stores import EffectStore
from ..traffic.chaos_input import InputFileError, body_key, compile_key


@dataclass(frozen=True)
class Keys:
    """How the run reads a business key: ``expression`` (``--key``, JMESPath over a body) with the ``normalize`` steps
    (``--normalize``), compiled once, and the runtime's log lines of the run in ``run_dir``.

    :raises InputFileError: (on first use of :attr:`path`) not a JMESPath expression the runtime accepts, or an
        unknown normalisation step (``traffic/chaos_input.compile_key``)."""

    expression: str
    normalize: tuple[str, ...]
    run_dir: Path

    @cached_property
    def path(self) -> Expression:
        """The key expression as the runtime compiles ``Consumer(key=..., normalize=...)``."""
        return compile_key(self.expression, self.normalize)

    @cached_property
    def same(self) -> Callable[[str], str]:
        """The normalisation applied to every key the run reads (the identity without ``normalize``)."""
        return normalizer(self.normalize)

    def of(self, body: str) -> str | None:
        """A message body's business key, or ``None`` for a body the runtime rejects (``chaos_input.body_key``)."""
        return body_key(self.path, body)

    def logged(self, message: str) -> Counter[str]:
        """Per idempotency key (normalized as the run's keys are), the runtime's log lines with ``message``."""
        return Counter(self.same(str(ln.get(names.FIELD_IDEMPOTENCY_KEY))) for ln in log_lines(self.run_dir, message))


@dataclass(frozen=True)
class StoreSpecs:
    """The stores the run counts effects in (``--effect``, and ``--effect-table``/``--effect-key`` as a table, first),
    with ``key_attribute`` (``--effect-key``: the report's ``run.effect_store``), whether the run starts the HTTP
    provider stand-in (``--provider``, or a provider store: ``aws/provider_stand_in.py``) and whether a replayed
    effect is answered from its key (``--effect-takes-key``: ``proof/key_check.build``)."""

    specs: tuple[EffectStore, ...]
    key_attribute: str | None = None
    starts_provider: bool = False
    takes_key: bool = False

    @property
    def optional(self) -> set[str]:
        """The ``--effect`` texts of the stores marked optional (``proof/stores.py``: a key may be missing there)."""
        return {str(spec) for spec in self.specs if spec.optional}

    def flag(self, spec: EffectStore) -> str:
        """The flags that named ``spec``, as an error about the store names them: ``--effect-table or
        --effect-key`` for the table they give (the first spec), else ``--effect KIND:NAME:KEYPATH``."""
        if self.key_attribute is not None and self.specs and spec is self.specs[0]:
            return "--effect-table or --effect-key"
        return f"--effect {spec}"

    @property
    def commits_sql(self) -> bool:
        """Whether a store's effects go through SQL commits (a kill point only such a stack has)."""
        return any(SqlCommits.name in kind_of(spec).services for spec in self.specs)


@dataclass(frozen=True)
class DriveSettings:
    """How the run drives the stack: the chaos drawn (``chaos``), the pollers per mapping, the variables every
    execution environment gets (``--function-env``), the drain limit (``None``: the stack's own,
    ``engine/drain_limit.py``), the redrive after the drain (``--no-redrive``, ``--redrive-rounds``) and whether
    the pollers' progress is printed (``quiet``)."""

    chaos: ChaosConfig
    concurrency: int
    function_env: dict[str, str] = field(default_factory=dict)
    drain_timeout_seconds: int | None = None
    redrive: bool = True
    redrive_rounds: int = 3
    quiet: bool = False

    @property
    def rounds(self) -> int:
        """The redrive rounds the run may take: ``redrive_rounds``, none without ``redrive``."""
        return self.redrive_rounds if self.redrive else 0


@dataclass(frozen=True)
class Verdict:
    """Where the run's verdict goes: the report (``report_path``, its page beside it), the page's title, and whether a
    fault class asked for that never struck fails the run (``--require-faults``: ``proof/faults_struck.py``)."""

    report_path: Path
    title: str
    require_faults: bool = False


@dataclass(frozen=True)
class ChaosOptions:
    """One chaos run. ``key``: JMESPath over each body giving its business key. ``effect_table``: the effect's own
    store (logical id, physical name, or a part of the logical id that names one table of the stack) and
    ``effect_key`` its attribute holding the business key; without them, effects are the effect log lines and
    ``effect_takes_key`` states that a replayed effect is answered from its key. ``context``: ``cdk deploy -c``
    values (e.g. a short function timeout, so that stalls past the deadline end quickly)."""

    app_dir: Path
    stack: str
    input: Path
    key: str
    effect_table: str | None = None
    effect_key: str | None = None
    #: The stores effects are counted in (``proof/stores.py``: ``--effect KIND:NAME:KEYPATH``). :default: none but
    #: ``effect_table``; without any, effects are the effect log lines (a lower bound).
    effects: tuple[EffectStore, ...] = ()
    #: Start the HTTP provider stand-in (``aws/provider_stand_in.py``) on 127.0.0.1 for the run, its URL in each
    #: execution environment as ``EFFECTIVELY_ONCE_PROVIDER_URL``. :default: only when an ``effects`` store is the
    #: provider.
    provider: bool = False
    #: Environment variables set in every execution environment of the run, over the deployed function's own
    #: (``--function-env``): a switch the app reads, e.g. a variant of one deploy. :default: none.
    function_env: dict[str, str] = field(default_factory=dict)
    #: Business identity (``--normalize``, in the order given): the steps of ``identity.normalize_key`` applied to
    #: every key the run reads (input, stores, log lines), as ``Consumer(normalize=...)`` applies them. The chaos
    #: command decides what one key is, never the app under test. :default: none.
    normalize: tuple[str, ...] = ()
    #: Top-level modules the functions may import without shipping them (``--allow-import``): what a layer the run
    #: cannot read provides (``aws/lambda_imports.py``). :default: none.
    allowed_imports: tuple[str, ...] = ()
    effect_takes_key: bool = False
    concurrency: int = 2
    chaos: ChaosConfig = ChaosConfig()
    context: dict[str, str] = field(default_factory=dict)
    #: After the queues drained, redrive every DLQ while it holds valid keys the app did not refuse (SQS moved them
    #: after maxReceiveCount), for at most ``redrive_rounds`` rounds; a valid key still only in a DLQ then is
    #: ``stranded`` and fails the run. :default: on, 3 rounds.
    redrive: bool = True
    redrive_rounds: int = 3
    report_path: Path = Path("reports/chaos-report.json")
    run_dir: Path = Path(".local-aws/chaos")
    #: Seconds to wait for the queues to drain (and for each redrive round). :default: ``None``: the stack's own
    #: (``engine/drain_limit.default_drain_seconds``: at least 600).
    drain_timeout_seconds: int | None = None
    quiet: bool = False
    #: Exit :data:`~effectively_once_local.proof.faults_struck.EXIT_FAULTS_NOT_STRUCK` when a fault class asked for
    #: could strike and never did (``--require-faults``; ``proof/faults_struck.py``). :default: off (listed only).
    require_faults: bool = False
    #: The chaos command's flags the user gave (``--crash-after-effect``, ...; ``args.given``): a fault class one of
    #: them asks for that cannot strike on the stack is refused before the first send, one left at its default is
    #: left out of the draw (``any_stack/inert_faults.py``). :default: none: every class at its default.
    given_flags: frozenset[str] = frozenset()
    #: A local AWS where the stack is already deployed (tests deploy several stacks at once), with the ``cdk.out`` it
    #: was deployed from. :default: ``None``: a fresh local AWS, and ``cdk deploy`` of ``stack`` into it.
    endpoint: str | None = None
    cdk_out: Path | None = None

    def __post_init__(self) -> None:
        if (self.effect_table is None) != (self.effect_key is None):
            raise InputFileError("--effect-table and --effect-key go together (the table and its key attribute)")

    def keys(self) -> Keys:
        """How the run reads a business key (``key``, ``normalize``) and its log lines (``run_dir``)."""
        return Keys(self.key, tuple(self.normalize), self.run_dir)

    def stores(self) -> StoreSpecs:
        """Every store the run counts effects in: ``effect_table``/``effect_key`` as a table, then ``effects``."""
        legacy = (
            (EffectStore("table", self.effect_table, self.effect_key),) if self.effect_table and self.effect_key else ()
        )
        return StoreSpecs(
            specs=legacy + tuple(self.effects),
            key_attribute=self.effect_key,
            starts_provider=self.provider or any(kind_of(s).stand_in for s in self.effects),
            takes_key=self.effect_takes_key,
        )

    def drive_settings(self, chaos: ChaosConfig) -> DriveSettings:
        """How the run drives the stack, under ``chaos`` (the draw after the fault classes that cannot strike on the
        stack were left out: ``inert_faults.drawn``)."""
        return DriveSettings(
            chaos=chaos,
            concurrency=self.concurrency,
            function_env=dict(self.function_env),
            drain_timeout_seconds=self.drain_timeout_seconds,
            redrive=self.redrive,
            redrive_rounds=self.redrive_rounds,
            quiet=self.quiet,
        )

    def verdict(self) -> Verdict:
        """Where the verdict goes: ``report_path``, the page's title, ``require_faults``."""
        return Verdict(self.report_path, f"{self.stack}: chaos run", self.require_faults)
