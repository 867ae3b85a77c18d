"""The tooling's old module paths, kept working until 0.4.0: before 0.3.0 its 31 modules sat in one flat folder, and
until the folders by job (issue 56, item 4) the profiles sat in ``profiles/`` and Lambda's asynchronous inbox and the
mapping configs in ``runner/``.

``import effectively_once_local.esm`` (any old path in :data:`MOVED`) gives the very module at its new path
(``effectively_once_local.runner.mapping_runner``: one module, not a copy, so ``mock.patch`` on the old path patches
the new one) with a ``DeprecationWarning`` naming the new path: a ``sys.modules`` alias, made by the library's
moved-module finder (``effectively_once._moved_modules``, the one the library uses for its own old paths), which the
package installs on import with this table (:func:`install`). An old flat path that moved twice names its newest
path (``stack_run``: ``any_stack.chaos_run``). Four old paths are now folders of their own (``chaos``, ``traffic``,
``report``, ``redrive``): the old module's names are still read from them, with the same warning
(:func:`old_attribute`). The old folder ``profiles`` is gone: it imports as an empty package, through which its old
modules import (:class:`GoneFolderFinder`).
The deprecation table (docs/deprecations.md) lists them; ``effectively_once.local.*`` maps the flat ones (those
0.3.0 named) through this table too.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

from effectively_once._moved_modules import deprecation
from effectively_once._moved_modules import install as install_finder

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
    "async_queue": "aws.async_inbox",
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
    "pipeline": "engine.pipeline",
    "stack_run": "any_stack.chaos_run",
    "demo": "payments.demo",
    "sandbox": "payments.payments_view",
    "producer": "payments.payments_input",
    "report": "payments.payments_report",
    "backlog": "payments.backlog",
    "async_leg": "payments.async_leg",
    "redrive": "redrive.dlq_redrive",
    "remote": "payments.remote",
    # profiles/ split by job into engine/, any_stack/, redrive/ and payments/; Lambda's asynchronous inbox in aws/.
    "profiles.pipeline": "engine.pipeline",
    "profiles.drain_limit": "engine.drain_limit",
    "profiles.chaos_run": "any_stack.chaos_run",
    "profiles.chaos_targets": "any_stack.chaos_targets",
    "profiles.inert_faults": "any_stack.inert_faults",
    "profiles.redrive": "redrive.dlq_redrive",
    "profiles.redrive_outcome": "redrive.redrive_outcome",
    "profiles.on_failure_redrive": "redrive.on_failure_redrive",
    "profiles.demo": "payments.demo",
    "profiles.payments_view": "payments.payments_view",
    "profiles.payments_input": "payments.payments_input",
    "profiles.payments_report": "payments.payments_report",
    "profiles.backlog": "payments.backlog",
    "profiles.async_leg": "payments.async_leg",
    "profiles.remote": "payments.remote",
    "runner.async_inbox": "aws.async_inbox",
    # Its names went two ways (MappingConfig, AsyncConfig and the SQS limits to aws.mapping_config; PollerSpec and
    # COUNT_REQUESTS_ENV to runner.poller_spec): the runner's front holds them all.
    "runner.mapping_config": "runner.mapping_runner",
}


def new_path(old: str) -> str:
    """The new dotted path of the old module ``old``: ``"esm"`` gives
    ``"effectively_once_local.runner.mapping_runner"``."""
    return f"{PACKAGE}.{MOVED[old]}"


def message(old: str) -> str:
    """The deprecation warning's text for the old module path ``old``."""
    return deprecation(f"{PACKAGE}.{old}", new_path(old), REMOVED_IN)


#: The finder's table: ``{old dotted path: new dotted path}``. The four old paths that are folders now never reach
#: it (the finder is last, the package's own folder is found first; :func:`old_attribute` serves their names).
_ALIASES: Final = {f"{PACKAGE}.{old}": new_path(old) for old in MOVED}

#: The old folders that are gone, every module of theirs in :data:`MOVED` (``profiles.chaos_run``).
GONE_FOLDERS: Final = ("profiles",)


class GoneFolderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the :data:`GONE_FOLDERS` only: each an empty package with no folder of its own and no warning of its
    own, so that its old modules import through it (``import effectively_once_local.profiles.chaos_run``), each with
    its warning from the moved-module finder; an old module read as its attribute is imported so."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in {f"{PACKAGE}.{folder}" for folder in GONE_FOLDERS}:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        folder = module.__name__.removeprefix(f"{PACKAGE}.")
        module.__doc__ = f"Gone: its modules' old paths ({folder}.*) import their new modules until {REMOVED_IN}."
        vars(module)["__getattr__"] = functools.partial(_old_module_of, folder)  # PEP 562: read from the module's dict


def _old_module_of(folder: str, name: str) -> ModuleType:
    """The old module ``name`` of the gone folder ``folder`` (``profiles``, ``chaos_run``), with its warning."""
    if f"{folder}.{name}" not in MOVED:
        raise AttributeError(f"module '{PACKAGE}.{folder}' has no attribute {name!r}")
    return importlib.import_module(f"{PACKAGE}.{folder}.{name}")


def install() -> None:
    """Put the library's moved-module finder for :data:`MOVED` last on ``sys.meta_path`` (the package's own folders
    are found first), and the finder of the :data:`GONE_FOLDERS` first (a gone folder left holding a ``__pycache__``
    would be found as a namespace package otherwise); once each."""
    install_finder(_ALIASES, REMOVED_IN)
    if not any(isinstance(finder, GoneFolderFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, GoneFolderFinder())


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
