"""docs/walkthrough.md ("Your app's first chaos run"), run as written, from a folder outside the repository.

The page and this test cannot drift: the app's files are the page's code blocks that carry a file name
(```` ```python title="app.py" ````), written as they are, and the commands run are the page's
``python -m effectively_once_local chaos`` lines. What a user installs is replaced by what is already here: the
package is the wheel built from this checkout (``pip install --no-deps --target``; its dependencies, the ``[local]``
extra's included, come from the test venv), and the CDK CLI is the repository's ``node_modules/.bin`` on the PATH (the
page's ``npm install`` line must name the same pinned release). The sample output on the page must have the shape of
the real one. About two minutes on 2 cores: the wheel, then two chaos runs (each its own local AWS and
``cdk deploy``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout (as tests/unit/test_wheel.py builds it: hatchling, no isolation, offline),
    installed alone into a folder of its own."""
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = dist.glob("effectively_once-*.whl")
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
        + ["--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


@pytest.fixture(scope="module")
def env(site: Path) -> dict[str, str]:
    """The user's shell after the page's first step. The test venv's python (``python3`` for cdk.json's app too: the
    tooling puts its interpreter's folder first on the CLI's PATH) and the repository's CDK CLI on the PATH.

    PYTHONPATH is the install target alone: its entries come before the venv's site-packages on ``sys.path``, so the
    wheel's packages win over the editable install of this checkout, whose ``.pth`` appends ``constructs/``,
    ``lambda_src/`` and ``tools/`` after site-packages (``test_the_app_runs_on_the_wheel_not_the_checkout`` checks it
    in the same environment). Those folders stay on the path, last, reachable only for a name the wheel lacks (the
    sample's top-level ``payments``, which a chaos run never imports). ``python -S`` would drop them, but only from
    the tooling's own process: the CLI runs ``python3 app.py`` from cdk.json, where no flag can be passed."""
    path = os.pathsep.join([str(Path(sys.executable).parent), str(REPO / "node_modules" / ".bin"), os.environ["PATH"]])
    drop = {"PYTHONPATH", "AWS_ENDPOINT_URL", "AWS_PROFILE", "CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"}
    return {
        **{k: v for k, v in os.environ.items() if k not in drop},
        "PATH": path,
        "PYTHONPATH": str(site),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's files in an empty folder outside the repository, with no node_modules in it or above it."""
    folder = tmp_path_factory.mktemp("my-orders")
    assert REPO not in folder.resolve().parents
    assert not [p for p in (folder, *folder.parents) if (p / "node_modules").exists()]
    for name, text in _files().items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def runs(app: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """Each chaos command of the page, in order, in the app's folder: its exit code, output and JSON report."""
    assert shutil.which("cdk", path=env["PATH"]) == str(REPO / "node_modules" / ".bin" / "cdk")
    out = []
    for command in _commands():
        done = subprocess.run(
            [sys.executable, *command[1:]],  # `python` is the test venv's
            cwd=app,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
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


def test_the_page_installs_the_pinned_cli_and_the_local_extra() -> None:
    text = PAGE.read_text(encoding="utf-8")

    assert f"npm install --no-save aws-cdk@{_pinned_cli()}\n" in text
    assert set(re.findall(r"aws-cdk@([\w.]+)", text)) == {_pinned_cli(), "3.0.0"}, "3.0.0: the refused build"
    assert 'pip install "effectively-once[local]"\n' in text


def test_the_page_holds_the_whole_app() -> None:
    assert sorted(_files()) == ["app.py", "cdk.json", "orders.jsonl", "src/orders.py"]
    assert len(_commands()) == 2
    assert all(
        c[:7] == ["python", "-m", "effectively_once_local", "chaos", "--app-dir", ".", "--stack"] for c in _commands()
    )
    assert len(_outputs()) == len(_commands()), "one sample output per command"


def test_the_app_runs_on_the_wheel_not_the_checkout(app: Path, env: dict[str, str], site: Path) -> None:
    probe = f"import json, {', '.join(PACKAGES)}; print(json.dumps([{', '.join(f'{p}.__file__' for p in PACKAGES)}]))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=app, env=env, capture_output=True, text=True, check=True)

    for name, file in zip(PACKAGES, json.loads(done.stdout), strict=True):
        assert site.resolve() in Path(file).resolve().parents, f"{name} from {file}, not from the wheel"


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
        ok = [line for line in run["stdout"].splitlines() if line.startswith("OK: ")]
        assert ok and re.fullmatch(rf"OK: {orders} keys, \d+ effects, 0 lost, 0 duplicated, 0 unexpected, .*", ok[0])


def test_the_pages_sample_outputs_have_the_runs_shape(runs: list[dict[str, Any]]) -> None:
    for sample, run in zip(_outputs(), runs, strict=True):
        shown = [m[1] for m in map(COUNT_LINE.fullmatch, sample.splitlines()) if m]
        printed = [m[1] for m in map(COUNT_LINE.fullmatch, run["stdout"].splitlines()) if m]

        assert shown and shown == printed, "the sample's count lines, in the run's order"
        for prefix in ("effects counted from: ", "kills: ", "OK: "):
            sample_line = next(line for line in sample.splitlines() if line.startswith(prefix))
            # The sample's line with each number standing for any number.
            shape = r"\d+".join(re.escape(part) for part in re.split(r"\d+", sample_line))
            assert [line for line in run["stdout"].splitlines() if re.fullmatch(shape, line)], sample_line
