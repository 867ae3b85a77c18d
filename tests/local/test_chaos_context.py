"""The chaos run's context (``any_stack/chaos_context.py``): computed once from the options, each step of the run
taking the parts it needs. No function of the engine or a profile (the folders that were ``profiles/``) but
``run_chaos`` takes the whole ``ChaosOptions`` (issue 56 item 3b)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from effectively_once_local.any_stack import chaos_context
from effectively_once_local.any_stack.chaos_context import ChaosOptions, Keys
from effectively_once_local.chaos.fault_model import ChaosConfig
from effectively_once_local.proof.stores import EffectStore
from effectively_once_runtime import names

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "effectively_once_local"
#: The engine and the profiles on it: the folders that were ``profiles/`` (issue 56 item 4).
PROFILES = ("engine", "redrive", "any_stack", "payments")
#: The one function allowed the whole options: the entry point, which computes the context from them.
ENTRY = "any_stack/chaos_run.py:run_chaos"


def _taking_the_options(source: str, module: str) -> list[str]:
    """``module:function`` for every function (and method) of ``source`` with a parameter annotated with
    ``ChaosOptions`` (a method's own ``self`` has no annotation: the options' methods are the options)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            every = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg]
            annotations = [ast.unparse(a.annotation) for a in every if a is not None and a.annotation is not None]
            if any("ChaosOptions" in text for text in annotations):
                found.append(f"{module}:{node.name}")
    return found


def test_no_function_of_the_profiles_but_run_chaos_takes_the_whole_options() -> None:
    paths = sorted(path for folder in PROFILES for path in (PACKAGE / folder).rglob("*.py"))
    found = [
        hit
        for path in paths
        for hit in _taking_the_options(path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix())
    ]

    assert len(paths) > 15
    assert found == [ENTRY]


@pytest.mark.parametrize(
    "source",
    [
        "def _step(opts: ChaosOptions, n: int) -> None: ...",
        "def _step(n: int, *, options: 'ChaosOptions | None' = None) -> None: ...",
        "class C:\n    def method(self, other: ChaosOptions) -> None: ...",
        "async def _step(*opts: ChaosOptions) -> None: ...",
    ],
)
def test_a_step_taking_the_whole_options_is_found(source: str) -> None:
    assert len(_taking_the_options(source, "doctored.py")) == 1


def _options(**changes: object) -> ChaosOptions:
    given: dict[str, object] = {"app_dir": Path("app"), "stack": "S", "input": Path("in.jsonl"), "key": "id"}
    return ChaosOptions(**(given | changes))  # type: ignore[arg-type]


def test_the_stores_are_the_effect_table_first_then_the_effects() -> None:
    provider = EffectStore("provider", "gateway", "charge")
    bucket = EffectStore("bucket", "Receipts", "{key}.json", optional=True)

    stores = _options(effect_table="Ledger", effect_key="pk", effects=(provider, bucket)).stores()

    assert stores.specs == (EffectStore("table", "Ledger", "pk"), provider, bucket)
    assert (stores.key_attribute, stores.starts_provider, stores.takes_key) == ("pk", True, False)
    assert stores.optional == {str(bucket)}
    assert stores.commits_sql is False
    assert _options(effects=(EffectStore("sqlite", "db.sqlite:ledger", "pk"),)).stores().commits_sql is True


def test_the_stores_without_a_provider_store_start_the_stand_in_only_when_asked() -> None:
    assert _options().stores().starts_provider is False
    assert _options(provider=True).stores().starts_provider is True
    assert _options(effect_takes_key=True).stores().takes_key is True


def test_the_drive_settings_take_the_drawn_chaos_and_no_rounds_without_redrive() -> None:
    drawn = ChaosConfig(seed=7, crash_after_charge=0.0)
    options = _options(concurrency=3, function_env={"MODE": "b"}, drain_timeout_seconds=90, redrive_rounds=2)

    settings = options.drive_settings(drawn)

    assert (settings.chaos, settings.concurrency, settings.function_env) == (drawn, 3, {"MODE": "b"})
    assert (settings.drain_timeout_seconds, settings.redrive, settings.rounds) == (90, True, 2)
    assert _options(redrive=False, redrive_rounds=2).drive_settings(drawn).rounds == 0


def test_the_verdict_goes_to_the_report_path_with_the_stack_in_the_title() -> None:
    verdict = _options(report_path=Path("r/x.json"), require_faults=True).verdict()

    assert (verdict.report_path, verdict.title, verdict.require_faults) == (Path("r/x.json"), "S: chaos run", True)


def test_keys_read_a_body_and_the_log_lines_normalized_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    compile_key = chaos_context.compile_key
    monkeypatch.setattr(chaos_context, "compile_key", lambda *a: compiled.append(a[0]) or compile_key(*a))
    lines = [
        {names.FIELD_MESSAGE: names.MSG_RECORD_FAILED, names.FIELD_IDEMPOTENCY_KEY: " P-1"},
        {names.FIELD_MESSAGE: names.MSG_RECORD_FAILED, names.FIELD_IDEMPOTENCY_KEY: "p-1 "},
        {names.FIELD_MESSAGE: names.MSG_RECORDS_DEFERRED, names.FIELD_IDEMPOTENCY_KEY: "p-2"},
    ]
    (tmp_path / "function-a.log").write_text("".join(json.dumps(ln) + "\n" for ln in lines), encoding="utf-8")
    keys = _options(key="payment.id", normalize=("strip", "casefold"), run_dir=tmp_path).keys()

    assert keys.of('{"payment": {"id": " P-9 "}}') == "p-9"
    assert keys.of('{"payment": {}}') is None
    assert keys.of("not json") is None
    assert dict(keys.logged(names.MSG_RECORD_FAILED)) == {"p-1": 2}
    assert compiled == ["payment.id"], "compiled once, for every body read"
    assert keys == Keys("payment.id", ("strip", "casefold"), tmp_path)
