"""The CDK CLI the tooling deploys with (``effectively_once_local.aws.deploy.cdk_command``): found in the app's
``node_modules`` (or a folder above it, or the PATH), refused when missing, older than the minimum or not 2.x (the
deprecated ``aws-cdk@3.0.0`` build is an old one), each time in one line that tells the user to run
``npm install --no-save aws-cdk@<the pinned version>`` in the app's folder.

The fake CLIs are shell scripts under ``tmp_path`` printing what a real ``cdk --version`` prints
(``2.1148.1 (build fcf5e34)``; the 3.0.0 build prints ``3.0.0 (build 4f3efd4)``).
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from effectively_once_local.aws import deploy
from effectively_once_local.aws.deploy import DeployError, cdk_command
from effectively_once_local.base import tool_limits as limits

from .conftest import REPO


def _pinned() -> str:
    """The CDK CLI release the repository pins (package.json), read here so that no test trusts the constant."""
    return str(json.loads((REPO / "package.json").read_text(encoding="utf-8"))["devDependencies"]["aws-cdk"])


def _install_line() -> str:
    return f"npm install --no-save aws-cdk@{_pinned()}"


def _fake_cli(app: Path, script: str) -> Path:
    """``app/node_modules/.bin/cdk``: a shell script with ``script`` as its body."""
    cdk = app / "node_modules" / ".bin" / "cdk"
    cdk.parent.mkdir(parents=True)
    cdk.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    cdk.chmod(cdk.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return cdk


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An app folder with no CLI in it, above it or on the PATH (the test run's PATH has the repository's)."""
    folder = tmp_path / "app"
    folder.mkdir()
    assert not [p for p in (folder, *folder.parents) if (p / "node_modules" / ".bin" / "cdk").exists()]
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return folder


def test_pinned_cli_version_is_package_jsons() -> None:
    assert limits.CDK_CLI_VERSION == _pinned()
    minimum = tuple(int(part) for part in limits.CDK_CLI_MIN_VERSION.split("."))
    assert minimum <= tuple(int(part) for part in _pinned().split(".")), "the pinned CLI passes its own check"


def test_fails_without_a_cli_naming_the_pinned_install_line(app: Path) -> None:
    with pytest.raises(DeployError) as raised:
        cdk_command(app)

    message = str(raised.value)
    assert f"run `{_install_line()}` in {app}" in message
    assert "\n" not in message
    assert "npm ci" not in message, "an app folder outside the repository has no package.json"


def test_fails_on_the_deprecated_3_0_0_build(app: Path) -> None:
    cdk = _fake_cli(app, 'echo "3.0.0 (build abc)"')

    with pytest.raises(DeployError) as raised:
        cdk_command(app)

    message = str(raised.value)
    assert f"the CDK CLI {cdk} is version 3.0.0;" in message
    assert f"from {limits.CDK_CLI_MIN_VERSION} on" in message
    assert message.endswith(f"run `{_install_line()}` in {app}")
    assert "\n" not in message


def test_fails_on_a_2_x_older_than_the_minimum(app: Path) -> None:
    _fake_cli(app, 'echo "2.1000.0 (build x)"')

    with pytest.raises(DeployError) as raised:
        cdk_command(app)

    message = str(raised.value)
    assert "is version 2.1000.0;" in message and "2.1148.0" in message
    assert message.endswith(f"run `{_install_line()}` in {app}")


def test_accepts_the_pinned_release(app: Path) -> None:
    cdk = _fake_cli(app, 'echo "2.1148.1 (build x)"')

    assert cdk_command(app) == [str(cdk)]


def test_accepts_the_minimum_and_a_newer_2_x(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    for version in ("2.1148.0", "2.1200.3"):
        app = tmp_path / version
        app.mkdir()
        cdk = _fake_cli(app, f'echo "{version} (build x)"')

        assert cdk_command(app) == [str(cdk)]


def test_accepts_the_repository_cli() -> None:
    # The real CLI (package.json's pin, `make setup`), from the repository and from an app in a subfolder of it.
    real = REPO / "node_modules" / ".bin" / "cdk"

    assert cdk_command(REPO) == [str(real)]
    assert cdk_command(REPO / "examples" / "orders") == [str(real)]
    assert deploy.cli_version(str(real), REPO) == _pinned()


def test_checks_a_cli_on_the_path_too(app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "tools"
    old = _fake_cli(tools, 'echo "2.1000.0 (build x)"')
    monkeypatch.setenv("PATH", str(old.parent))

    with pytest.raises(DeployError, match=r"is version 2\.1000\.0;"):
        cdk_command(app)


def test_returns_cdk_for_a_good_cli_on_the_path(app: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = _fake_cli(tmp_path / "tools", 'echo "2.1148.1 (build x)"')
    monkeypatch.setenv("PATH", str(good.parent))

    assert cdk_command(app) == ["cdk"]


def test_runs_version_once_per_cli(app: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    _fake_cli(app, f'echo x >> "{calls}"\necho "2.1148.1 (build x)"')

    cdk_command(app)
    cdk_command(app)

    assert calls.read_text().splitlines() == ["x"]


def test_fails_when_version_prints_no_version(app: Path) -> None:
    cdk = _fake_cli(app, 'echo "Error: cannot find module" >&2\nexit 3')

    with pytest.raises(DeployError) as raised:
        cdk_command(app)

    message = str(raised.value)
    assert message.startswith(f"cannot tell the version of the CDK CLI {cdk} (`--version`: exit 3, ")
    assert "cannot find module" in message
    assert message.endswith(f"run `{_install_line()}` in {app}")


def test_fails_when_version_hangs(app: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deploy, "CLI_VERSION_TIMEOUT_SECONDS", 0.5)
    _fake_cli(app, "exec /bin/sleep 30")  # exec: the timeout kills the sleep itself

    with pytest.raises(DeployError, match=r"did not answer `--version` within 0\.5s"):
        cdk_command(app)


def test_chaos_command_reports_the_refusal_as_a_usage_error(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from effectively_once_local.cli import main as cli

    (app / "cdk.json").write_text('{"app": "python3 app.py"}', encoding="utf-8")
    _fake_cli(app, 'echo "3.0.0 (build abc)"')
    argv = ["chaos", "--app-dir", str(app), "--stack", "S", "--input", str(app / "in.jsonl"), "--key", "order_id"]

    with pytest.raises(SystemExit) as exited:
        cli.main(argv)

    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: argument --app-dir: the CDK CLI ")
    assert "is version 3.0.0;" in line and f"`{_install_line()}`" in line
