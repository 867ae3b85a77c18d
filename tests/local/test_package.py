"""The tooling is its own package (``effectively_once_local``): it needs the ``[local]`` extra and says so in one
line, it never imports the CDK, and ``effectively_once.local`` is a deprecated alias of it."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

import effectively_once_local
from effectively_once_local import _moved
from effectively_once_local.runner import mapping_runner as esm

from .conftest import REPO, source_env

_ROOT = REPO / "tools" / "effectively_once_local"
#: Every module of the tooling, dotted below the package (``runner.mapping_runner``), folders' ``__init__`` included.
MODULES = sorted(
    ".".join(p.relative_to(_ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in _ROOT.rglob("*.py")
    if p != _ROOT / "__init__.py"
)


def _python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=source_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_importing_every_module_imports_no_aws_cdk() -> None:
    probe = (
        "import importlib, json, sys\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module(f'effectively_once_local.{name}')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'constructs', 'jsii'))))\n"
    )
    done = _python(probe)

    assert done.returncode == 0, done.stderr
    assert len(MODULES) > 15
    assert json.loads(done.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize("missing", ["moto", "aws_lambda_powertools", "matplotlib"])
def test_fails_without_the_local_extra_in_one_line_naming_it(missing: str) -> None:
    done = _python(
        f"import sys\nsys.modules[{missing!r}] = None\nimport effectively_once_local.runner.mapping_runner\n"
    )

    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        'ImportError: effectively_once_local needs the [local] extra: pip install "effectively-once[local]" '
        f"(missing: {missing})"
    )


def test_the_command_line_without_the_extra_names_it() -> None:
    done = _python("import sys, runpy\nsys.modules['moto'] = None\nrunpy.run_module('effectively_once_local')")

    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].endswith('pip install "effectively-once[local]" (missing: moto)')


def test_the_new_entry_point_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "effectively_once_local", "--help"],
        cwd=REPO,
        env=source_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    assert "python -m effectively_once_local" in done.stdout
    assert done.stderr == ""


def test_the_old_entry_point_runs_the_new_one_with_a_deprecation_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "effectively_once.local", "sample", "--accounts", "0"],
        cwd=REPO,
        env=source_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 2  # the new entry point's own usage error
    assert "DeprecationWarning: effectively_once.local is deprecated and will be removed in 0.4.0" in done.stderr
    assert "argument --accounts" in done.stderr.strip().splitlines()[-1]


def test_old_imports_give_the_new_modules_with_a_deprecation_warning() -> None:
    sys.modules.pop("effectively_once.local", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from effectively_once.local import report
        from effectively_once.local.esm import MappingConfig

    assert MappingConfig is esm.MappingConfig
    assert report is effectively_once_local.payments.payments_report
    assert [w.category for w in caught if "effectively_once.local is deprecated" in str(w.message)] == [
        DeprecationWarning
    ]


#: The old module paths that are folders now (their old module's names are read from the folder).
_FOLDERS = sorted(old for old in _moved.MOVED if (_ROOT / old).is_dir())


def test_every_old_module_path_gives_the_new_module_with_a_deprecation_warning() -> None:
    # One fresh interpreter for all of them: each old path is imported there for the first time.
    aliases = sorted(set(_moved.MOVED) - set(_FOLDERS))
    done = _python(
        "import importlib, json, sys, warnings\n"
        "import effectively_once_local\n"
        "seen = {}\n"
        "for old in sys.argv[1:]:\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        module = importlib.import_module(f'effectively_once_local.{old}')\n"
        "    seen[old] = [module.__name__, module is importlib.import_module(module.__name__),\n"
        "                 [str(w.message) for w in caught if w.category is DeprecationWarning]]\n"
        "print(json.dumps(seen))\n",
        *aliases,
    )

    assert done.returncode == 0, done.stderr
    assert len(aliases) > 20
    assert json.loads(done.stdout.splitlines()[-1]) == {
        old: [_moved.new_path(old), True, [_moved.message(old)]] for old in aliases
    }


@pytest.mark.parametrize("old", _FOLDERS)
def test_an_old_module_now_a_folder_gives_its_names_with_a_deprecation_warning(old: str) -> None:
    done = _python(
        "import importlib, warnings\n"
        f"new = importlib.import_module({_moved.new_path(old)!r})\n"
        "name = sorted(n for n, v in vars(new).items() if getattr(v, '__module__', None) == new.__name__)[0]\n"
        f"folder = importlib.import_module('effectively_once_local.{old}')\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    same = getattr(folder, name) is getattr(new, name)\n"
        "print(same, [str(w.message) for w in caught if w.category is DeprecationWarning])\n"
        "try:\n"
        "    getattr(folder, 'no_such_name')\n"
        "except AttributeError:\n"
        "    print('AttributeError')\n"
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [f"True {[_moved.message(old)]!r}", "AttributeError"]


@pytest.mark.parametrize("folder", _moved.GONE_FOLDERS)
def test_a_gone_folder_imports_its_old_modules_each_with_its_warning(folder: str) -> None:
    old = sorted(o for o in _moved.MOVED if o.startswith(f"{folder}."))
    done = _python(
        "import importlib, json, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    gone = importlib.import_module('effectively_once_local.{folder}')\n"
        "    quiet = [str(w.message) for w in caught]\n"
        f"    module = getattr(gone, {old[0].split('.')[1]!r})\n"
        "    said = [str(w.message) for w in caught if w.category is DeprecationWarning][len(quiet):]\n"
        "try:\n"
        "    gone.no_such_module\n"
        "except AttributeError as error:\n"
        "    refused = str(error)\n"
        "print(json.dumps([quiet, module.__name__, said, refused]))\n"
    )

    assert done.returncode == 0, done.stderr
    assert old and not list((_ROOT / folder).glob("*.py"))
    assert json.loads(done.stdout.splitlines()[-1]) == [
        [],  # the folder itself: no warning, its modules warn
        _moved.new_path(old[0]),
        [_moved.message(old[0])],
        f"module 'effectively_once_local.{folder}' has no attribute 'no_such_module'",
    ]


def test_the_entry_points_the_docs_name_import_from_the_package() -> None:
    from effectively_once_local import ChaosOptions, ProviderStandIn, run_chaos
    from effectively_once_local.any_stack import chaos_context, chaos_run
    from effectively_once_local.aws.provider_stand_in import ProviderStandIn as stand_in

    assert (run_chaos, ChaosOptions, ProviderStandIn) == (chaos_run.run_chaos, chaos_context.ChaosOptions, stand_in)
    for name, module in effectively_once_local.ENTRY_POINTS.items():
        assert getattr(effectively_once_local, name).__module__ == f"effectively_once_local.{module}"
