"""Deprecated alias of :mod:`effectively_once_local` (the local tooling's own package since 0.3.0), removed in 0.4.0.

``python -m effectively_once.local ...`` runs ``python -m effectively_once_local ...``, and
``from effectively_once.local.X import Y`` gives the very objects of ``effectively_once_local.X`` (one module each,
not a copy), with a ``DeprecationWarning``. Nothing in the library imports this package: it exists for old command
lines and imports only, and needs the ``[local]`` extra like the tooling itself.
"""

from __future__ import annotations

import importlib
import sys
import warnings

from effectively_once_local._moved import MOVED, new_path

DEPRECATION = (
    "effectively_once.local is deprecated and will be removed in 0.4.0: use effectively_once_local "
    "(python -m effectively_once_local)"
)

warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)

# `from effectively_once.local.X import Y` finds effectively_once.local.X in sys.modules: the tooling's own module,
# at the path it has moved to (the old flat names, as 0.3.0's deprecation promised them; not the later dotted ones,
# `profiles.chaos_run`, which this alias never had). Not __main__: `python -m effectively_once.local` runs this
# package's own __main__.py.
for _old in MOVED:
    if "." not in _old:
        sys.modules[f"{__name__}.{_old}"] = importlib.import_module(new_path(_old))
