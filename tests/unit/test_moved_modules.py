"""Moved modules of the construct library: the old path still imports, warns once naming the new path and the
removal version, and gives the new module itself; the old name has no file of its own (house rule 9)."""

from __future__ import annotations

import json
import subprocess
import sys

from effectively_once import _moved_modules

from .helpers import REPO

ROOT = REPO / "constructs" / "effectively_once"

#: Run in a fresh interpreter: the old path must be imported for the first time to warn.
PROBE = """
import json, sys, warnings
import effectively_once
eager = "aws_cdk" in sys.modules
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import effectively_once.consumer as old
import effectively_once.queue_consumer as new
print(json.dumps({
    "eager": eager,
    "warnings": [[w.category.__name__, str(w.message), w.filename, w.lineno] for w in caught],
    "same": old is new and old.IdempotentQueueConsumer is effectively_once.IdempotentQueueConsumer,
    "name": new.__name__,
}))
"""


def test_the_old_consumer_path_warns_and_gives_the_queue_consumer_module() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=REPO)
    seen = json.loads(done.stdout.splitlines()[-1])

    assert seen["warnings"] == [
        [
            "DeprecationWarning",
            "effectively_once.consumer is deprecated and will be removed in 0.4.0: import "
            "effectively_once.queue_consumer instead",
            "<string>",
            7,
        ]
    ]
    assert seen["same"] is True
    assert seen["name"] == "effectively_once.queue_consumer"
    assert seen["eager"] is False


def test_a_moved_module_leaves_no_file_under_its_old_name() -> None:
    for old, new in _moved_modules.MOVED.items():
        assert not (ROOT / f"{old.rpartition('.')[2]}.py").exists()
        assert (ROOT / f"{new.rpartition('.')[2]}.py").exists()


def test_other_names_are_left_to_the_other_finders() -> None:
    finder = _moved_modules.MovedModuleFinder(_moved_modules.MOVED, _moved_modules.REMOVED_IN)

    assert finder.find_spec("effectively_once.queue_consumer", None) is None
    assert finder.find_spec("effectively_once_runtime.consumer", None) is None
