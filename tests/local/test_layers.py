"""The tooling's layers (``effectively_once_local/__init__.py``): every module sits in one layer and imports only
from its own layer or the ones below it (deferred imports too), and nothing below the profiles knows the payments
sample. The import-cycle test (``test_import_cycles.py``) covers circles inside a layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "effectively_once_local"
#: Bottom to top, as the package's docstring lists them.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("limits", "json_lines", "faults", "chaos", "figures", "async_queue")),
    ("input and traffic", ("chaos_input", "traffic")),
    ("runner", ("esm",)),
    ("local AWS", ("_moto_server", "server", "deploy", "stack", "readback", "provider")),
    ("checks", ("attribution", "effects", "stores", "html_report")),
    ("pipeline", ("pipeline",)),
    ("profiles", ("sandbox", "producer", "report", "backlog", "redrive", "remote", "async_leg", "demo", "stack_run")),
    ("command line", ("__main__", "__init__")),
)
LAYER_OF = {module: i for i, (_, modules) in enumerate(LAYERS) for module in modules}
PROFILES = LAYER_OF["demo"]
#: What only the payments profile may name.
PAYMENTS_WORDS = ("LEDGER_TABLE_NAME", "payments.handler", "payments.gateway", "payments.model")


def _imports(path: Path) -> set[str]:
    """The package's own modules ``path`` imports, at the top or deferred."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.startswith("effectively_once_local."):
                found.add(node.module.split(".")[1])
            elif node.module == "effectively_once_local":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("effectively_once_local."))
    return found


def _modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob("*.py"))


def test_every_module_has_a_layer() -> None:
    assert _modules() == sorted(LAYER_OF), "place a new module in LAYERS (and the package docstring)"


@pytest.mark.parametrize("module", sorted(LAYER_OF))
def test_a_module_imports_only_its_layer_and_the_ones_below(module: str) -> None:
    upward = {
        target: LAYERS[LAYER_OF[target]][0]
        for target in _imports(PACKAGE / f"{module}.py")
        if target in LAYER_OF and LAYER_OF[target] > LAYER_OF[module]
    }

    assert not upward, f"{module} ({LAYERS[LAYER_OF[module]][0]}) imports from above: {upward}"


@pytest.mark.parametrize("module", sorted(m for m, layer in LAYER_OF.items() if layer < PROFILES))
def test_the_generic_layers_know_nothing_of_payments(module: str) -> None:
    text = (PACKAGE / f"{module}.py").read_text(encoding="utf-8")
    tree = ast.parse(text)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}

    assert not {name for name in imported if name.split(".")[0] == "payments"}
    assert [w for w in PAYMENTS_WORDS if w in text] == []


def test_the_walk_sees_an_upward_import(tmp_path: Path) -> None:
    # The check can fail: a runner module importing the pipeline is seen.
    module = tmp_path / "esm.py"
    module.write_text("def f():\n    from .pipeline import drive\n    from effectively_once_local import demo\n")

    assert _imports(module) == {"pipeline", "demo"}
