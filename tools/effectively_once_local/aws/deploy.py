"""Deploy the CDK app with the real CDK CLI into the local AWS (``aws/discovery.py`` reads back what was deployed)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..base.tool_limits import CDK_CLI_MIN_VERSION, CDK_CLI_VERSION
from .server import ACCOUNT, REGION, aws_env


class DeployError(RuntimeError):
    """``cdk synth``, ``cdk bootstrap`` or ``cdk deploy`` failed (the message is one line, with the end of the app's
    traceback when it raised, :func:`traceback_tail`; the full output is in the log), a stack is not in the app,
    what a run is to drive is missing from the synthesized template, or the app's CDK CLI is missing or too old
    (:func:`cdk_command`)."""


#: What the error messages tell a user to run in the app's folder: the CLI release this tooling is tested with
#: (``tool_limits.CDK_CLI_VERSION``), into the folder's own ``node_modules``, without writing a package.json.
CDK_INSTALL_LINE = f"npm install --no-save aws-cdk@{CDK_CLI_VERSION}"
#: Seconds ``cdk --version`` may take: under 1 s on these machines; a first run after an install is slower.
CLI_VERSION_TIMEOUT_SECONDS = 60
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
#: The version each CLI path printed: ``--version`` starts a Node process (about 1 s), so once per process is enough.
_cli_versions: dict[str, str] = {}


#: How a child killed by Ctrl-C (SIGINT) or SIGTERM ends (``returncode``): the run is interrupted, not failed.
INTERRUPTED = frozenset({-signal.SIGINT, -signal.SIGTERM})


def stop_if_interrupted(returncode: int) -> None:
    """Raise ``KeyboardInterrupt`` when a child was killed by an interrupt (:data:`INTERRUPTED`), so that the
    command ends as interrupted (exit 130, ``cli/main.py``), not as a failed deploy or a usage error. Ctrl-C reaches
    the whole process group: the CDK CLI dies of it while this process may not see it at all (one started with SIGINT
    ignored, as a background job of a non-interactive shell is, never raises ``KeyboardInterrupt`` itself).

    :raises KeyboardInterrupt: ``returncode`` is a death by SIGINT or SIGTERM.
    """
    if returncode in INTERRUPTED:
        raise KeyboardInterrupt


def _version(text: str) -> tuple[int, int, int] | None:
    found = _VERSION.search(text)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def cli_version(cli: str, app_dir: Path) -> str:
    """The first ``X.Y.Z`` that ``cli --version`` prints (``2.1148.1 (build fcf5e34)``), run once per CLI path.

    :raises DeployError: the command cannot run, fails, takes over :data:`CLI_VERSION_TIMEOUT_SECONDS` or prints no
        version; the message ends with the install line for ``app_dir``.
    :raises KeyboardInterrupt: the command was killed by Ctrl-C or SIGTERM (:func:`stop_if_interrupted`).
    """
    if cli in _cli_versions:
        return _cli_versions[cli]
    fix = f"run `{CDK_INSTALL_LINE}` in {app_dir}"
    env = {**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    try:
        done = subprocess.run(
            [cli, "--version"],
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=CLI_VERSION_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DeployError(
            f"the CDK CLI {cli} did not answer `--version` within {CLI_VERSION_TIMEOUT_SECONDS}s: {fix}"
        ) from None
    except OSError as exc:
        raise DeployError(f"the CDK CLI {cli} cannot run ({exc.strerror or exc}): {fix}") from None
    stop_if_interrupted(done.returncode)
    output = " ".join(f"{done.stdout} {done.stderr}".split())
    found = _VERSION.search(done.stdout) if done.returncode == 0 else None
    if found is None:
        said = f"exit {done.returncode}, {output[:200]!r}" if output else f"exit {done.returncode}, no output"
        raise DeployError(f"cannot tell the version of the CDK CLI {cli} (`--version`: {said}): {fix}")
    _cli_versions[cli] = found[0]
    return found[0]


def cdk_command(app_dir: Path) -> list[str]:
    """The CDK CLI of the app's project: ``node_modules/.bin/cdk`` in ``app_dir`` or a folder above it (an app in
    a subfolder of its repository, like ``examples/orders``), else ``cdk`` on the PATH; checked with its
    ``--version`` (:func:`cli_version`) before it is used.

    The oldest CLI it accepts is ``tool_limits.CDK_CLI_MIN_VERSION`` (2.1148.0), from the CLI's own refusal of an older
    one ("Cloud assembly schema version mismatch ... need at least CLI version 2.1148.0"): an older 2.x, and any
    other major version, since the deprecated ``aws-cdk@3.0.0`` on npm is an old build, not a newer CLI.

    :raises DeployError: no CLI is found; or the one found is older than the minimum or not 2.x; or its
        ``--version`` cannot run, fails, times out or prints no version. One line; it tells the user to run
        :data:`CDK_INSTALL_LINE` in ``app_dir`` (the CLI this tooling is tested with, ``tool_limits.CDK_CLI_VERSION``).
    :raises KeyboardInterrupt: its ``--version`` was killed by Ctrl-C or SIGTERM (:func:`cli_version`).
    """
    cli = None
    command: list[str] = []
    for folder in (app_dir, *app_dir.resolve().parents):
        local = folder / "node_modules" / ".bin" / "cdk"
        if local.exists():
            cli, command = str(local), [str(local)]
            break
    else:
        cli = shutil.which("cdk")
        command = ["cdk"]
    if cli is None:
        raise DeployError(
            f"the CDK CLI is not installed in {app_dir}/node_modules, a folder above it or on the PATH: "
            f"run `{CDK_INSTALL_LINE}` in {app_dir}"
        )
    found = cli_version(cli, app_dir)
    version = _version(found)
    minimum = _version(CDK_CLI_MIN_VERSION)
    assert version is not None and minimum is not None  # both match _VERSION: cli_version returned a match
    if version[0] != minimum[0] or version < minimum:
        raise DeployError(
            f"the CDK CLI {cli} is version {found}; this tooling needs a {minimum[0]}.x CLI from "
            f"{CDK_CLI_MIN_VERSION} on (an older build, the deprecated aws-cdk@3.0.0 among them, fails with "
            f'"Cloud assembly schema version mismatch"): run `{CDK_INSTALL_LINE}` in {app_dir}'
        )
    return command


#: The line a Python traceback starts with; a ``SyntaxError`` of the script itself is printed without it.
_TRACEBACK = "Traceback (most recent call last):"
#: A traceback's frame line: ``  File "/app/app.py", line 5, in build`` (a ``SyntaxError``'s without ``, in``).
_FRAME = re.compile(r'\s+File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<name>.+))?')
#: The CDK CLI's own line after the app's output: ``python3 app.py: Subprocess exited with error 1`` (the command
#: before it may be left out).
_APP_EXITED = re.compile(r"(?:.+: )?Subprocess exited with error -?\d+")
#: The exception's lines kept: a failed CDK validation lists its errors on the lines under the first.
EXCEPTION_LINES = 3
_LIBRARY_FOLDERS = frozenset({"site-packages", "dist-packages"})


def _file(path: str, app_dir: Path) -> tuple[Path, bool]:
    """A traceback's file, absolute, and whether it is the app's: in ``app_dir`` and not an installed package's."""
    found = Path(path) if Path(path).is_absolute() else app_dir / path
    if _LIBRARY_FOLDERS & set(found.parts):
        return found, False
    return found, found.resolve().is_relative_to(app_dir.resolve())


def _frame(lines: list[str], at: int, found: re.Match[str], app_dir: Path) -> str:
    """The frame ``found`` at ``lines[at]`` in one line: its file (from the working folder when under it), line,
    function and the source line Python printed under it (not its ``^^^`` marks)."""
    path = _file(found["path"], app_dir)[0].resolve()
    here = Path.cwd().resolve()
    shown = path.relative_to(here) if path.is_relative_to(here) else path
    said = f'File "{shown}", line {found["line"]}' + (f", in {found['name']}" if found["name"] else "")
    below = lines[at + 1] if at + 1 < len(lines) else ""
    code = below.strip() if below[:1].isspace() and not _FRAME.fullmatch(below.rstrip()) else ""
    return f"{said}: {code[:150]}" if code.strip("^~ ") else said


def traceback_tail(output: str, app_dir: Path) -> str | None:
    """The end of the last Python traceback in a command's ``output``, in one line: the last frame in the app
    (``app_dir``'s files, not an installed package's: a construct's error is raised deep in jsii, under the app's
    line), else the last frame; then the exception, at most :data:`EXCEPTION_LINES` lines of it. ``None``: no
    traceback."""
    lines = output.splitlines()
    starts = [at for at, line in enumerate(lines) if line.strip() == _TRACEBACK]
    frames = [
        (at, found)
        for at in range(starts[-1] if starts else 0, len(lines))
        if (found := _FRAME.fullmatch(lines[at].rstrip())) is not None
    ]
    if not frames:
        return None
    in_app = [(at, found) for at, found in frames if _file(found["path"], app_dir)[1]]
    exception: list[str] = []
    for line in lines[frames[-1][0] + 1 :]:
        if not exception and line[:1].isspace():
            continue  # the last frame's source line and marks
        if not line.strip() or _APP_EXITED.fullmatch(line.strip()) or len(exception) == EXCEPTION_LINES:
            break
        exception.append(line.strip())
    frame = _frame(lines, *(in_app or frames)[-1], app_dir)
    return f"{frame} — {' '.join(exception)[:300]}" if exception else frame


def _failure(what: str, returncode: int, output: str, app_dir: Path, log_path: Path) -> DeployError:
    """A failed command's error: the CLI's last ``❌``/``‣`` line (else its last line) and, when the app itself
    exited with an error (:data:`_APP_EXITED`), the end of its traceback (:func:`traceback_tail`: a traceback the app
    printed and went on from is not the failure's), from ``output``: that command's own, not the log's earlier
    runs."""
    lines = output.splitlines()
    reason = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith(("❌", "‣"))), "")
    reason = reason or next((ln.strip() for ln in reversed(lines) if ln.strip()), "no output")
    exited = any(_APP_EXITED.fullmatch(ln.strip()) for ln in lines)
    tail = traceback_tail(output, app_dir) if exited else None
    said = f"{reason[:300]} — {tail}" if tail else reason[:300]
    return DeployError(f"{what} failed (exit {returncode}): {said} — full output in {log_path}")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path, what: str) -> None:
    with open(log_path, "ab") as log:
        log.write(f"\n$ {' '.join(cmd)}\n".encode())
        log.flush()
        start = log.tell()
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    stop_if_interrupted(proc.returncode)
    if proc.returncode != 0:
        with open(log_path, "rb") as log:
            log.seek(start)
            output = log.read().decode("utf-8", errors="replace")
        raise _failure(what, proc.returncode, output, cwd, log_path)


def deploy(
    endpoint: str,
    app_dir: Path,
    stack: str | Sequence[str],
    context: dict[str, str],
    log_path: Path,
    check: Callable[[Path], None] | None = None,
) -> None:
    """``cdk synth`` of the app with ``-c key=value`` context values into ``cdk.out`` beside ``log_path``, then
    ``cdk bootstrap`` and ``cdk deploy STACK...`` of that cloud assembly (``--app cdk.out``: one synth for all the
    stacks, and the deploy is of the templates checked) against ``endpoint``.

    :param check: called with the ``cdk.out`` folder after the synth, before anything is deployed: what it raises
        stops the deploy. :default: ``None``.
    :raises DeployError: a command failed (the message names the app's line and its exception when the app raised),
        or a stack is not in the app (the message names the app's stacks).
    :raises KeyboardInterrupt: a command was killed by Ctrl-C or SIGTERM (:func:`stop_if_interrupted`).
    """
    stacks = [stack] if isinstance(stack, str) else list(stack)
    env = {**os.environ, **aws_env(endpoint), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    # cdk.json runs `python3 app.py`: use this interpreter's environment (the project's .venv).
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cdk = cdk_command(app_dir)
    ctx = [arg for key, value in context.items() for arg in ("-c", f"{key}={value}")]
    # Synthesize into the run's own folder: the app's cdk.out stays free for a `cdk synth` at the same time. The CLI
    # runs in app_dir and reads a relative --output from there: pass it absolute, where the caller looks for it.
    out = (log_path.parent / "cdk.out").resolve()
    _run([*cdk, "synth", "--quiet", *ctx, "--output", str(out)], app_dir, env, log_path, "cdk synth")
    missing = [name for name in stacks if not (out / f"{name}.template.json").is_file()]
    if missing:
        found = sorted(p.name.removesuffix(".template.json") for p in out.glob("*.template.json"))
        raise DeployError(
            f"stack {', '.join(missing)} is not in the app in {app_dir}: its stacks are {', '.join(found) or 'none'}"
        )
    if check is not None:
        check(out)
    app = ["--app", str(out)]
    _run([*cdk, "bootstrap", f"aws://{ACCOUNT}/{REGION}", *app], app_dir, env, log_path, "cdk bootstrap")
    _run(
        [*cdk, "deploy", *stacks, *app, "--require-approval", "never", "--progress", "events"],
        app_dir,
        env,
        log_path,
        f"cdk deploy {' '.join(stacks)}",
    )


def aws_session() -> Any:
    """A boto3 session on the standard credential chain, for the commands that run against a real account. The
    region comes from ``AWS_DEFAULT_REGION``, else ``AWS_REGION`` (what the CDK CLI also reads; botocore alone
    reads only the first), else the profile."""
    import boto3

    region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or None
    return boto3.session.Session(region_name=region)
