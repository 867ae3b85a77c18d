"""`make proof`'s work units (tests/e2e/conftest.py): under ``--dist loadgroup`` each proof test is in its file's unit,
except the gallery's, each a unit of its own. Read from a real collection of the proof tests, with a plugin that
prints the ``xdist_group`` mark each test ends with (run last, after the conftest's hook)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PLUGIN = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        print("UNIT", item.nodeid, "|", mark.args[0] if mark else "-")
"""


def test_each_proof_file_is_one_work_unit_and_each_gallery_variant_its_own(tmp_path: Path) -> None:
    (tmp_path / "show_units.py").write_text(PLUGIN, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "proof", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-p", "show_units", "tests/e2e"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    units: dict[str, set[str]] = defaultdict(set)
    for line in done.stdout.splitlines():
        if line.startswith("UNIT "):
            nodeid, unit = line[len("UNIT ") :].split(" | ")
            units[nodeid.split("::")[0]].add(unit)

    gallery = units.pop("tests/e2e/test_proof_gallery.py")
    assert len(gallery) >= 10 and "-" not in gallery, gallery
    assert len(units) >= 7, sorted(units)
    assert {path: sorted(u) for path, u in units.items()} == {path: [Path(path).name] for path in units}


def test_the_scheduler_sees_each_tests_unit_in_its_node_id() -> None:
    """pytest-xdist schedules ``--dist loadgroup`` by the ``@<unit>`` suffix of the node ids its workers report.
    pytest-xdist 3.8 sets it where pytest 9 no longer reads it; tests/e2e/conftest.py sets it itself. Without the
    suffix every test is scheduled alone and a file's module-scoped deploys repeat on every worker."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "proof",
            "-n",
            "1",
            "--dist",
            "loadgroup",
            "-v",
            "-p",
            "no:cacheprovider",
        ]
        + ["tests/e2e/test_walkthrough.py", "-k", "holds_the_whole_app"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "::test_the_page_holds_the_whole_app@test_walkthrough.py" in done.stdout, done.stdout[-3000:]
