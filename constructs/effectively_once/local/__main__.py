"""``python -m effectively_once.local``: deprecated, runs ``python -m effectively_once_local`` (removed in 0.4.0)."""

from __future__ import annotations

import sys
import warnings

from effectively_once.local import DEPRECATION
from effectively_once_local.cli.main import main

if __name__ == "__main__":
    warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=1)
    sys.exit(main())
