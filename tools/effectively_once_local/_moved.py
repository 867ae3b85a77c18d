"""The tooling's old module paths, kept working until 0.4.0: before 0.3.0 its 31 modules sat in one flat folder.

``import effectively_once_local.esm`` (any old path in :data:`MOVED`) gives the very module at its new path
(``effectively_once_local.runner.mapping_runner``: one module, not a copy, so ``mock.patch`` on the old path patches
the new one) with a ``DeprecationWarning`` naming the new path: a ``sys.modules`` alias, made by the library's
moved-module finder (``effectively_once._moved_modules``, the one the library uses for its own old paths), which the
package installs on import with this table (:func:`install`). Three old paths are now folders of their own
(``chaos``, ``traffic``, ``report``): the old module's names are still read from them, with the same warning
(:func:`old_attribute`).
The deprecation table (docs/deprecations.md) lists them; ``effectively_once.local.*`` maps through this table too.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
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
    return deprecation(f"{PACKAGE}.{old}", new_path(old), REMOVED_IN)


#: The finder's table: ``{old dotted path: new dotted path}``. The three old paths that are folders now never reach
#: it (the finder is last, the package's own folder is found first; :func:`old_attribute` serves their names).
_ALIASES: Final = {f"{PACKAGE}.{old}": new_path(old) for old in MOVED}


def install() -> None:
    """Put the library's moved-module finder for :data:`MOVED` last on ``sys.meta_path`` (once): the package's own
    folders are found first."""
    install_finder(_ALIASES, REMOVED_IN)


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
