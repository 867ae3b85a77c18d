"""The tooling's old module paths, kept working until 0.4.0: before 0.3.0 its 31 modules sat in one flat folder.

``import effectively_once_local.esm`` (any old path in :data:`MOVED`) gives the very module at its new path
(``effectively_once_local.runner.mapping_runner``: one module, not a copy, so ``mock.patch`` on the old path patches
the new one) with a ``DeprecationWarning`` naming the new path: a ``sys.modules`` alias, made by the finder the
package installs on import (:func:`install`). Three old paths are now folders of their own (``chaos``, ``traffic``,
``report``): the old module's names are still read from them, with the same warning (:func:`old_attribute`).
The deprecation table (docs/deprecations.md) lists them; ``effectively_once.local.*`` maps through this table too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any, Final

PACKAGE: Final = "effectively_once_local"
#: The release that removes the old paths.
REMOVED_IN: Final = "0.4.0"
#: ``{old module: its new path, below the package}``.
MOVED: Final[dict[str, str]] = {
    "limits": "base.tool_limits",
    "json_lines": "base.json_lines",
    "figures": "base.run_figures",
    "faults": "chaos.faults",
    "chaos": "chaos.fault_model",
    "chaos_input": "traffic.chaos_input",
    "traffic": "traffic.producer",
    "esm": "runner.mapping_runner",
    "async_queue": "runner.async_inbox",
    "_moto_server": "aws.moto_patches",
    "server": "aws.server",
    "deploy": "aws.deploy",
    "stack": "aws.discovery",
    "readback": "aws.readback",
    "provider": "aws.provider_stand_in",
    "attribution": "proof.attribution",
    "effects": "proof.key_check",
    "stores": "proof.stores",
    "html_report": "report.page",
    "pipeline": "profiles.pipeline",
    "stack_run": "profiles.chaos_run",
    "demo": "profiles.demo",
    "sandbox": "profiles.payments_view",
    "producer": "profiles.payments_input",
    "report": "profiles.payments_report",
    "backlog": "profiles.backlog",
    "async_leg": "profiles.async_leg",
    "redrive": "profiles.redrive",
    "remote": "profiles.remote",
}


def new_path(old: str) -> str:
    """The new dotted path of the old module ``old``: ``"esm"`` gives
    ``"effectively_once_local.runner.mapping_runner"``."""
    return f"{PACKAGE}.{MOVED[old]}"


def message(old: str) -> str:
    """The deprecation warning's text for the old module path ``old``."""
    return f"{PACKAGE}.{old} is deprecated and will be removed in {REMOVED_IN}: import {new_path(old)} instead"


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old module paths that no longer exist as files, and loads each as its new module."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, old = fullname.rpartition(".")
        if package != PACKAGE or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__.rpartition(".")[2]
        warnings.warn(message(old), DeprecationWarning, stacklevel=2)
        # The import system returns what sys.modules holds after exec_module: the new module itself.
        sys.modules[module.__name__] = importlib.import_module(new_path(old))


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once): the package's own folders are found first."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())


def old_attribute(old: str, name: str) -> Any:
    """``name`` of the old module ``old`` whose path is now a folder (``effectively_once_local.chaos.ChaosConfig``),
    with the deprecation warning; ``AttributeError`` when the old module had no such name either."""
    if name.startswith("__") or importlib.util.find_spec(f"{PACKAGE}.{old}.{name}") is not None:
        # A dunder, or a module of the folder itself (``from effectively_once_local.chaos import faults``).
        raise AttributeError(f"module {PACKAGE}.{old!r} has no attribute {name!r}")
    moved = importlib.import_module(new_path(old))
    if not hasattr(moved, name):
        raise AttributeError(f"module {PACKAGE}.{old!r} has no attribute {name!r}")
    warnings.warn(message(old), DeprecationWarning, stacklevel=3)
    return getattr(moved, name)
