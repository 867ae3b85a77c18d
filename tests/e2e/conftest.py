"""The end-to-end tests' one local AWS and their deploys, shared by every module of a test session.

``local_aws`` (session scope) starts one moto server on loopback (``effectively_once_local.aws.server.MotoServer``);
``local_aws.deploy(app_dir, stacks, context)`` runs ``cdk deploy`` of those stacks into it once per test session
for the same app, stacks and context, and returns the ``cdk.out`` it deployed from (what
``ChaosOptions(endpoint=..., cdk_out=...)`` takes). A module that needs state no other module has touched deploys
stacks of its own (other stack names); modules that only read share one deploy.

The command-line runs (``make demo``'s entry point, Ctrl-C) start their own local AWS, as a user's command does.

``make proof`` runs these modules side by side (pytest-xdist, ``--dist loadgroup``): each worker is a test session of
its own, so it has its own local AWS on its own free port and its own run folders (``tmp_path_factory``), and two
workers never share a queue, a table or a report. A work unit is one test file (its module-scoped deploys and runs
happen once), unless the module sets ``WORK_UNIT = "test"``: then each test is a unit of its own, for a module whose
tests are independent runs on one deploy (the gallery), at the cost of that deploy once per worker that takes one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from effectively_once_local.any_stack.chaos_context import ChaosOptions
from effectively_once_local.aws.deploy import deploy
from effectively_once_local.aws.server import MotoServer


class LocalAws:
    """One local AWS for the session and the deploys made into it (one per app, stacks and context)."""

    def __init__(self, server: MotoServer, folder: Path) -> None:
        self._server = server
        self._folder = folder
        self._deployed: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], Path] = {}

    @property
    def endpoint(self) -> str:
        return str(self._server.endpoint)

    def deploy(self, app_dir: Path, stacks: Sequence[str], context: dict[str, str]) -> Path:
        """``cdk deploy`` of ``stacks`` of ``app_dir`` with ``-c`` ``context``, once per session; the ``cdk.out``.

        :raises ValueError: one of the stacks was already deployed with another app folder or context (a stack
            name is one stack in the local AWS: deploying it twice would fail on moto, or test the wrong template).
        """
        key = (str(app_dir.resolve()), tuple(stacks), tuple(sorted(context.items())))
        if key in self._deployed:
            return self._deployed[key]
        clash = [s for (app, done, ctx) in self._deployed for s in done if s in stacks]
        if clash:
            raise ValueError(f"stacks {clash} are deployed in this session already, with another app or context")
        run = self._folder / f"deploy-{len(self._deployed)}"
        deploy(self.endpoint, app_dir, list(stacks), context, run / "cdk.log")
        self._deployed[key] = run / "cdk.out"
        return run / "cdk.out"

    def chaos_options(self, *, app_dir: Path, stack: str, cdk_out: Path, run_dir: Path, **fields: Any) -> ChaosOptions:
        """A chaos run of ``stack`` as deployed here (from ``cdk_out``): its report and logs in ``run_dir``, quiet,
        300 s to drain unless ``fields`` say otherwise; ``fields``: the rest of ``ChaosOptions``."""
        return ChaosOptions(
            app_dir=app_dir,
            stack=stack,
            report_path=run_dir / "report.json",
            run_dir=run_dir,
            quiet=True,
            endpoint=self.endpoint,
            cdk_out=cdk_out,
            **{"drain_timeout_seconds": 300, **fields},
        )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each end-to-end test without an ``xdist_group`` mark gets one: its file's name, or with its module's
    ``WORK_UNIT = "test"`` its own name. Read only under ``--dist loadgroup`` (``make proof``); ``make test``
    distributes whole files (``--dist loadfile``)."""
    here = Path(__file__).parent
    loadgroup = bool(getattr(config.option, "loadgroup", False))  # set in pytest-xdist's workers
    for item in items:
        if item.path.parent != here or item.get_closest_marker("xdist_group"):
            continue
        module = getattr(item, "module", None)
        unit = f"{item.path.name}::{item.name}" if getattr(module, "WORK_UNIT", "file") == "test" else item.path.name
        unit = unit.replace("[", "(").replace("]", ")")  # the scheduler reads a group only after the last "]"
        item.add_marker(pytest.mark.xdist_group(unit))
        if loadgroup:
            _name_the_group(item, unit)


def _name_the_group(item: pytest.Item, unit: str) -> None:
    """The ``@<group>`` suffix of the node id, which is what ``--dist loadgroup`` schedules by. pytest-xdist 3.8
    appends it by setting ``item._nodeid``, which pytest 9 no longer reads (its node id lives in ``item._id``), so
    without this every test was scheduled alone: a file's module-scoped deploys and runs were repeated on each
    worker that took one of its tests (the walk-through's install three times, the demo's runs on every worker)."""
    from _pytest.nodeid import NodeId

    if not item.nodeid.endswith(f"@{unit}"):
        item._id = NodeId.parse(f"{item.nodeid}@{unit}")  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def local_aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalAws]:
    folder = tmp_path_factory.mktemp("local-aws")
    with MotoServer(log_path=folder / "moto.log") as server:
        yield LocalAws(server, folder)
