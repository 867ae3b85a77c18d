"""The tooling's layers are its folders (``effectively_once_local/__init__.py``): every module sits in one layer's
folder and imports only from its own folder or the ones below it (deferred imports too); the two profiles that stand
side by side (the chaos run for any stack, the payments profile) import neither the other; and nothing but the
payments profile (and the command line above it) knows the payments sample. The import-cycle test
(``test_import_cycles.py``) covers circles inside a layer.

The package's face stands outside the layers: ``__init__.py`` (the extra's check, the entry points), ``__main__.py``
(``python -m effectively_once_local``) and ``_moved.py`` (the old module paths: the standard library and the
library's CDK-free moved-module finder)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "effectively_once_local"
#: Bottom to top, as the package's docstring lists them: the local AWS below the runner that plays its Lambda; the
#: engine below the three jobs that run on it, the redrive below the two profiles that redrive with its code.
LAYERS: tuple[str, ...] = (
    "base",
    "chaos",
    "traffic",
    "aws",
    "runner",
    "proof",
    "report",
    "engine",
    "redrive",
    "any_stack",
    "payments",
    "cli",
)
LAYER_OF = {folder: i for i, folder in enumerate(LAYERS)}
FACE = ("__init__.py", "__main__.py", "_moved.py")
#: Layers side by side, whatever their order in :data:`LAYERS`: none of them imports another.
SIDE_BY_SIDE = ("any_stack", "payments")
PAYMENTS = LAYER_OF["payments"]
#: What only the payments profile may name.
PAYMENTS_WORDS = ("LEDGER_TABLE_NAME", "payments.handler", "payments.gateway", "payments.model")


def _dotted(path: Path) -> tuple[str, ...]:
    """``runner/mapping_runner.py`` -> ``("runner", "mapping_runner")``; a folder's ``__init__.py`` is the folder."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path, package: tuple[str, ...]) -> set[tuple[str, ...]]:
    """The package's own modules (dotted, below the package) that ``path`` imports, at the top or deferred;
    ``package``: the folder ``path``'s relative imports start from."""
    found: set[tuple[str, ...]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = (*anchor, *(node.module.split(".") if node.module else ()))
            elif node.module and (node.module + ".").startswith("effectively_once_local."):
                base = tuple(node.module.split(".")[1:])
            else:
                continue
            found.add(base)
            found.update((*base, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(
                tuple(a.name.split(".")[1:]) for a in node.names if a.name.startswith("effectively_once_local.")
            )
    return {module for module in found if module}


def _package_of(path: Path) -> tuple[str, ...]:
    dotted = _dotted(path)
    return dotted if path.name == "__init__.py" else dotted[:-1]


def _beside(path: Path, package: tuple[str, ...]) -> set[str]:
    """What ``path`` (in ``package``) imports from a layer :data:`SIDE_BY_SIDE` with its own, dotted."""
    return {
        ".".join(target)
        for target in _imports(path, package)
        if target[0] in SIDE_BY_SIDE and target[0] != package[0] and package[0] in SIDE_BY_SIDE
    }


def _layered_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE)


def test_every_module_sits_in_a_layer_folder() -> None:
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in FACE)
    # A folder of modules (a gone folder's leftover __pycache__ is none).
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py")))

    assert loose == [], "put a new module in a layer's folder"
    assert folders == sorted(LAYERS), "place a new folder in LAYERS (and the package docstring)"
    assert len(_layered_modules()) > 30


@pytest.mark.parametrize("path", _layered_modules(), ids=lambda p: "/".join(_dotted(p)) or p.name)
def test_a_module_imports_only_its_layer_and_the_ones_below(path: Path) -> None:
    own = LAYER_OF[_dotted(path)[0]]
    upward = {
        ".".join(target): target[0]
        for target in _imports(path, _package_of(path))
        if target[0] in LAYER_OF and LAYER_OF[target[0]] > own
    }

    assert not upward, f"{'/'.join(_dotted(path))} ({LAYERS[own]}) imports from above: {upward}"


@pytest.mark.parametrize(
    "path", [p for p in _layered_modules() if _dotted(p)[0] in SIDE_BY_SIDE], ids=lambda p: "/".join(_dotted(p))
)
def test_a_profile_side_by_side_imports_no_other(path: Path) -> None:
    beside = _beside(path, _package_of(path))

    assert not beside, f"{'/'.join(_dotted(path))} imports a profile beside its own: {sorted(beside)}"


@pytest.mark.parametrize(
    "path",
    [p for p in _layered_modules() if LAYER_OF[_dotted(p)[0]] < PAYMENTS],
    ids=lambda p: "/".join(_dotted(p)),
)
def test_the_generic_layers_know_nothing_of_payments(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0}

    assert not {name for name in imported if name.split(".")[0] == "payments"}
    assert [w for w in PAYMENTS_WORDS if w in text] == []


def test_the_walk_sees_an_upward_import(tmp_path: Path) -> None:
    # The check can fail: a runner module importing the pipeline, relatively and absolutely, is seen.
    module = tmp_path / "mapping_runner.py"
    module.write_text(
        "def f():\n    from ..engine.pipeline import drive\n    from effectively_once_local import engine\n"
        "    from . import poller_spec\n"
    )

    assert _imports(module, ("runner",)) == {
        ("engine",),
        ("engine", "pipeline"),
        ("engine", "pipeline", "drive"),
        ("runner",),
        ("runner", "poller_spec"),
    }


def test_the_walk_sees_a_profile_import_the_one_beside_it(tmp_path: Path) -> None:
    # The check can fail: the payments profile importing the chaos run is seen, its own folder and the engine not.
    module = tmp_path / "demo.py"
    module.write_text(
        "from ..any_stack.chaos_run import run_chaos\nfrom ..engine import pipeline\nfrom . import backlog\n"
    )

    assert _beside(module, ("payments",)) == {"any_stack.chaos_run", "any_stack.chaos_run.run_chaos"}
    assert LAYER_OF["any_stack"] < LAYER_OF["payments"]  # so the upward check alone lets it through
