"""What a failed CDK CLI command says (``effectively_once_local.aws.deploy.deploy``, issue 57 item 3): one line with
the CLI's own last line and, when the app raised, the end of its Python traceback (the app's line and the exception),
read from that command's output only, never from an earlier run's in the same ``cdk.log``. And a CDK CLI command
killed by Ctrl-C (SIGINT) or SIGTERM, ``--version`` included, is an interrupt, not a failure (issue 57 item 5): it
raises ``KeyboardInterrupt``, and the command exits 130 (``cli/main.py``), even when this process did not get the
signal itself (started with SIGINT ignored, as a background job of a non-interactive shell is).

The CLI is a fake in the app's ``node_modules/.bin/cdk`` (a Python script) answering ``--version`` as the real one
does and printing, for each command, what the real CLI (2.1148.1, ``synth --quiet``) printed for these apps: a
``ValueError`` raised in a function of ``app.py``; a construct error raised inside jsii (the library's frames come
after the app's, the JavaScript stack before); a failed validation (its errors on the lines under the exception);
a ``SyntaxError`` in ``app.py`` (no ``Traceback`` line).
"""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import pytest

from effectively_once_local.aws.deploy import DeployError, cdk_command, deploy
from effectively_once_local.cli import main as cli
from effectively_once_local.engine import pipeline

ENDPOINT = "http://localhost:1"  # never reached: every run here fails before the deploy, or fakes it
EXITED = "python3 app.py: Subprocess exited with error 1"

#: ``raise ValueError`` in ``build()``, called from ``app.py``'s line 8.
RAISED = """\
Traceback (most recent call last):
  File "{app}/app.py", line 8, in <module>
    build(app)
  File "{app}/app.py", line 5, in build
    raise ValueError("the table name is missing")
ValueError: the table name is missing
python3 app.py: Subprocess exited with error 1
"""

#: Two ``sqs.Queue(stack, "Q")``: the error is raised by jsii under the app's line 7.
JSII = """\
jsii.errors.JavaScriptError:
  Error: There is already a Construct with name 'Q' in Stack2 [S]
      at Node.addChild (/tmp/jsii-kernel-fJriWJ/node_modules/constructs/lib/construct.js:466:19)
      at Kernel.create (/tmp/tmpr9uajvt_/lib/program.js:1:53537)

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "{app}/app.py", line 7, in <module>
    sqs.Queue(stack, "Q")
  File "{venv}/site-packages/jsii/_runtime.py", line 135, in __call__
    inst = super(JSIIMeta, cast(JSIIMeta, cls)).__call__(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{venv}/site-packages/jsii/_kernel/providers/process.py", line 359, in send
    raise RuntimeError(resp.error) from JavaScriptError(resp.stack)
RuntimeError: There is already a Construct with name 'Q' in Stack2 [S]
python3 app.py: Subprocess exited with error 1
"""

#: ``stack.node.add_validation`` of a check returning two errors, at ``app.synth()`` (line 15).
VALIDATION = """\
Traceback (most recent call last):
  File "{app}/app.py", line 15, in <module>
    app.synth()
  File "{venv}/site-packages/aws_cdk/__init__.py", line 33741, in synth
    return typing.cast("_cx_api_57db5121.CloudAssembly", jsii.invoke(self, "synth", [options]))
                                                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{venv}/site-packages/jsii/_kernel/providers/process.py", line 359, in send
    raise RuntimeError(resp.error) from JavaScriptError(resp.stack)
RuntimeError: ValidationFailedWithErrors: Validation failed with the following errors:
  [S] the queue needs a DLQ
  [S] and a second thing
  [S] and a third
python3 app.py: Subprocess exited with error 1
"""

#: ``app = cdk.App(`` never closed, on line 3.
SYNTAX = """\
  File "{app}/app.py", line 3
    app = cdk.App(
                 ^
SyntaxError: '(' was never closed
python3 app.py: Subprocess exited with error 1
"""

FAKE_CLI = """\
#!{python}
import os, pathlib, signal, sys

said = pathlib.Path({said!r})
command = sys.argv[1]
if command == "--version" and not (said / "--version.rc").exists():
    print("2.1148.1 (build x)")
    sys.exit(0)
if command == "synth":
    out = pathlib.Path(sys.argv[sys.argv.index("--output") + 1])
    out.mkdir(parents=True, exist_ok=True)
    (out / "S.template.json").write_text("{{}}")
if (said / f"{{command}}.out").exists():
    sys.stdout.write((said / f"{{command}}.out").read_text())
    sys.stdout.flush()
code = (said / f"{{command}}.rc").read_text() if (said / f"{{command}}.rc").exists() else "0"
if code.startswith("SIG"):  # killed by it (Ctrl-C's SIGINT), whatever disposition the test run inherited
    signal.signal(getattr(signal, code), signal.SIG_DFL)
    os.kill(os.getpid(), getattr(signal, code))
sys.exit(int(code))
"""


def fake_cli(app: Path, said: dict[str, tuple[str, str]]) -> Path:
    """``app/node_modules/.bin/cdk``: prints ``said[command][0]`` for a command and exits with ``said[command][1]``
    (a number, or a signal's name, ``SIGINT``: killed by it); a command not in ``said`` prints nothing and exits 0,
    ``--version`` printing the pinned version. Its ``synth`` writes a template of stack ``S`` into ``--output``."""
    folder = app / "said"
    folder.mkdir(parents=True, exist_ok=True)
    for command, (text, code) in said.items():
        (folder / f"{command}.out").write_text(text, encoding="utf-8")
        (folder / f"{command}.rc").write_text(code, encoding="utf-8")
    cdk = app / "node_modules" / ".bin" / "cdk"
    cdk.parent.mkdir(parents=True, exist_ok=True)
    cdk.write_text(FAKE_CLI.format(python=sys.executable, said=str(folder)), encoding="utf-8")
    cdk.chmod(cdk.stat().st_mode | stat.S_IXUSR)
    return cdk


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path/app``, run from ``tmp_path`` (the error names the app's files from the working folder)."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "app"
    folder.mkdir()
    return folder


def _synth_error(app: Path, printed: str) -> str:
    """The message of the ``DeployError`` a synth printing ``printed`` (``{app}``, ``{venv}`` filled) and exiting 1
    ends in."""
    venv = "/home/u/.venv/lib/python3.11"
    fake_cli(app, {"synth": (printed.format(app=app, venv=venv), "1")})
    with pytest.raises(DeployError) as raised:
        deploy(ENDPOINT, app, "S", {}, app / "run" / "cdk.log")
    message = str(raised.value)
    assert "\n" not in message
    assert message.endswith(f" — full output in {app / 'run' / 'cdk.log'}")
    return message


def test_a_synth_failure_names_the_apps_line_and_the_exception(app: Path) -> None:
    message = _synth_error(app, RAISED)

    assert message == (
        f"cdk synth failed (exit 1): {EXITED} — "
        'File "app/app.py", line 5, in build: raise ValueError("the table name is missing") — '
        f"ValueError: the table name is missing — full output in {app / 'run' / 'cdk.log'}"
    )


def test_the_apps_line_is_its_last_frame_in_the_app_not_the_librarys(app: Path) -> None:
    message = _synth_error(app, JSII)

    assert f'{EXITED} — File "app/app.py", line 7, in <module>: sqs.Queue(stack, "Q") — ' in message
    assert "RuntimeError: There is already a Construct with name 'Q' in Stack2 [S] — full output" in message
    assert "site-packages" not in message and "jsii-kernel" not in message and "^^^" not in message


def test_an_exception_on_several_lines_keeps_its_first_three(app: Path) -> None:
    message = _synth_error(app, VALIDATION)

    assert 'File "app/app.py", line 15, in <module>: app.synth() — ' in message
    assert (
        "RuntimeError: ValidationFailedWithErrors: Validation failed with the following errors: "
        "[S] the queue needs a DLQ [S] and a second thing — full output" in message
    )
    assert "a third" not in message


def test_a_syntax_error_names_its_line(app: Path) -> None:
    message = _synth_error(app, SYNTAX)

    assert f"{EXITED} — File \"app/app.py\", line 3: app = cdk.App( — SyntaxError: '(' was never closed" in message


def test_a_file_outside_the_working_folder_is_named_by_its_path(app: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = app.parent / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    message = _synth_error(app, RAISED)

    assert f'File "{app}/app.py", line 5, in build: raise ValueError' in message


def test_a_failure_without_a_traceback_is_said_as_before(app: Path) -> None:
    message = _synth_error(app, "Error: cannot find the app\n")

    assert (
        message == f"cdk synth failed (exit 1): Error: cannot find the app — full output in {app / 'run' / 'cdk.log'}"
    )


def test_a_traceback_the_app_printed_and_went_on_from_is_not_the_failures(app: Path) -> None:
    handled = RAISED.format(app=app, venv="/v").replace(EXITED, "").rstrip("\n")

    message = _synth_error(app, f"{handled}\nfalling back\nError: cannot find the app\n")

    assert message.startswith("cdk synth failed (exit 1): Error: cannot find the app — full output in ")


def test_a_bare_subprocess_exit_line_is_not_read_as_the_exceptions(app: Path) -> None:
    message = _synth_error(app, RAISED.replace(EXITED, "Subprocess exited with error 1"))

    assert message.startswith("cdk synth failed (exit 1): Subprocess exited with error 1 — File ")
    assert "ValueError: the table name is missing — full output in " in message


def test_an_earlier_runs_output_in_the_log_is_not_this_failures(app: Path) -> None:
    log = app / "run" / "cdk.log"
    log.parent.mkdir()
    earlier = RAISED.format(app=app, venv="/v") + "❌ an earlier run's failure\n"
    log.write_text(f"\n$ cdk synth\n{earlier}", encoding="utf-8")

    message = _synth_error(app, "Error: cannot find the app\n")

    assert message.startswith("cdk synth failed (exit 1): Error: cannot find the app — full output in ")
    assert log.read_text(encoding="utf-8").startswith(f"\n$ cdk synth\n{earlier}"), "the log keeps what it held"


def test_a_deploy_failure_says_its_own_reason_not_the_synths_output(app: Path) -> None:
    fake_cli(
        app,
        {
            "synth": (RAISED.format(app=app, venv="/v").replace(EXITED, "(printed, yet the synth passed)"), "0"),
            "deploy": ("S: deploying...\n❌  S failed: ValidationError: Template error\nmore\n", "1"),
        },
    )

    with pytest.raises(DeployError) as raised:
        deploy(ENDPOINT, app, "S", {}, app / "run" / "cdk.log")

    assert str(raised.value) == (
        "cdk deploy S failed (exit 1): ❌  S failed: ValidationError: Template error — full output in "
        f"{app / 'run' / 'cdk.log'}"
    )


#: What ``python3 app.py`` printed when Ctrl-C reached it during the synth (the CLI then died of the same SIGINT).
APP_INTERRUPTED = """\
Traceback (most recent call last):
  File "{app}/app.py", line 3, in <module>
    import aws_cdk as cdk
KeyboardInterrupt
"""


@pytest.mark.parametrize("command", ["synth", "bootstrap", "deploy"])
@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_a_cdk_command_killed_by_an_interrupt_is_an_interrupt(app: Path, command: str, signal_name: str) -> None:
    fake_cli(app, {command: (APP_INTERRUPTED.format(app=app), signal_name)})

    with pytest.raises(KeyboardInterrupt):
        deploy(ENDPOINT, app, "S", {}, app / "run" / "cdk.log")


def test_a_cdk_command_that_exits_130_is_still_a_failure(app: Path) -> None:
    # Only a death by the signal itself is an interrupt: an exit code is the command's own verdict.
    fake_cli(app, {"synth": ("Error: stopped\n", "130")})

    with pytest.raises(DeployError, match=r"\Acdk synth failed \(exit 130\): Error: stopped — "):
        deploy(ENDPOINT, app, "S", {}, app / "run" / "cdk.log")


def test_a_version_check_killed_by_ctrl_c_is_an_interrupt(app: Path) -> None:
    fake_cli(app, {"--version": ("", "SIGINT")})

    with pytest.raises(KeyboardInterrupt):
        cdk_command(app)


def _chaos(app: Path) -> list[str]:
    """The chaos command's arguments for stack ``S`` of ``app``, one input line; its report and logs under ``app``."""
    (app / "cdk.json").write_text('{"app": "python3 app.py"}', encoding="utf-8")
    (app / "in.jsonl").write_text('{"order_id": "o-1"}\n', encoding="utf-8")
    return [
        "chaos", "--app-dir", str(app), "--stack", "S", "--input", str(app / "in.jsonl"), "--key", "order_id",
        "--report", str(app / "report.json"), "--run-dir", str(app / "run"), "--quiet",
    ]  # fmt: skip


def _exit_code(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except KeyboardInterrupt:
        pytest.fail("the interrupt left the command as a traceback, not exit 130")


def test_ctrl_c_during_the_version_check_exits_130(app: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _chaos(app)
    fake_cli(app, {"--version": ("", "SIGINT")})

    assert _exit_code(argv) == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted"]


def test_ctrl_c_caught_by_this_process_during_the_version_check_exits_130(
    app: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = _chaos(app)
    fake_cli(app, {})

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess, "run", interrupted)  # as the CLI's `--version` runs

    assert _exit_code(argv) == 130
    assert capsys.readouterr().err.splitlines() == ["interrupted"]


class _LocalAws:
    """Stands in for ``MotoServer`` in ``pipeline``: nothing is deployed here, the synth is interrupted first."""

    stopped: list[bool] = []

    def __init__(self, log_path: Path) -> None:
        self.endpoint = ENDPOINT

    def __enter__(self) -> _LocalAws:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stopped.append(True)


@pytest.fixture
def local_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """The local AWS of a run replaced by :class:`_LocalAws`; yields whether it was stopped."""
    monkeypatch.setattr(pipeline, "MotoServer", _LocalAws)
    _LocalAws.stopped = []
    yield _LocalAws.stopped


def test_ctrl_c_during_the_first_synth_exits_130(
    app: Path, local_aws: list[bool], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _chaos(app)
    fake_cli(app, {"synth": (APP_INTERRUPTED.format(app=app), "SIGINT")})

    assert _exit_code(argv) == 130
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "interrupted: local AWS stopped", err
    assert "failed" not in err and "error" not in err
    assert local_aws == [True]
