"""The command line as a newcomer reads it (issue 34, item 6): help without reST markup, an unknown flag reported with
the subcommand's usage and pointing to its ``--help``, one message per error."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from effectively_once_local.cli.arguments import plain
from effectively_once_local.cli.main import _parser, main

from .conftest import REPO

_MARKUP = re.compile(r"``|:(?:class|func|meth|attr|data|mod|exc|obj|default):")


def _helps() -> dict[str, str]:
    parser, commands = _parser()
    return {"(top)": parser.format_help(), **{name: sub.format_help() for name, sub in commands.items()}}


def test_no_help_text_shows_rest_markup() -> None:
    helps = _helps()

    assert set(helps) == {"(top)", "demo", "chaos", "sample", "produce", "report", "redrive"}
    assert {name: _MARKUP.findall(text) for name, text in helps.items() if _MARKUP.search(text)} == {}
    assert "'python -m effectively_once_local': the local AWS demo" in " ".join(helps["(top)"].split())


def test_plain_drops_the_markup_and_keeps_the_words() -> None:
    text = "``--help`` per :class:`~a.b.Queue`; after `cdk deploy`; :default: ``None`` (``base/exit_codes.py``)"

    assert plain(text) == "--help per Queue; after 'cdk deploy'; default: None (base/exit_codes.py)"
    assert plain("no markup here: 3 `` 4") == "no markup here: 3 `` 4"


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["sample", "--bogus"], "sample"),
        (["redrive", "--stack", "S", "--bogus", "1"], "redrive"),
        (["--bogus", "sample"], "sample"),
    ],
)
def test_an_unknown_flag_points_to_the_subcommands_help(
    argv: list[str], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err

    unknown = " ".join(a for a in argv if a not in (command, "--stack", "S"))
    assert stopped.value.code == 2
    assert err == f"error: unrecognized arguments: {unknown} (see python -m effectively_once_local {command} --help)\n"


def test_a_bad_key_expression_is_one_message_from_the_command_line(tmp_path: object) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "effectively_once_local", "chaos", "--app-dir", str(REPO), "--stack", "S"]
        + ["--input", str(REPO / "samples" / "payments.jsonl"), "--key", "payment_id["],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert proc.returncode == 2
    assert proc.stderr == (
        "error: argument --key: 'payment_id[' is not a JMESPath expression the runtime accepts: it ends early, after "
        "character 11 (see python -m effectively_once_local chaos --help)\n"
    )
