"""Old module paths of the construct library that still import, with a ``DeprecationWarning``, until their removal.

A moved module leaves no file behind under its old name (house rule 9: two modules never share a name across
packages; ``effectively_once.consumer`` shared its name with ``effectively_once_runtime.consumer``). Instead,
:func:`install` (called by ``effectively_once/__init__.py``) puts a finder on ``sys.meta_path`` that answers only
the old paths of :data:`MOVED`: importing one warns (at the importing line) and gives the new module itself (the
same module object, so ``effectively_once.consumer.IdempotentQueueConsumer is
effectively_once.queue_consumer.IdempotentQueueConsumer``). The new module is imported only then: importing
``effectively_once`` stays free of aws-cdk-lib (the package's PEP 562 promise). Standard library only.

Every old path is in the deprecation table (docs) with its removal version. The local tooling moves its old flat
module paths with the same finder (``effectively_once_local._moved``), each package with its own table.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Final

#: The release that removes the old paths.
REMOVED_IN: Final = "0.4.0"
#: {old module path: new module path}.
MOVED: Final = {
    "effectively_once.consumer": "effectively_once.queue_consumer",
}


def deprecation(old: str, new: str | None = None, removed_in: str = REMOVED_IN) -> str:
    """The warning for an import of ``old``, which moved to ``new`` (:default: ``None``: its entry in :data:`MOVED`)
    and goes in ``removed_in``."""
    return f"{old} is deprecated and will be removed in {removed_in}: import {new or MOVED[old]} instead"


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of ``moved`` (``{old dotted path: new dotted path}``) only, ``None`` for every other name
    (the next finder looks); ``removed_in`` is the release the warning names."""

    def __init__(self, moved: Mapping[str, str], removed_in: str) -> None:
        self.moved = moved
        self.removed_in = removed_in

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder module, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        # stacklevel 2: the warnings module skips the import machinery's frames, so this names the importing line.
        warnings.warn(deprecation(old, self.moved[old], self.removed_in), DeprecationWarning, stacklevel=2)
        # The import system returns what sys.modules holds under the old name once this returns: the new module.
        sys.modules[old] = importlib.import_module(self.moved[old])


def install(moved: Mapping[str, str] = MOVED, removed_in: str = REMOVED_IN) -> None:
    """Put a finder for ``moved`` (:default: this package's :data:`MOVED`) last on ``sys.meta_path``, once per table
    (a reloaded package does not add a second); a package's own files are found first."""
    if not any(isinstance(finder, MovedModuleFinder) and finder.moved is moved for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder(moved, removed_in))
