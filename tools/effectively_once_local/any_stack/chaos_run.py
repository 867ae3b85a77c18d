"""The chaos proof for any stack, the general profile of the pipeline (``engine/pipeline.py``): deploy a CDK app to a
local AWS, run every SQS event source mapping of one stack with the local runner under chaos, report per business key
(``proof/key_check.py``).

``python -m effectively_once_local chaos --app-dir DIR --stack NAME --input FILE --key JMESPATH`` or, from pytest,
``run_chaos(ChaosOptions(...))``, which returns the exit code and the report.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from effectively_once_runtime import names

from ..aws.discovery import DeployedMapping, disable, discover_targets
from ..aws.provider_stand_in import URL_ENV, ProviderStandIn
from ..aws.readback import DlqMessage
from ..aws.server import aws_env, local_endpoint, local_session
from ..aws.target_plan import planned_targets_of
from ..base.json_lines import read_jsonl
from ..chaos.fault_model import ChaosConfig
from ..chaos.faults import ENV_WATCH_KEYS, WRITE_OPERATIONS
from ..chaos.forced_strikes import write_plan
from ..engine.drain_limit import default_drain_seconds
from ..engine.pipeline import Deployment, clear_run_dir, describe, drain, drive, local_deployment, poller_specs
from ..proof.attribution import log_line_count
from ..proof.dead_letters import dead_letter_totals, dead_lettered_without_reason, moved_by_sqs
from ..proof.executions import Writer, all_writes, batch_keys, batch_kills, batches, rewritten
from ..proof.faults_struck import faults_block, forced_strikes, ok_prefix, required, watched_writes
from ..proof.group_order import first_executions, reordered
from ..proof.key_check import (
    build,
    effect_lines,
    kills,
    log_lines,
    normalization_hint,
    render,
    unkeyed_lines,
    verdict,
)
from ..proof.line_states import PASSING_STATES, States, async_counts, dlq_contents, line_states, send_kinds
from ..proof.sdk_faults_seen import SdkFaultsSection, read_sdk_faults, sdk_faults
from ..proof.store_kinds import kind_of
from ..proof.stores import PROVIDER_LOG, EffectStoreError, Store, combine, incomplete_keys, wrong_key_path
from ..proof.torn_moments import LISTED, StoreRef, torn_moments
from ..report.page import RunClock, conclude, read_events
from ..report.report_shape import CHAOS, assemble
from ..runner.mapping_runner import PollerPool, PollerSpec
from ..traffic.chaos_input import InputLine, load_input, resolve_queue
from ..traffic.producer import Sender, plan
from .chaos_context import ChaosOptions, DriveSettings, Keys, StoreSpecs, Verdict
from .chaos_targets import dlq_messages, mapping_row, move_back, senders
from .inert_faults import drawn, stack_facts


@dataclass(frozen=True)
class _Outcome:
    mappings: list[DeployedMapping]
    messages_sent: int
    poller_restarts: int
    dlq_messages: dict[str, list[DlqMessage]]  # each DLQ's messages after the redrive, by queue name
    table: str | None  # the first table store's physical name (the report's effect_store)
    redriven: dict[str, list[int]]  # keys the run's redrive brought back from a DLQ, with the rounds that did
    redrive_rounds: list[dict[str, int]]
    store_counts: dict[str, Counter[str]]  # effects per key that the run added, per named store
    store_refs: dict[str, StoreRef]  # every named store as the write logs name it, by its --effect text
    learned: dict[str, dict[str, Any]]  # per store without the runtime's boundary: the items one delivery writes
    item_keys: dict[tuple[str, str], str]  # every item the run added, as the write logs name it, and its key
    writes: dict[tuple[str, str], list[Writer]]  # every write of each item, first first (executions.all_writes)
    sqs_moved: dict[str, dict[str, Any]]  # every message SQS dead-lettered over the run and its redrive, by message id


def _pending(dlq: dict[str, list[DlqMessage]], keys: Keys) -> set[str]:
    """The valid keys a DLQ holds that the app did not refuse: moved by SQS after maxReceiveCount (a message the
    runtime moved on first sight carries its reason: the app refused it for good)."""
    return {k for messages in dlq.values() for m in messages if m.reason() is None for k in [keys.of(m.body)] if k}


def _held(
    sqs: Any, mappings: list[DeployedMapping], keys: Keys, moved: dict[str, dict[str, Any]]
) -> dict[str, list[DlqMessage]]:
    """Each DLQ's messages now (``dlq_messages``), the queues' messages SQS moved added to ``moved``
    (``dead_letters.moved_by_sqs``)."""
    held = dlq_messages(sqs, mappings)
    on_failure = {m.on_failure_url.rstrip("/").rsplit("/", 1)[-1] for m in mappings if m.on_failure_url}
    moved.update(moved_by_sqs(held, keys.of, on_failure))
    return held


def _redrive(
    sqs: Any,
    mappings: list[DeployedMapping],
    pollers: list[tuple[PollerSpec, int]],
    settings: DriveSettings,
    limit: int,
    keys: Keys,
    clock: RunClock,
    log: Callable[[str], None],
    sqs_moved: dict[str, dict[str, Any]],
) -> tuple[dict[str, list[int]], list[dict[str, int]]]:
    """Up to ``settings.rounds`` rounds: while a DLQ holds valid keys the app did not refuse, move every DLQ back to
    its source (``dlq_redrive.local_move``) and run calm pollers (no chaos) until the queues drain (within ``limit``
    seconds a round). Returns each key brought back with the rounds that brought it back,
    and each round's counts; every message SQS moved before a round is added to ``sqs_moved``."""
    calm = [(replace(spec, chaos=ChaosConfig(seed=settings.chaos.seed)), n) for spec, n in pollers]
    redriven: dict[str, list[int]] = {}
    rounds: list[dict[str, int]] = []
    for number in range(1, settings.rounds + 1):
        pending = _pending(_held(sqs, mappings, keys, sqs_moved), keys)
        if not pending:
            break
        clock.mark(f"redrive {number}")
        moved = move_back(sqs, mappings)
        log(f"redrive round {number}: {len(pending)} valid keys in the DLQs, {moved} messages moved back")
        for key in sorted(pending):
            redriven.setdefault(key, []).append(number)
        pool = PollerPool(calm)
        pool.start()
        try:
            urls = [m.mapping.queue_url for m in mappings]
            drain(pool, sqs, urls, moved, timeout_seconds=limit, run_dir=keys.run_dir, quiet=True)
        finally:
            pool.stop()
        rounds.append({"round": number, "valid_keys": len(pending), "moved": moved})
    return redriven, rounds


def _env_overrides(
    function_env: dict[str, str],
    stores: list[Store],
    provider: bool,
    run_dir: Path,
    scope: ExitStack,
    log: Callable[[str], None],
) -> dict[str, str]:
    """The variables every execution environment of the run gets over its function's: ``--function-env``, each
    effect table's key attributes (its writes name the items they wrote: ``chaos/faults.py``), and with ``provider``
    the provider stand-in's URL (the stand-in entered into ``scope``, its log in ``run_dir``)."""
    env_overrides = dict(function_env)
    watched = {st.name: st.key_attributes for st in stores if st.key_attributes}
    env_overrides[ENV_WATCH_KEYS] = json.dumps(watched, sort_keys=True)
    if provider:
        stand_in = scope.enter_context(ProviderStandIn(log_path=run_dir / PROVIDER_LOG))
        env_overrides[URL_ENV] = stand_in.url
        log(f"provider stand-in on {stand_in.url} ({URL_ENV})")
    return env_overrides


def _drain_limit(given: int | None, mappings: list[DeployedMapping], messages: int, log: Callable[[str], None]) -> int:
    """``--drain-timeout`` (``given``), else the stack's default (``engine/drain_limit.py``), said in a start-up
    line."""
    if given is not None:
        return given
    limit = default_drain_seconds([m.mapping for m in mappings], messages)
    log(
        f"drain limit {limit}s: the longest (maxReceiveCount + 1) x visibility timeout of the stack's queues, plus"
        f" {messages} messages; --drain-timeout sets it"
    )
    return limit


def _stores(session: Any, stack: str, keys: Keys, effect_stores: StoreSpecs, sent: set[str]) -> list[Store]:
    """The run's effect stores found in the deployed ``stack`` (``proof/stores.Store``; ``sent``: the input's keys, a
    bucket's ``{key}`` is matched against them), each snapshotted before the first send."""
    stores = [Store(session, stack, s, keys.run_dir, keys.normalize, keys=sent) for s in effect_stores.specs]
    for st in stores:
        st.snapshot()
    return stores


def _targets(
    session: Any, stack: str, cdk_out: Path, log: Callable[[str], None]
) -> tuple[list[DeployedMapping], dict[str, Sender]]:
    """The stack's targets (``discover_targets``, moto's own mappings switched off), each said in a line, and how
    input reaches each asynchronous one (``chaos_targets.senders``)."""
    mappings = discover_targets(session, stack, cdk_out)
    disable(session, mappings)
    for m in mappings:
        log(describe(m))
    return mappings, senders(session, mappings)


def _run(
    stack: str,
    keys: Keys,
    effect_stores: StoreSpecs,
    settings: DriveSettings,
    lines: list[InputLine],
    deployed: Deployment,
    log: Callable[[str], None],
    clock: RunClock,
    report_path: Path,
) -> _Outcome:
    """Discover, send, run until drained, read back (``engine/pipeline.py``), on the local AWS only; the previous
    report (``report_path``) is removed as sending starts (``pipeline.drive``)."""
    with local_endpoint(deployed.endpoint):
        session = local_session(deployed.endpoint)
        mappings, sources = _targets(session, stack, deployed.cdk_out, log)
        labels = {m.label: m.queue_name for m in mappings}
        routes = {ln.number: resolve_queue(ln.queue, labels) for ln in lines}
        fifo = {m.label: m.fifo for m in mappings}
        stores = _stores(session, stack, keys, effect_stores, sent_keys(lines))
        table = next((st.name for st in stores if st.spec.kind == "table"), None)
        outgoing = plan(lines, lambda line: routes[line.number], fifo, settings.chaos)
        limit = _drain_limit(settings.drain_timeout_seconds, mappings, sum(map(len, outgoing.values())), log)
        write_plan(keys.run_dir, settings.chaos, [ln.key for ln in lines if ln.key])  # the pollers read it
        with ExitStack() as scope:
            env_overrides = _env_overrides(
                settings.function_env, stores, effect_stores.starts_provider, keys.run_dir, scope, log
            )
            pollers = poller_specs(
                mappings,
                run_dir=keys.run_dir,
                aws_env=aws_env(deployed.endpoint),
                chaos=settings.chaos,
                concurrency=settings.concurrency,
                key_expression=keys.expression,
                key_normalize=keys.normalize,
                env_overrides=env_overrides,
            )
            pool = PollerPool(pollers)
            sqs = session.client("sqs")
            done = drive(
                sqs,
                pool,
                {m.label: m.mapping.queue_url for m in mappings},
                fifo,
                outgoing,
                clock=clock,
                run_dir=keys.run_dir,
                drain_timeout_seconds=limit,
                quiet=settings.quiet,
                report_path=report_path,
                fresh_deploy=deployed.fresh,
                senders=sources,
            )
            sqs_moved: dict[str, dict[str, Any]] = {}
            redriven, rounds = _redrive(sqs, mappings, pollers, settings, limit, keys, clock, log, sqs_moved)
        dlq = _held(sqs, mappings, keys, sqs_moved)
        counted = _counts(keys, stores)
        _refuse_a_wrong_key_path(keys, effect_stores, stores, sent_keys(lines))
        return _Outcome(mappings, done.messages_sent, pool.restarts, dlq, table, redriven, rounds, *counted, sqs_moved)


def _counts(
    keys: Keys, stores: list[Store]
) -> tuple[
    dict[str, Counter[str]],
    dict[str, StoreRef],
    dict[str, dict[str, Any]],
    dict[tuple[str, str], str],
    dict[tuple[str, str], list[Writer]],
]:
    """Each store's effects per key (``proof/executions.py``: from the write logs and the invocations' batches), each
    store as the write logs name it, and for each store where no per-record boundary showed what the count learned:
    the items one delivery writes and the keys delivered once whose items are a multiple of it (the report's
    ``run.effect_stores`` entry gains it); every item the stores gained with its key; and every write of each item
    (the write logs read once)."""
    writes, invoked = all_writes(keys.run_dir), batches(keys.run_dir, keys.same)
    first = {item: found[0] for item, found in writes.items()}
    counts = {str(st.spec): st.count(first, invoked) for st in stores}
    learned = {
        str(st.spec): {
            "items_per_delivery": st.counted.items_per_delivery,
            "items_per_delivery_learned_from_keys": st.counted.learned_from,
            "delivered_once_items_a_multiple": st.counted.multiples,
        }
        for st in stores
        if st.counted.loose
    }
    refs = {str(st.spec): StoreRef(st.spec.kind, st.name) for st in stores}
    return counts, refs, learned, {item: key for st in stores for item, key in st.item_keys.items()}, writes


def _refuse_a_wrong_key_path(keys: Keys, effect_stores: StoreSpecs, stores: list[Store], sent: set[str]) -> None:
    """A store the run counted (``stores``) that holds what the run added, none of it under a key the run knows,
    while the run's effect lines name keys it sent: the store or its key path is probably wrong, not the app
    (``stores.wrong_key_path``; issue 57, item 2).

    :raises EffectStoreError: such a store, named with the flag that gave it (the command exits 2).
    """
    logged = keys.logged(names.EFFECT_EXECUTED)
    for st in stores:
        why = wrong_key_path(st, logged, sent)
        if why:
            raise EffectStoreError(f"{why}: {effect_stores.flag(st.spec)} is probably wrong")


def sent_keys(lines: list[InputLine]) -> set[str]:
    """The business keys of the input (a bucket store's ``{key}`` is matched against them)."""
    return {ln.key for ln in lines if ln.key is not None}


def _check_plan(
    stack: str,
    lines: list[InputLine],
    cdk_out: Path,
    effect_stores: StoreSpecs,
    chaos: ChaosConfig,
    given_flags: frozenset[str],
) -> tuple[ChaosConfig, list[dict[str, Any]]]:
    """Before the deploy, from the synthesized template (``aws/target_plan.py``): the stack has something to drive,
    and every line's ``queue`` names one target (or none is needed: one target); then the chaos drawn on it
    (``inert_faults.drawn``: the fault classes that cannot strike there left out, with the report's rows).

    :raises DeployError: nothing to drive. :raises InputFileError: a line names no target, or several could be
        meant (the message lists the stack's targets). :raises InertFlagError: a flag given that cannot strike."""
    labels = planned_targets_of(cdk_out, stack)
    for name in sorted({ln.queue for ln in lines}, key=str):
        resolve_queue(name, labels)
    return drawn(chaos, stack_facts(cdk_out, stack, sql_store=effect_stores.commits_sql), given_flags)


def _check_keys(
    keys: Keys, effect_stores: StoreSpecs, lines: list[InputLine], outcome: _Outcome
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The per-key check (``key_check.build``) with every input line's state (``line_states``) and the DLQs'
    contents: the report's sections before its findings, ``sdk_faults``, ``faults``, ``run`` and ``verdict`` (the
    ``total`` with the states' counts and the listed and dead-lettered keys'); and how the lines were sent
    (``send_kinds``)."""
    dlq_bodies = [m.body for messages in outcome.dlq_messages.values() for m in messages]
    store, _ = combine(outcome.store_counts) if outcome.store_counts else (None, {})
    effected = effect_lines(keys.run_dir)
    log_counts = Counter(keys.same(str(ln.get(names.FIELD_IDEMPOTENCY_KEY))) for ln in effected)
    raw_kills = kills(keys.run_dir)
    kill_records = [{**k, "key": keys.same(str(k["key"])) if k.get("key") else None} for k in raw_kills]
    batch = batch_kills(
        kill_records, outcome.writes, outcome.item_keys
    )  # item keys are normalised as the kills now are
    report = build(
        sent=Counter(ln.key for ln in lines if ln.key is not None),
        invalid_lines=sum(1 for ln in lines if ln.key is None),
        messages_sent=outcome.messages_sent,
        dlq_keys={k for k in (keys.of(b) for b in dlq_bodies) if k is not None},
        dead_lettered=len(dlq_bodies),
        log_counts=log_counts,
        store_counts=store,
        kill_records=kill_records,
        effect_takes_key=effect_stores.takes_key,
        failed_after_effect=keys.logged(names.MSG_EFFECT_REPEATED_AFTER_FAILURE),
        batch_kills=batch,
    )
    sent_rows = read_jsonl(sorted(keys.run_dir.glob("sent-*.jsonl")))
    deliveries = read_jsonl(sorted(keys.run_dir.glob("deliveries-*.jsonl")))
    first = first_executions(effected, lambda key: None if key is None else keys.same(str(key)))
    out_of_order, checked = reordered(sent_rows, first, outcome.redriven)
    incomplete = incomplete_keys(outcome.store_counts, effect_stores.optional, sent_keys(lines))
    states = line_states(
        lines=lines,
        effects=store if store is not None else log_counts,
        duplicated=report["keys"]["duplicated"],
        redriven=outcome.redriven,
        dlq_messages=outcome.dlq_messages,
        sent_rows=sent_rows,
        deliveries=deliveries,
        kill_records=kill_records + batch,
        key_of=keys.of,
        suppressed=keys.logged(names.MSG_DUPLICATE_SUPPRESSED),
        marked={"incomplete": set(incomplete), "reordered": {r["then"] for r in out_of_order}},
    )
    refused = sum(1 for messages in outcome.dlq_messages.values() for m in messages if m.refusal is not None)
    listed = _listed(states, effect_stores.optional, outcome, raw_kills, keys.run_dir)
    rows = _dead_letters(keys, outcome, kill_records, sent_rows)
    sections = report | {
        "total": report["total"] | states["counts"] | listed.pop("total") | dead_letter_totals(rows),
        "states": states,
        "dlq": dlq_contents(outcome.dlq_messages, keys.of),
        "fifo_order": {"keys_checked": checked, "reordered": out_of_order},
        "async": async_counts(deliveries, refused=refused),
    }
    sections |= listed | {"dead_lettered_without_reason": rows}
    return sections, send_kinds(sent_rows, deliveries, {m.label for m in outcome.mappings if m.fifo})


def _sdk_faults(keys: Keys, effect_stores: StoreSpecs, outcome: _Outcome, states: States) -> SdkFaultsSection:
    """The report's ``sdk_faults`` section (``proof/sdk_faults_seen.py``): the faults tied to keys through the run's
    table stores (their items) and queue stores (the failed send entries' bodies)."""
    named = {
        kind: {outcome.store_refs[str(s)].name: s.key_path for s in effect_stores.specs if s.kind == kind}
        for kind in ("table", "queue")
    }
    return sdk_faults(states, keys.run_dir, named["table"], keys.same, named["queue"])


def _dead_letters(
    keys: Keys, outcome: _Outcome, kill_records: list[dict[str, Any]], sent_rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The valid keys SQS dead-lettered, each with its cause (``dead_letters.dead_lettered_without_reason``): from
    the kills, the injected SDK faults, the invocations' batches, the send log, the ``records deferred`` and the
    ``record failed`` lines."""
    return dead_lettered_without_reason(
        outcome.sqs_moved,
        kill_records=kill_records,
        sdk_faults=read_sdk_faults(read_jsonl(sorted(keys.run_dir.glob("chaos-*.jsonl")))),
        invocations=batch_keys(keys.run_dir, keys.same),
        sent_rows=sent_rows,
        deferred={
            str(ln.get("function_request_id")): int(ln.get(names.FIELD_DEFERRED) or 0)
            for ln in log_lines(keys.run_dir, names.MSG_RECORDS_DEFERRED)
        },
        failed=set(keys.logged(names.MSG_RECORD_FAILED)),
    )


def _listed(
    states: States, optional: set[str], outcome: _Outcome, raw_kills: list[dict[str, Any]], run_dir: Path
) -> dict[str, Any]:
    """What the report lists without failing: the torn moments (``proof/torn_moments.py``; ``optional``: the stores
    a key may be missing from), the keys that finished only through the run's redrive, with the rounds that brought
    them back (what production would hold in a DLQ until someone redrove it: ``--no-redrive`` shows that), and the
    keys of a passing state whose items were written again (``rewritten``: how many times beyond their effects,
    ``executions.rewritten``; also in their per-key row of ``states``). The sections ``rewritten``, ``torn_moments``
    and ``redriven``, and ``total``: their counts."""
    effects, _ = combine(outcome.store_counts) if outcome.store_counts else (Counter(), {})
    per_key = states["per_key"]
    again = rewritten(outcome.item_keys, outcome.writes, effects)
    written = {k: n for k, n in again.items() if per_key.get(k, {}).get("state") in PASSING_STATES}
    for key, n in written.items():
        per_key[key]["rewritten"] = n
    torn = torn_moments(run_dir, raw_kills, outcome.store_refs, optional)
    return {
        "total": {"rewritten_keys": len(written), "torn_moments": len(torn)},
        "rewritten": written,
        "torn_moments": torn[:LISTED],
        "redriven": [
            {"key": key, "rounds": outcome.redriven.get(key, [])} for key in states["keys"]["redriven_then_effected"]
        ],
    }


def _findings(keys: Keys, raw_sent: set[str], sends: dict[str, Any]) -> dict[str, Any]:
    """What the runtime's lines say beside the per-key check: the sections ``normalization`` (a key normalization
    the run may lack, from the input's keys before normalization, ``raw_sent``), ``sends`` (how the lines were
    sent) and ``unkeyed`` (the un-keyed effects), and the duplicates suppressed (``duplicates_suppressed``, the
    report's last ``total`` entry)."""
    return {
        "duplicates_suppressed": log_line_count(
            sorted(keys.run_dir.glob("function-*.log")), names.MSG_DUPLICATE_SUPPRESSED
        ),
        "normalization": normalization_hint(
            raw_sent, {str(ln.get(names.FIELD_IDEMPOTENCY_KEY)) for ln in effect_lines(keys.run_dir)}, keys.normalize
        ),
        "sends": sends,
        # Un-keyed effects (delivery="at_most_once"|"at_least_once"): what the runtime's lines say was skipped or
        # repeated, for a checker to hold against the stores of those calls.
        "unkeyed": unkeyed_lines(keys.run_dir, keys.normalize),
    }


def _run_block(
    stack: str, keys: Keys, effect_stores: StoreSpecs, settings: DriveSettings, outcome: _Outcome, seconds: float
) -> dict[str, Any]:
    """The report's ``run`` block: what ran, with which settings and chaos, and where faults can strike."""
    _, per_store = combine(outcome.store_counts) if outcome.store_counts else (None, {})
    table, key_attribute = outcome.table, effect_stores.key_attribute
    return {
        "stack": stack,
        "mappings": {m.label: mapping_row(m) for m in outcome.mappings},
        "key": keys.expression,
        "normalize": list(keys.normalize),
        "effect_store": {"table": table, "key_attribute": key_attribute} if table and key_attribute else None,
        "effect_stores": {name: {**row, **outcome.learned.get(name, {})} for name, row in per_store.items()},
        "chaos": settings.chaos.__dict__,
        "pollers_per_mapping": settings.concurrency,
        "poller_restarts": outcome.poller_restarts,
        "redrive": settings.redrive,
        "redrive_rounds": outcome.redrive_rounds,
        # Where faults can strike from outside the app (faults.py), and where they cannot.
        "fault_points": {
            "writes_watched": {service: sorted(ops) for service, ops in WRITE_OPERATIONS.items()},
            "http": "the provider stand-in's calls are logged" if effect_stores.starts_provider else "not watched",
            "sql": "every commit of sqlite3 and psycopg 3 connections (commit(), with conn:, with "
            "conn.transaction():, autocommit writes; chaos/sql_watch.py), a kill point",
        },
        "seconds": round(seconds, 1),
    }


def _conclude(
    to: Verdict, run_dir: Path, sections: dict[str, Any], clock: RunClock, log: Callable[[str], None]
) -> tuple[int, dict[str, Any]]:
    """The verdict; the report assembled from ``sections`` with it (``report_shape.assemble``), shown and written
    with its page (``to``; the run's events read from ``run_dir``); the exit code and the report."""
    code, reasons = required(verdict(sections), sections["faults"], to.require_faults)
    report = assemble(CHAOS, sections | {"verdict": {"exit_code": code, "reasons": reasons}})
    t, faults = report["total"], report["faults"]
    conclude(
        report,
        text=render(report),
        reasons=reasons,
        fail_prefix="FAIL: ",
        ok_line=(
            f"{ok_prefix(faults)}: {t['keys_sent']} keys, {t['effects']} effects, 0 lost, 0 duplicated, 0 unexpected, "
            f"0 stranded, 0 vanished, {t['replayed_after_kill']} replayed after a kill; "
            + f"{faults['kills_struck']} kills struck"
            + (f" ({n} forced)" if (n := sum(faults["forced"].values())) else "")
        )
        if code == 0
        else None,
        report_path=to.report_path,
        events=clock.events + read_events(run_dir),
        clock=clock,
        title=to.title,
        log=log,
    )
    return code, report


def run_chaos(opts: ChaosOptions, log: Callable[[str], None] = print) -> tuple[int, dict[str, Any]]:
    """Deploy, run, report. Returns the exit code (0 clean, 1 lost/duplicated/unexpected/unexplained/..., 3 a fault
    class asked for that never struck under ``require_faults``: ``proof/faults_struck.py``) and the report (also
    written to ``opts.report_path``, with its HTML page beside it: ``report/page.py``). The one function taking the
    whole options: the run's context is computed from them once here (``any_stack/chaos_context.py``).

    :raises InputFileError: the input cannot be used or names no queue of the stack.
    :raises TemplateError: a bucket store's object-name template can match a name two ways for the input's keys.
    :raises LocalAwsError, DeployError: the local AWS or the deploy failed.
    :raises EffectStoreError: a store holds what the run added, none of it under a key the run knows, while the effect
        lines name sent keys: the store or its key path is probably wrong (``stores.wrong_key_path``; no report).
    :raises InertFlagError: a fault flag in ``given_flags`` cannot strike on the stack (before the deploy, or before
        the first send on a stack deployed already).
    """
    keys, effect_stores, to = opts.keys(), opts.stores(), opts.verdict()
    lines = load_input(opts.input, keys.expression, keys.normalize)  # checked whole before anything starts
    for spec in effect_stores.specs:
        kind_of(spec).check(spec, sent_keys(lines))
    raw_sent = {ln.key for ln in (load_input(opts.input, keys.expression) if keys.normalize else lines) if ln.key}
    clear_run_dir(keys.run_dir)
    started = time.monotonic()
    clock = RunClock()
    planned: list[tuple[ChaosConfig, list[dict[str, Any]]]] = []

    def check(cdk_out: Path) -> None:
        planned.append(_check_plan(opts.stack, lines, cdk_out, effect_stores, opts.chaos, opts.given_flags))

    if opts.endpoint is not None and opts.cdk_out is not None:
        check(opts.cdk_out)  # deployed already: checked before the first send
    deployment = local_deployment(
        app_dir=opts.app_dir,
        stack=opts.stack,
        context=dict(opts.context),
        run_dir=keys.run_dir,
        log=log,
        endpoint=opts.endpoint,
        cdk_out=opts.cdk_out,
        check=check,
        allowed_imports=opts.allowed_imports,
    )
    with deployment as deployed:
        chaos, left_out = planned[-1] if planned else (opts.chaos, [])
        for row in left_out:
            log(f"left out of the draw: {row['flag']} {row['asked']:g} (default): {row['why']}")
        settings = opts.drive_settings(chaos)
        outcome = _run(opts.stack, keys, effect_stores, settings, lines, deployed, log, clock, to.report_path)
        skipped = deployed.skipped
    sections, sends = _check_keys(keys, effect_stores, lines, outcome)
    found = _findings(keys, raw_sent, sends)
    sections["total"]["duplicates_suppressed"] = found.pop("duplicates_suppressed")
    sections |= found | {"sdk_faults": _sdk_faults(keys, effect_stores, outcome, sections["states"])}
    kinds = {mapping_row(m)["kind"] for m in outcome.mappings}
    writes, forced = watched_writes(keys.run_dir), forced_strikes(keys.run_dir)
    sections["faults"] = faults_block(sections, chaos, kinds, writes, left_out, forced)
    seconds = time.monotonic() - started
    sections["run"] = _run_block(opts.stack, keys, effect_stores, settings, outcome, seconds) | {
        "skipped_resources": skipped
    }
    return _conclude(to, keys.run_dir, sections, clock, log)
