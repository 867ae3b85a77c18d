"""docs/walkthrough.md ("Your app's first chaos run"), run as written, from an empty folder outside the repository.

The page and this test cannot drift: the page's first bash block (the checkout's ``make wheel``, the folder, the
venv, ``pip install`` of the wheel with ``[local]``, ``npm install`` of the CDK CLI) runs in bash as it is, with
``EO`` set to this checkout (the one variable the page asks the user to set); the app's files are the page's code
blocks that carry a file name (```` ```python title="app.py" ````), written as they are; and the commands run are the
page's ``python -m effectively_once_local chaos`` lines, in the venv the first block made. Nothing of the test's own
venv or of the checkout's ``node_modules`` is on the PATH. The sample output on the page must have the shape of the
real one. About three minutes on 2 cores: the wheel and the installs (the packages come from the machine's package
index, the CLI from npm's registry), then two chaos runs (each its own local AWS and ``cdk deploy``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..conftest import recording, times_module

pytestmark = [pytest.mark.e2e, pytest.mark.proof]
REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "walkthrough.md"
#: A fenced block: its language, its ``title="..."`` (a file name, or ``output`` for a sample output) and its text.
FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```[ \t]*(?=\n|\Z)', re.M | re.S)
CHAOS = "python -m effectively_once_local chaos"
#: A count line of the chaos run's summary (``lost                        0``).
COUNT_LINE = re.compile(r"(\w+) +\d+")
PACKAGES = ("effectively_once", "effectively_once_local", "effectively_once_runtime")


def _blocks() -> list[tuple[str, str | None, str]]:
    return [(m[1], m[2], m[3]) for m in FENCE.finditer(PAGE.read_text(encoding="utf-8"))]


def _files() -> dict[str, str]:
    return {title: text for _, title, text in _blocks() if title and title != "output"}


def _outputs() -> list[str]:
    return [text for _, title, text in _blocks() if title == "output"]


def _commands() -> list[list[str]]:
    """Every chaos command of the page's bash blocks, its continuation lines joined, as arguments."""
    commands = []
    for language, _, text in _blocks():
        if language != "bash":
            continue
        for line in text.replace("\\\n", " ").splitlines():
            if line.startswith(CHAOS):
                commands.append(shlex.split(line))
    return commands


def _pinned_cli() -> str:
    return str(json.loads((REPO / "package.json").read_text(encoding="utf-8"))["devDependencies"]["aws-cdk"])


def _install_block() -> str:
    """The page's first bash block: the folder, the venv, the package and the CDK CLI."""
    return next(text for language, _, text in _blocks() if language == "bash")


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    """A user's shell: ``EO`` is this checkout; nothing of the test's venv, of this checkout's ``.venv`` or
    ``node_modules`` (which ``make`` puts first on the PATH), or of an AWS account."""
    drop = {
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION",
        "AWS_ENDPOINT_URL",
        "AWS_PROFILE",
        "CDK_DEFAULT_ACCOUNT",
        "CDK_DEFAULT_REGION",
    }
    outside = [p for p in os.environ["PATH"].split(os.pathsep) if p and REPO not in Path(p).resolve().parents]
    return {
        **{k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MAKE")},
        "PATH": os.pathsep.join(outside),
        "EO": str(REPO),
    }


@dataclass(frozen=True)
class Installed:
    """What the page's first block did: the folder it ran in and its output."""

    home: Path
    done: subprocess.CompletedProcess[str]

    @property
    def app(self) -> Path:
        """The folder the block made and entered (``mkdir my-orders && cd my-orders``)."""
        lines = _install_block().splitlines()
        (made,) = [m[1] for m in (re.fullmatch(r"mkdir (\S+) && cd \1", line) for line in lines) if m]
        return self.home / made


#: The deploy line a chaos run prints (``engine/pipeline.py``).
DEPLOYED = re.compile(r"^deployed \S+ with the CDK CLI in (\d+)s", re.M)


@pytest.fixture(scope="module")
def record(request: pytest.FixtureRequest) -> Callable[[str, float], None]:
    """Records a time into .local-aws/times.json when the session records (``make proof``: ``--record-time``): the
    page's stated times come from these runs once ``make record-times`` committed them; otherwise does nothing."""
    if not recording(request.config):
        return lambda measure, seconds: None
    return times_module().record  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory, env: dict[str, str], record: Callable[[str, float], None]
) -> Installed:
    """The page's first block run in bash from an empty folder outside the repository, with no node_modules in it
    or above it."""
    home = tmp_path_factory.mktemp("home")
    assert REPO not in home.resolve().parents
    assert not [p for p in (home, *home.parents) if (p / "node_modules").exists()]
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", _install_block()],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"the page's install block: exit {done.returncode}\n{done.stderr[-3000:]}"
    record("walkthrough set-up", time.monotonic() - started)
    return Installed(home, done)


@pytest.fixture(scope="module")
def app(installed: Installed) -> Path:
    """The app's folder as the first block left it (its venv and CLI), with the page's files written into it."""
    folder = installed.app
    for name, text in _files().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def runs(app: Path, env: dict[str, str], record: Callable[[str, float], None]) -> list[dict[str, Any]]:
    """Each chaos command of the page, in order, in the app's folder and its activated venv: its exit code, output
    and JSON report."""
    assert (app / "node_modules" / ".bin" / "cdk").exists(), "the page's npm install puts the CLI in the app"
    out = []
    for command in _commands():
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-c", f". .venv/bin/activate && {shlex.join(command)}"],
            cwd=app,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode == 0:
            record("walkthrough chaos run", time.monotonic() - started)
            for deployed in DEPLOYED.findall(done.stdout + done.stderr):
                record("walkthrough deploy", float(deployed))
        report_path = app / "reports" / "chaos-report.json"
        report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.is_file() else {}
        report_path.unlink(missing_ok=True)  # the next command writes its own
        out.append(
            {
                "command": command,
                "code": done.returncode,
                "stdout": done.stdout,
                "stderr": done.stderr,
                "report": report,
            }
        )
    return out


def test_the_page_installs_the_pinned_cli_and_the_built_wheel_with_the_local_extra() -> None:
    text = PAGE.read_text(encoding="utf-8")
    block = _install_block()

    assert f"npm install --no-save aws-cdk@{_pinned_cli()}\n" in block
    assert set(re.findall(r"aws-cdk@([\w.]+)", text)) == {_pinned_cli(), "3.0.0"}, "3.0.0: the refused build"
    assert 'make -C "$EO" wheel' in block
    assert 'pip install "$(ls "$EO"/dist/effectively_once-*.whl)[local]"\n' in block
    assert "not on PyPI yet" in text


def test_make_wheel_prints_the_line_that_installs_it(installed: Installed) -> None:
    (wheel,) = (REPO / "dist").glob("effectively_once-*.whl")
    assert f'  pip install "{wheel}[local]"' in installed.done.stdout.splitlines()


def test_the_page_holds_the_whole_app() -> None:
    assert sorted(_files()) == ["app.py", "cdk.json", "orders.jsonl", "src/orders.py"]
    assert len(_commands()) == 2
    assert all(
        c[:7] == ["python", "-m", "effectively_once_local", "chaos", "--app-dir", ".", "--stack"] for c in _commands()
    )
    assert len(_outputs()) == len(_commands()), "one sample output per command"


def test_the_app_runs_on_the_wheel_not_the_checkout(app: Path, env: dict[str, str]) -> None:
    probe = f"import json, {', '.join(PACKAGES)}; print(json.dumps([{', '.join(f'{p}.__file__' for p in PACKAGES)}]))"
    done = subprocess.run(
        [str(app / ".venv" / "bin" / "python"), "-c", probe],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )

    for name, file in zip(PACKAGES, json.loads(done.stdout), strict=True):
        path = Path(file).resolve()
        assert (app / ".venv").resolve() in path.parents, f"{name} from {file}, not from the app's venv"
        assert REPO not in path.parents, f"{name} from the checkout"


def _ok_line(line: str) -> str:
    """A passing verdict line with the crash window it left untested and the count of forced strikes taken out
    (``OK, crash window untested (...):`` -> ``OK:``, ``; 3 kills struck (2 forced)`` -> ``; 3 kills struck``): which
    classes a small run's draw and forced strikes reach depends on the batches it made."""
    line = re.sub(r"\AOK, crash window untested \([^)]*\):", "OK:", line)
    return re.sub(r" \(\d+ forced\)\Z", "", line)


def test_every_chaos_command_of_the_page_loses_and_duplicates_nothing(runs: list[dict[str, Any]]) -> None:
    orders = len(_files()["orders.jsonl"].splitlines())

    for run in runs:
        assert run["code"] == 0, f"{shlex.join(run['command'])}: exit {run['code']}\n{run['stderr'][-3000:]}"
        total = run["report"]["total"]
        assert (total["lost"], total["duplicated"], total["unexpected"], total["unexplained_replays"]) == (0, 0, 0, 0)
        assert total["keys_sent"] == orders
        assert total["effects"] + total["dead_lettered_keys"] >= orders
        assert total["messages_sent"] >= orders
        assert run["report"]["effects_counted_from"] == "store", "--effect-table Outbox names the outbox"
        # Under Node 20 the synth the run makes prints no jsii end-of-life banner as Python bytes (b'!!...').
        assert "b'!!" not in run["stdout"] + run["stderr"]
        ok = [_ok_line(line) for line in run["stdout"].splitlines() if line.startswith("OK")]
        assert ok and re.fullmatch(rf"OK: {orders} keys, \d+ effects, 0 lost, 0 duplicated, 0 unexpected, .*", ok[0])


def test_the_pages_sample_outputs_have_the_runs_shape(runs: list[dict[str, Any]]) -> None:
    for sample, run in zip(_outputs(), runs, strict=True):
        shown = [m[1] for m in map(COUNT_LINE.fullmatch, sample.splitlines()) if m]
        printed = [m[1] for m in map(COUNT_LINE.fullmatch, run["stdout"].splitlines()) if m]

        assert shown and shown == printed, "the sample's count lines, in the run's order"
        for prefix in ("effects counted from: ", "kills: ", "OK: "):
            sample_line = next(_ok_line(line) for line in sample.splitlines() if _ok_line(line).startswith(prefix))
            # The sample's line with each number standing for any number.
            shape = r"\d+".join(re.escape(part) for part in re.split(r"\d+", sample_line))
            assert [line for line in run["stdout"].splitlines() if re.fullmatch(shape, _ok_line(line))], sample_line
