"""What the subcommands' parsers share (``cli/*_command.py``): the parser class (one-line usage errors, every default
shown), the argument types (each raises ``ArgumentTypeError``, which argparse reports naming the argument), the run
outputs two subcommands share, and the checks across arguments that more than one subcommand makes,
still before anything starts."""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ..aws.deploy import DeployError, cdk_command
from ..base.tool_limits import CFN_STACK_NAME_PATTERN
from ..payments.payments_input import PaymentsFileError, load_payments
from ..runner.mapping_runner import packaged_lambda_src

_ROLE = re.compile(r":(?:py:)?[a-z]+:`(?P<tilde>~?)(?P<text>[^`]+)`")
_CODE = re.compile(r"``(?P<double>[^`]+)``|`(?P<single>[^`]+)`")


def plain(text: str) -> str:
    """``text`` (a docstring, a help string) as a terminal shows it, without reST markup: a role's target alone
    (``:class:`X``` is X, ``:class:`~a.X``` too), a code span's text alone, or in single quotes when it holds a
    space (a command: ``cdk deploy`` is 'cdk deploy'); ``:default:`` is "default:"."""
    text = _ROLE.sub(_role_text, text).replace(":default:", "default:")
    return _CODE.sub(lambda match: _unquoted(match["double"] or match["single"]), text)


def _role_text(match: re.Match[str]) -> str:
    return match["text"].rsplit(".", 1)[-1] if match["tilde"] else match["text"]


def _unquoted(code: str) -> str:
    return f"'{code}'" if any(char.isspace() for char in code) else code


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (``(default: %(default)s)``), unless the help already says it
    (``default:``), the default is ``None`` (the help says what happens) or the option is a flag. Descriptions and
    helps are shown :func:`plain` (the top-level description is the CLI module's docstring)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default:" in text or action.default in (None, argparse.SUPPRESS) or action.nargs == 0:
            return text
        return f"{text} (default: %(default)s)"

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))


class Given(argparse.Action):
    """Stores the value like ``store`` and remembers that the option was given (``args.given``), for the checks of
    options another option makes pointless (``--no-chaos``, ``--unsafe``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, *_: Any) -> None:
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


class Parser(argparse.ArgumentParser):
    """Usage errors as one line (``error: argument --x: ...``) and exit code 2, like every other expected error.
    Every option's help shows its default (:class:`HelpFormatter`), subcommands' too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {one_line(message)} (see {self.prog} --help)\n")


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def add_run_outputs(
    parser: argparse.ArgumentParser, *, report: str, run_dir: str, drain_timeout: int | None = 600
) -> None:
    """The options a deploy-and-run command (demo, chaos) shares: where its report and run folder go, how long it
    waits for the queues to drain, progress bars."""
    parser.add_argument(
        "--report",
        type=output_file,
        default=report,
        help="the JSON report, its HTML page beside it (.html) (default: %(default)s)",
    )
    parser.add_argument(
        "--run-dir",
        type=output_folder,
        default=run_dir,
        help="the run's logs and its cdk.out (default: %(default)s; emptied of a previous run's logs)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=integer(1),
        default=drain_timeout,
        help="seconds to wait for the queues to drain; past it the run exits 4 naming what is left where (default: "
        + (
            f"{drain_timeout}"
            if drain_timeout is not None
            else "the stack's: max(600, the longest (maxReceiveCount + 1) x visibility timeout of its queues + 60 +"
            " 0.2 a message)"
        )
        + ")",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def handler_root_help(base: str) -> str:
    return f"folder holding the handler package (default: lambda_src in {base} if there, else the package's own)"


def default_handler_root(app_dir: Path) -> Path:
    repo = app_dir / "lambda_src"
    if repo.is_dir():
        return repo
    return packaged_lambda_src()


# --- argument types: each raises ArgumentTypeError, which argparse reports naming the argument -----------


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, got {text!r}")
    return value


def integer(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"{low} or more" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {value}")
        return value

    return parse


def effect(text: str) -> Any:
    from ..proof.stores import parse_effect

    try:
        return parse_effect(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def stack_name(text: str) -> str:
    if not re.fullmatch(CFN_STACK_NAME_PATTERN, text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a CloudFormation stack name (a letter, then letters, digits and hyphens, at most 128)"
        )
    return text


def folder(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a folder" if path.exists() else f"{text} does not exist")
    return path


def _writable_ancestor(path: Path, text: str) -> None:
    """The nearest existing folder above ``path`` must be a folder we can create entries in."""
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {ancestor} is not writable")


def output_file(text: str) -> Path:
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file path")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} is not writable")
    _writable_ancestor(path, text)
    return path


def output_folder(text: str) -> Path:
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} is not writable")
    if not path.exists():
        _writable_ancestor(path, text)
    return path


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"must be key=value, got {text!r}")
    return key, value


# --- checks that need more than one argument, still before anything starts ----------------------------


def check_handler_root(parser: Parser, root: Path, modules: tuple[str, ...]) -> Callable[[str], bool]:
    from ..payments.payments_view import validity_check

    if not root.is_dir():
        parser.error(f"argument --handler-root: {root} is not a folder (give the folder holding the payments package)")
    missing = [m for m in modules if not (root / "payments" / f"{m}.py").is_file()]
    if missing:
        parser.error(
            f"argument --handler-root: {root} holds no handler package (missing "
            + ", ".join(f"payments/{m}.py" for m in missing)
            + ")"
        )
    try:
        return validity_check(root)
    except Exception as exc:  # noqa: BLE001 - any import failure of the user's package is a usage error
        parser.error(f"argument --handler-root: cannot import payments.model from {root}: {type(exc).__name__}: {exc}")


def check_payments(parser: Parser, path: Path, is_valid: Callable[[str], bool]) -> None:
    try:
        lines = load_payments(path)
    except PaymentsFileError as exc:
        parser.error(f"argument --payments: {exc}")
    if not any(ln.payment_id and is_valid(ln.body) for ln in lines):
        parser.error(
            f"argument --payments: {path}: none of its {len(lines)} lines is a valid payment by the handler's rules"
            " (payments.model); nothing was sent"
        )


def check_app_dir(parser: Parser, app_dir: Path) -> None:
    """``--app-dir`` holds a CDK app (its ``cdk.json``) whose CDK CLI can be found (``deploy.cdk_command``)."""
    if not (app_dir / "cdk.json").is_file():
        parser.error(f"argument --app-dir: {app_dir} has no cdk.json")
    try:
        cdk_command(app_dir.resolve())
    except DeployError as exc:
        parser.error(f"argument --app-dir: {exc}")


def check_payments_run(parser: Parser, args: argparse.Namespace, root: Path, modules: tuple[str, ...]) -> None:
    """A payments subcommand's (``demo``, ``produce``, ``report``) handler root and payments file: ``root`` must
    hold the handler package's ``modules``, the payments file at least one valid payment by its rules, and a
    report must not overwrite the payments file. Sets ``args.handler_root`` to ``root``, resolved."""
    if args.command != "produce" and args.report.resolve() == args.payments.resolve():
        parser.error(f"argument --report: {args.report} is the payments file; the report would overwrite it")
    args.handler_root = root.resolve()
    check_payments(parser, args.payments, check_handler_root(parser, args.handler_root, modules))
