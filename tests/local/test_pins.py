"""The ``[local]`` extra pins the moto and Powertools releases the patches and the runtime are tested on, and the
local AWS refuses any other moto at start, in one line naming both versions."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib.metadata import version

import pytest

from effectively_once_local.aws import moto_patches as _moto_server
from effectively_once_local.aws.server import LocalAwsError, MotoServer

from .conftest import REPO


def _pins(path: str) -> dict[str, str]:
    lines = (REPO / path).read_text(encoding="utf-8").splitlines()
    return dict(m.groups() for line in lines if (m := re.fullmatch(r"([A-Za-z0-9_.\[\]-]+)==(\S+)", line.strip())))


def _local_extra() -> dict[str, str]:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    return dict(pin.split("==") for pin in extra["local"] if "==" in pin)


def test_the_local_extra_pins_moto_and_powertools_as_the_requirements_do() -> None:
    extra = _local_extra()

    assert extra == {
        "moto[server]": _moto_server.REQUIRED_MOTO_VERSION,
        "aws-lambda-powertools": _pins("requirements.txt")["aws-lambda-powertools"],
    }
    assert _pins("requirements-dev.txt")["moto[server]"] == _moto_server.REQUIRED_MOTO_VERSION
    assert version("moto") == _moto_server.REQUIRED_MOTO_VERSION, "the tests run on the required release"


def test_the_librarys_own_dependencies_keep_their_ranges() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]

    assert not [d for d in project["dependencies"] if "==" in d]


def test_the_required_moto_passes() -> None:
    _moto_server.check_moto_version()


def test_fails_on_another_moto_naming_both_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_moto_server, "version", lambda name: "5.3.0" if name == "moto" else version(name))
    started: list[object] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))

    with pytest.raises(LocalAwsError) as raised:
        MotoServer(port=1).start()

    message = str(raised.value)
    assert message == (
        "the local AWS needs moto 5.2.5 (its patches are tested on that release only), found moto 5.3.0: "
        'pip install "effectively-once[local]"'
    )
    assert "\n" not in message
    assert started == [], "nothing was started"


def test_the_server_module_refuses_another_moto_in_one_line() -> None:
    with pytest.raises(_moto_server.MotoVersionError, match=r"needs moto 5\.2\.5 .* found moto 5\.1\.0"):
        _moto_server.check_moto_version("5.1.0")
