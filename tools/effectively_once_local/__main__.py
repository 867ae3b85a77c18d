"""``python -m effectively_once_local``: the command line (:mod:`effectively_once_local.cli`)."""

from __future__ import annotations

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
