"""The proof on an app not built on the runtime (issue 43, item 1b): ``examples/plain``, an SQS queue to a plain
Python function writing DynamoDB, as the public CDK Python samples write it. One deploy of ``PlainOrders``; one
``run_chaos`` per variant (``--function-env PLAIN_VARIANT=...``), each on its own order ids, effects counted in the
table (``--effect table:OrdersTable:order_id``):

- ``upsert`` (the order id is the item's id) under kills after its writes and duplicates: must exit 0;
- ``new_item`` (a fresh ``uuid4()`` per message), with one key sent twice back to back and no other fault: both
  copies share a batch (the function's batching window, which the local runner honours, and one poller), and the
  run must exit 1 naming that key. Before issue 43's counting rule, one invocation's writes were one effect: the two
  copies in one batch were counted once, and the run passed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack.chaos_context import ChaosOptions
from effectively_once_local.any_stack.chaos_run import run_chaos
from effectively_once_local.any_stack.inert_faults import InertFlagError
from effectively_once_local.aws.deploy import DeployError
from effectively_once_local.base.json_lines import read_jsonl
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.cli import chaos_command
from effectively_once_local.cli.main import _parser, chaos_options
from effectively_once_local.engine.drain_limit import DrainTimeout
from effectively_once_local.proof.stores import parse_effect

from .conftest import LocalAws

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]
APP = REPO / "examples" / "plain"
STACK = "PlainOrders"
CONTEXT = {
    "function_timeout_seconds": "3",
    "visibility_timeout_seconds": "6",
    "batching_window_seconds": "2",
    "batch_size": "4",
    "destroy_on_delete": "true",
}
KEYS = 16
#: Sent first, then again at once: the first receive's window takes both copies (one poller).
TWICE = "new_item-000"


def _input(path: Path, prefix: str, twice: str | None = None, keys: int = KEYS) -> Path:
    rows = []
    for i in range(keys):
        order = {"order_id": f"{prefix}-{i:03d}", "total": 100 + i}
        rows.append(order)
        if order["order_id"] == twice:
            rows.append(order)  # the same message again, back to back
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def plain(local_aws: LocalAws, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cdk_out = local_aws.deploy(APP, [STACK], CONTEXT)
    tmp = tmp_path_factory.mktemp("plain")

    def run(
        variant: str,
        chaos: ChaosConfig,
        twice: str | None = None,
        concurrency: int = 2,
        run_dir: Path | None = None,
        keys: int = KEYS,
        **fields: Any,
    ) -> tuple[int, Any, Path]:
        run_dir = run_dir or tmp / variant
        opts = local_aws.chaos_options(
            app_dir=APP,
            stack=STACK,
            cdk_out=cdk_out,
            run_dir=run_dir,
            key="order_id",
            chaos=chaos,
            function_env={"PLAIN_VARIANT": variant.split("-")[0]},
            concurrency=concurrency,
            **{
                "input": _input(tmp / f"{variant}.jsonl", variant, twice, keys),
                "effects": (parse_effect("table:OrdersTable:order_id"),),
                **fields,
            },
        )
        code, report = run_chaos(opts, log=lambda _: None)
        return code, report, run_dir

    return run


def _reasons(report: dict[str, Any]) -> str:
    return " | ".join(report["verdict"]["reasons"])


def test_an_upsert_passes_under_kills_and_duplicates(plain: Any) -> None:
    # Batches of 4: about 6 invocations or more, each killed after one of its writes with odds 0.8 x 15/16, so a
    # run with no kill after a write is 0.25 ** 6 (2e-4) at most.
    # crash_after_charge: defaulted, and the plain handler writes no effect line (issue 43, item 3): left out.
    chaos = ChaosConfig(resend=0.3, concurrent_duplicates=0.2, crash_after_write=0.8, crash_after_charge=0.1, seed=3)
    code, report, _ = plain("upsert", chaos)

    assert code == 0, _reasons(report)
    assert report["total"]["kills"]["after_write"] > 0, "the faults struck"
    # Issue 43, item 4: every key a killed invocation wrote before the kill was replayed, its item rewritten.
    per_key = report["states"]["per_key"]
    assert report["total"]["replayed_after_kill"] > 0, _reasons(report)
    assert {k for k in report["keys"]["replayed_after_kill"] if per_key[k]["kills"]} == set(
        report["keys"]["replayed_after_kill"]
    ), "each with its kill in its row"
    assert report["total"]["rewritten_keys"] > 0
    assert all(per_key[k]["state"] in ("effected_once", "redriven_then_effected") for k in report["rewritten"])
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == KEYS
    assert report["run"]["effect_stores"]["table:OrdersTable:order_id"]["items_per_delivery"] in (None, 1)
    assert report["faults"]["struck"]["resend"] > 0
    assert [(r["flag"], r["asked"]) for r in report["faults"]["left_out"]] == [("--crash-after-effect", 0.1)]
    assert report["run"]["chaos"]["crash_after_charge"] == 0.0, "left out of the draw"


def test_a_fault_flag_given_that_cannot_strike_is_refused_before_the_first_send(plain: Any, tmp_path: Path) -> None:
    """Issue 43, item 3: the walkthrough's --crash-after-effect on a handler not built on the runtime. Refused in one
    line naming the flag that would strike, before any message is sent."""
    chaos = ChaosConfig(resend=0.3, crash_after_charge=0.5, seed=3)
    with pytest.raises(InertFlagError) as raised:
        plain("refused", chaos, run_dir=tmp_path, given_flags=frozenset({"--crash-after-effect", "--resend"}))

    assert "--crash-after-effect 0.5: no function the run drives (" in str(raised.value)
    assert "--crash-after-write kills right after any handler's writes" in str(raised.value)
    assert not list(tmp_path.glob("sent-*.jsonl")) and not list(tmp_path.glob("chaos-*.jsonl")), "nothing sent or run"


def test_a_new_item_per_message_is_duplicated_even_when_both_copies_share_a_batch(plain: Any) -> None:
    code, report, run_dir = plain("new_item", ChaosConfig(seed=3), twice=TWICE, concurrency=1)
    batches = [
        r["batch_keys"]
        for r in read_jsonl(sorted(run_dir.glob("chaos-*.jsonl")))
        if r.get("event") == "invocation" and TWICE in (r.get("batch_keys") or [])
    ]

    assert batches and all(keys.count(TWICE) == 2 for keys in batches), f"both copies in one batch: {batches}"
    assert code == 1, _reasons(report)
    assert report["keys"]["duplicated"] == [TWICE], _reasons(report)
    assert any("duplicated" in r for r in report["verdict"]["reasons"])
    assert report["run"]["effect_stores"]["table:OrdersTable:order_id"]["items_per_delivery"] == 1


def test_an_app_that_drops_unprocessed_items_loses_them_and_the_proof_names_them(plain: Any) -> None:
    """Issue 43, item 5a: every BatchWriteItem of two or more requests answered with part of them unprocessed; the
    ``batch_drop`` variant ignores UnprocessedItems. The keys held back are lost, each showing the fault that hit it."""
    code, report, _ = plain("batch_drop", ChaosConfig(partial_batch_write=1.0, seed=3), concurrency=1)

    assert code == 1, _reasons(report)
    lost = report["keys"]["lost"]
    assert lost and any("lost" in r for r in report["verdict"]["reasons"]), _reasons(report)
    assert report["faults"]["struck"]["partial_batch_write"] == report["sdk_faults"]["by_kind"]["unprocessed_items"]
    assert report["faults"]["struck"]["partial_batch_write"] > 0
    evidence = report["states"]["evidence"]
    for key in lost:
        assert [f["kind"] for f in evidence[key]["sdk_faults"]] == ["unprocessed_items"], evidence[key]
        assert report["states"]["per_key"][key]["sdk_faults"] == 1
    assert set(lost) <= set(report["sdk_faults"]["keys"]), "every lost key was held back"


def test_an_app_that_writes_unprocessed_items_again_passes(plain: Any) -> None:
    """The ``batch_writer`` variant (boto3's ``Table.batch_writer`` sends UnprocessedItems again) under the same
    fault: nothing lost. At 0.8, not 1: a struck call may hold back every request (issue 58, item 2), so at 1 no
    call would ever finish the writer's last request. 32 keys, not 16, so that nothing struck is rare enough."""
    # Nothing struck: batches of at most 4, so 32 keys are 8 invocations or more, each making 1 BatchWriteItem
    # call or more, each struck with odds 0.8 on its own: all unstruck is 0.2 ** 8 = 2.6e-6 at most (16 keys,
    # 0.2 ** 4 = 1.6e-3). The writer's drain (no chance to fail): a call unstruck (odds 0.2) writes all the
    # invocation's requests (4 at most), so an invocation makes 1 / 0.2 = 5 calls on average, more than 60 with odds
    # 0.8 ** 60 = 1.5e-6; one too slow for the function's timeout is redelivered and rewrites its items by id.
    code, report, _ = plain("batch_writer", ChaosConfig(partial_batch_write=0.8, seed=3), concurrency=1, keys=32)

    assert code == 0, _reasons(report)
    assert report["faults"]["struck"]["partial_batch_write"] > 0, report["sdk_faults"]
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == 32


def test_an_app_that_swallows_throttling_loses_its_keys_and_the_proof_names_them(plain: Any) -> None:
    """Issue 43, item 5b: every write call throttled as after the SDK's retries; ``batch_drop`` swallows the error
    and acknowledges the batch. Every key is lost, each showing the throttle that hit it."""
    code, report, _ = plain("batch_drop-throttled", ChaosConfig(throttle=1.0, seed=3), concurrency=1)

    assert code == 1, _reasons(report)
    assert sorted(report["keys"]["lost"]) == [f"batch_drop-throttled-{i:03d}" for i in range(KEYS)], _reasons(report)
    assert any(
        r.startswith(f"{KEYS} keys lost to injected SDK faults (throttled)") for r in report["verdict"]["reasons"]
    )
    assert report["faults"]["struck"]["throttle"] == report["sdk_faults"]["by_kind"]["throttled"] > 0
    for key in report["keys"]["lost"]:
        assert {f["kind"] for f in report["states"]["evidence"][key]["sdk_faults"]} == {"throttled"}


def test_an_app_that_fails_the_record_on_throttling_passes_after_a_redelivery(plain: Any) -> None:
    """The ``upsert`` variant lets the error fail its batch: SQS redelivers it (and after maxReceiveCount the run's
    redrive brings it back, as an operator would): nothing lost. Half the writes throttled: the chance that none is,
    over 16 keys' writes, is below 1e-4."""
    code, report, _ = plain("upsert-throttled", ChaosConfig(throttle=0.5, seed=3))

    assert code == 0, _reasons(report)
    assert report["faults"]["struck"]["throttle"] > 0, report["sdk_faults"]
    assert report["total"]["effected_once"] + report["total"]["redriven_then_effected"] == KEYS


def _fresh(tmp_path: Path, **context: str) -> tuple[ChaosOptions, list[str]]:
    """A run of ``PlainOrders`` on its own fresh local AWS (``run_chaos`` starts it and deploys), with ``context``
    over the module's, four orders, no faults; and the list its lines are logged into."""
    orders = tmp_path / "orders.jsonl"
    orders.write_text("".join(json.dumps({"order_id": f"api-{i}"}) + "\n" for i in range(4)))
    opts = ChaosOptions(
        app_dir=APP,
        stack=STACK,
        input=orders,
        key="order_id",
        effects=(parse_effect("table:OrdersTable:order_id"),),
        context={**CONTEXT, **context},
        report_path=tmp_path / "report.json",
        run_dir=tmp_path / "run",
        quiet=True,
        drain_timeout_seconds=300,
    )
    return opts, []


def test_a_stack_deployed_with_a_skipped_resource_type_is_told_so_before_the_first_message(tmp_path: Path) -> None:
    """Issue 43, item 6: the sample's HTTP API in front (``AWS::ApiGatewayV2::Api`` and its stage, types the local AWS
    skips). The run says so, naming them and the page, before anything is sent, and drives the queue as it is."""
    opts, printed = _fresh(tmp_path, http_api="true")

    code, report = run_chaos(opts, log=printed.append)

    assert code == 0, _reasons(report)
    [line] = [n for n, text in enumerate(printed) if "resources the local AWS skipped" in text]
    assert printed[line].startswith("stack PlainOrders deployed without 2 resources the local AWS skipped")
    assert "AWS::ApiGatewayV2::Api (HttpApi" in printed[line] and "docs/local-aws-limits.md" in printed[line]
    assert line < next(n for n, text in enumerate(printed) if " -> " in text), "before the mappings run, or a send"
    assert set(report["run"]["skipped_resources"]) == {"AWS::ApiGatewayV2::Api", "AWS::ApiGatewayV2::Stage"}


def test_a_deploy_that_fails_on_a_skipped_resource_names_its_type(tmp_path: Path) -> None:
    """A parameter holding the API's URL (``Fn::GetAtt`` of the skipped API) fails the deploy: the error names the
    skipped type, not only the template error."""
    opts, printed = _fresh(tmp_path, http_api="true", http_api_parameter="true")

    with pytest.raises(DeployError) as raised:
        run_chaos(opts, log=printed.append)

    assert "the local AWS skipped these resources of the stack" in str(raised.value)
    assert "AWS::ApiGatewayV2::Api (HttpApi" in str(raised.value) and "docs/local-aws-limits.md" in str(raised.value)


def _documented_command() -> list[str]:
    """docs/chaos.md's "more chaos" command for an app not built on the runtime, as argv after the module."""
    text = (REPO / "docs" / "chaos.md").read_text(encoding="utf-8")
    block = text.split("<!-- plain-more-chaos -->", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    argv = shlex.split(block.replace("\\\n", " "))
    assert argv[:3] == ["python", "-m", "effectively_once_local"], argv
    return argv[3:]


def test_the_docs_more_chaos_flags_work_on_an_app_not_built_on_the_runtime(
    plain: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43: the walkthrough's "more chaos" run, in the form docs/chaos.md gives for such an app, parsed by the
    command's own parser and checks, run on this deployment: nothing refused, every class asked for with a place to
    strike (whether a kill struck is chance: a dozen orders make a few invocations), exit 0."""
    monkeypatch.chdir(REPO)  # the command's paths are the repository's
    parser, subparsers = _parser()
    args = parser.parse_args(_documented_command())
    chaos_command.check(subparsers["chaos"], args)
    opts = chaos_options(args)

    code, report, _ = plain(
        "documented",
        opts.chaos,
        run_dir=tmp_path,
        given_flags=opts.given_flags,
        effects=opts.effects,
        input=APP / "orders.jsonl",
    )

    assert code == 0, _reasons(report)
    assert {r["flag"] for r in report["faults"]["left_out"]} == {"--crash-after-effect", "--async-duplicate"}
    assert report["faults"]["could_not_strike"] == [], report["faults"]
    assert report["run"]["chaos"]["crash_after_write"] == 0.5 and report["run"]["chaos"]["crash_random"] == 0.1


def test_a_queue_too_slow_for_the_limit_says_what_is_left_where_and_the_flag(plain: Any) -> None:
    """Issue 43, item 7: a 1 s limit against a 6 s visibility timeout and kills after the writes. Last in the module:
    it leaves the queue holding messages."""
    chaos = ChaosConfig(crash_after_write=0.8, seed=3)
    with pytest.raises(DrainTimeout) as raised:
        plain("upsert-slow", chaos, drain_timeout_seconds=1)

    assert raised.value.left, "messages were left"
    assert any(queue.startswith("PlainOrders-Orders") for queue in raised.value.left), raised.value.left
    assert "raise the limit with --drain-timeout SECONDS" in str(raised.value)


#: The shipments' store: each order's message in the stack's ``Shipments`` queue, keyed by its ``order_id``.
SHIPMENTS = (parse_effect("queue:Shipments:order_id"),)


def test_an_app_that_ignores_failed_batch_entries_loses_them_and_the_proof_names_them(plain: Any) -> None:
    """Issue 58, item 2: 6 in 10 entries of each ``SendMessageBatch`` answered under ``Failed`` (HTTP 200, not
    sent); ``send_drop`` ignores them. Those orders are acknowledged and never shipped: lost, each named with the
    fault that hit it."""
    # No entry failing: each of the 16 entries (each order sent once, in one call) fails with odds 0.6 on its own,
    # so none failing is 0.4 ** 16 = 4.3e-7 (at 0.5 it was 0.5 ** 16 = 1.5e-5). The rest holds whatever is drawn.
    code, report, _ = plain("send_drop", ChaosConfig(batch_entry_failure=0.6, seed=3), concurrency=1, effects=SHIPMENTS)

    assert code == 1, _reasons(report)
    lost = report["keys"]["lost"]
    assert lost and any("lost to injected SDK faults (failed_entries)" in r for r in report["verdict"]["reasons"])
    assert report["faults"]["struck"]["batch_entry_failure"] == report["sdk_faults"]["by_kind"]["failed_entries"] > 0
    assert report["sdk_faults"]["batch_calls"] >= 4, "one call per batch of up to 4 orders"
    assert set(lost) <= set(report["sdk_faults"]["keys"]), "every lost key's entry failed"
    for key in lost:
        assert [f["kind"] for f in report["states"]["evidence"][key]["sdk_faults"]] == ["failed_entries"]


def test_an_app_that_sends_the_failed_entries_again_passes(plain: Any) -> None:
    """``send_retry`` sends the failed entries again (up to ``SEND_ATTEMPTS``, 40, times) under the same fault:
    every order shipped once."""
    # An entry failing all 40 attempts fails its batch, which SQS redelivers: the entries already sent go out again
    # (duplicates, exit 1). Each attempt fails an entry with odds 0.6 on its own: 0.6 ** 40 = 1.3e-9 per entry,
    # 16 * 1.3e-9 = 2.1e-8 for the run. Nothing struck: 0.4 ** 16 = 4.3e-7. Together under 5e-7. The drain: an
    # entry needs 1 / 0.4 = 2.5 attempts on average, a batch of 4 about 4; more than 20 is 4 * 0.6 ** 20 = 1.5e-4.
    code, report, _ = plain(
        "send_retry", ChaosConfig(batch_entry_failure=0.6, seed=3), concurrency=1, effects=SHIPMENTS
    )

    assert code == 0, _reasons(report)
    assert report["faults"]["struck"]["batch_entry_failure"] > 0, report["sdk_faults"]
    assert report["total"]["effected_once"] == KEYS
