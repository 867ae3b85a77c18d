"""What Lambda would lack (issue 33, item 8): each function asset's imports, resolved before any traffic against
what the function has on Lambda, not against the venv the local run executes it in.

The local run executes every handler in the tooling's own interpreter, with the venv's packages: a handler that
imports psycopg passes here and fails on Lambda with ``No module named 'psycopg'`` when nothing ships it (the
``RuntimeLayer`` ships the runtime alone, the Powertools layer Powertools and what it bundles). The run keeps the
venv (one interpreter runs the tooling and the handler, and the host's Python may differ from the function's
runtime), but first :func:`missing_imports` reads each Python function of the synthesized template and resolves
every module the code it loads imports: the handler's module and, transitively, the asset's modules it imports
(``ast``: ``import x`` and ``from x import y`` anywhere in a module, functions included; not the ones under an ``if``
(``TYPE_CHECKING``, a version test), in a ``try`` that catches ``ImportError`` or in ``with suppress(ImportError)``,
which are optional). Against, in order:

1. the asset itself (the function's code folder is on ``sys.path`` on Lambda): ``x.py``, ``x/``, an extension
   module ``x.*.so``;
2. its layers' assets in ``cdk.out`` (a layer's ``python/`` and ``python/lib/python3.*/site-packages/``);
3. what the Lambda runtime provides: the standard library of the function's Python (the host's
   ``sys.stdlib_module_names`` less the modules removed by that version, :data:`REMOVED_FROM_STDLIB`) and the SDK,
   boto3 and botocore with their dependencies (:data:`LAMBDA_PROVIDED`);
4. the public Powertools layer, when the function has it (a layer whose SSM parameter is Powertools', or whose ARN
   is Powertools' publisher's): :data:`POWERTOOLS_LAYER_PROVIDES`;
5. the written allow-list (:data:`ALLOWED`), and the run's own ``--allow-import`` names.

A module found nowhere fails the run before the first message, naming the module, the function and the file that
imports it (:class:`MissingImports`). A function with a layer this run cannot read (another account's ARN) is
resolved without it, and the message says so. Code inside an installed distribution of the asset (a folder with a
``*.dist-info`` beside it) is not read: its imports are its own packager's business.

Sources: AWS Lambda Developer Guide, "Building Lambda functions with Python" (the runtime includes the SDK for
Python, Boto3) and "Managing Lambda dependencies with layers" (a layer's ``python`` and
``python/lib/python3.x/site-packages`` are on the path); Powertools for AWS Lambda (Python), "Installation", Lambda
Layer (what the layer bundles); PEP 594 and PEP 632 (the modules removed in Python 3.12 and 3.13).
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .deploy import DeployError
from .stack_template import logical_id

#: On every Python runtime of Lambda, besides the standard library: the SDK and its dependencies.
LAMBDA_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six"})
#: What the public Powertools layer (v3) bundles, besides Powertools: its dependencies and its extras' packages.
POWERTOOLS_LAYER_PROVIDES = frozenset(
    {
        "aws_lambda_powertools",
        "jmespath",
        "typing_extensions",
        "aws_xray_sdk",
        "wrapt",
        "fastjsonschema",
        "pydantic",
        "pydantic_core",
        "annotated_types",
        "typing_inspection",
        "aws_encryption_sdk",
        "cryptography",
        "attr",
        "attrs",
        "jsonpath_ng",
        "ply",
        "datadog_lambda",
    }
)
#: The written allow-list: modules a Lambda function may import without shipping them.
ALLOWED = frozenset({"awslambdaric", "bootstrap", "__main__"})
#: Standard-library modules removed from Python, by the version that removed them (PEP 632: distutils; PEP 594: the
#: "dead batteries"): the host's ``sys.stdlib_module_names`` may still list them.
REMOVED_FROM_STDLIB: dict[tuple[int, int], frozenset[str]] = {
    (3, 12): frozenset({"distutils", "imp", "asynchat", "asyncore", "smtpd"}),
    (3, 13): frozenset(
        {
            "aifc", "audioop", "cgi", "cgitb", "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib",
            "ossaudiodev", "pipes", "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib", "lib2to3",
        }
    ),
}  # fmt: skip
#: Standard-library modules added by a Python newer than the host's 3.11 (What's New in Python 3.14:
#: ``annotationlib``, ``compression``): the host's ``sys.stdlib_module_names`` does not list them yet.
ADDED_TO_STDLIB: dict[tuple[int, int], frozenset[str]] = {(3, 14): frozenset({"annotationlib", "compression"})}
#: The account that publishes the public Powertools layers in the commercial partition.
POWERTOOLS_PUBLISHER = "017000801446"
#: The prefix of Powertools' public SSM parameters for its Python layers.
POWERTOOLS_PARAMETER_PREFIX = "/aws/service/powertools/python"


@dataclass(frozen=True)
class Missing:
    """A module ``function`` imports (in ``file``, relative to its asset) and would not find on Lambda."""

    function: str
    module: str
    file: str
    unread_layers: tuple[str, ...] = ()

    def line(self) -> str:
        unread = (
            f" (its layer(s) {', '.join(self.unread_layers)} cannot be read here: if one ships it, pass "
            f"--allow-import {self.module})"
            if self.unread_layers
            else ""
        )
        return f"function {self.function} imports {self.module!r} ({self.file}), which Lambda would not find{unread}"


class MissingImports(DeployError):
    """Modules a function imports that nothing it has on Lambda provides; the message names each."""

    def __init__(self, missing: list[Missing]) -> None:
        self.missing = missing
        super().__init__(
            "the local run executes handlers with the venv's packages, and on Lambda these imports would fail: "
            + "; ".join(item.line() for item in missing)
            + ". Ship each in the function's asset or a layer, for the function's architecture (docs/effects.md, "
            '"Shipping a driver"), or name a module Lambda provides otherwise with --allow-import'
        )


def missing_imports(cdk_out: Path, stack: str, allowed: Iterable[str] = ()) -> list[Missing]:
    """Every module a Python function of ``stack`` imports that its asset, its layers, the Lambda runtime, the
    Powertools layer and the allow-lists do not provide (see the module docstring), in template order.

    :raises DeployError: the synthesized template is missing.
    """
    template_path = cdk_out / f"{stack}.template.json"
    if not template_path.is_file():
        raise DeployError(f"no synthesized template {template_path}")
    template = json.loads(template_path.read_text(encoding="utf-8"))
    resources: dict[str, Any] = template.get("Resources") or {}
    parameters: dict[str, Any] = template.get("Parameters") or {}
    extra = frozenset(allowed)
    found: list[Missing] = []
    for name, resource in resources.items():
        properties = resource.get("Properties") or {}
        runtime = properties.get("Runtime")
        folder = _asset(cdk_out, resource)
        if resource.get("Type") != "AWS::Lambda::Function" or not str(runtime).startswith("python3.") or not folder:
            continue
        roots, powertools, unread = _layers(cdk_out, resources, parameters, properties.get("Layers") or [])
        provided = LAMBDA_PROVIDED | ALLOWED | extra | _stdlib(str(runtime))
        if powertools:
            provided |= POWERTOOLS_LAYER_PROVIDES
        for module, file in _imports(folder, str(properties.get("Handler") or "")):
            if module in provided or any(_defines(root, module) for root in (folder, *roots)):
                continue
            found.append(Missing(name, module, file, tuple(unread)))
    return found


def check_imports(cdk_out: Path, stack: str, allowed: Iterable[str] = ()) -> None:
    """:raises MissingImports: :func:`missing_imports` found some."""
    missing = missing_imports(cdk_out, stack, allowed)
    if missing:
        raise MissingImports(missing)


# --- the function's code and its layers -------------------------------------------------------------------------


def _asset(cdk_out: Path, resource: dict[str, Any]) -> Path | None:
    asset = (resource.get("Metadata") or {}).get("aws:asset:path")
    folder = cdk_out / asset if isinstance(asset, str) else None
    return folder if folder is not None and folder.is_dir() else None


def _layers(
    cdk_out: Path, resources: dict[str, Any], parameters: dict[str, Any], layers: list[Any]
) -> tuple[list[Path], bool, list[str]]:
    """The folders the layers put on ``sys.path``, whether one is the Powertools layer, and the layers not read."""
    roots: list[Path] = []
    powertools = False
    unread: list[str] = []
    for layer in layers:
        ref = logical_id(layer)
        if ref in resources and resources[ref].get("Type") == "AWS::Lambda::LayerVersion":
            folder = _asset(cdk_out, resources[ref])
            if folder is not None:
                roots.extend([folder / "python", *sorted(folder.glob("python/lib/python3.*/site-packages"))])
                continue
        default = str((parameters.get(ref or "") or {}).get("Default", ""))
        if default.startswith(POWERTOOLS_PARAMETER_PREFIX) or f":{POWERTOOLS_PUBLISHER}:" in str(layer):
            powertools = True
            continue
        unread.append(ref or json.dumps(layer, sort_keys=True))
    return roots, powertools, unread


def _stdlib(runtime: str) -> frozenset[str]:
    """The standard library's top-level modules on ``runtime`` (``python3.<minor>``): the host's, less the ones removed
    by that version, plus the ones it added."""
    text = runtime.removeprefix("python3.")
    version = (3, int(text)) if text.isdigit() else (3, 99)

    def since(table: dict[tuple[int, int], frozenset[str]]) -> set[str]:
        return {name for added, names in table.items() if version >= added for name in names}

    return (frozenset(sys.stdlib_module_names) - since(REMOVED_FROM_STDLIB)) | since(ADDED_TO_STDLIB)


def _defines(root: Path, module: str) -> bool:
    """Whether ``module`` (a top-level name) is importable from the folder ``root``."""
    return (
        (root / f"{module}.py").is_file()
        or (root / module).is_dir()
        or (root / f"{module}.so").is_file()
        or (root / f"{module}.pyc").is_file()
        or any(root.glob(f"{module}.*.so"))
        or any(root.glob(f"{module}.*.pyd"))
    )


# --- the imports of the function's own code ----------------------------------------------------------------------


def _installed(folder: Path) -> set[str]:
    """The top-level names of the distributions installed into ``folder`` (``pip install --target``: what each
    ``*.dist-info/RECORD`` lists): their code is their packager's, not read."""
    installed: set[str] = set()
    for record in folder.glob("*.dist-info/RECORD"):
        for line in record.read_text(encoding="utf-8", errors="replace").splitlines():
            installed.add(line.split(",")[0].split("/")[0].removesuffix(".py"))
    return installed


def _module_file(folder: Path, dotted: str) -> Path | None:
    """The file of module ``dotted`` in ``folder``: ``a/b.py`` or ``a/b/__init__.py``."""
    base = folder.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(folder: Path, handler: str) -> list[tuple[str, str]]:
    """``(top-level module, file)`` of every required absolute import outside the asset's own code, each module
    once, in the modules the handler loads: its module (``Handler``: ``module.function``) and, transitively, every
    module of the asset it imports (a test file or a script beside it is never loaded on Lambda). Without the
    handler's module in the asset, every module of the asset's own code is read."""
    installed = _installed(folder)
    start = _module_file(folder, handler.rpartition(".")[0]) if "." in handler else None
    pending = (
        [start]
        if start is not None
        else [
            path
            for path in sorted(folder.rglob("*.py"))
            if path.relative_to(folder).parts[0].removesuffix(".py") not in installed
        ]
    )
    seen_files: set[Path] = set()
    found: dict[str, str] = {}
    while pending:
        path = pending.pop()
        if path in seen_files:
            continue
        seen_files.add(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # Lambda would fail on it too; the run shows that error itself
        package = _package_of(folder, path)
        for dotted in _required(tree, package):
            top = dotted.split(".")[0]
            if top not in installed and (_module_file(folder, top) is not None or (folder / top).is_dir()):
                parts = dotted.split(".")
                pending.extend(f for i in range(1, len(parts) + 1) if (f := _module_file(folder, ".".join(parts[:i]))))
                continue
            found.setdefault(top, str(path.relative_to(folder)))
    return list(found.items())


def _package_of(folder: Path, path: Path) -> list[str]:
    """The package a module file belongs to, as parts (``a/b/c.py`` and ``a/b/__init__.py`` are in ``a.b``)."""
    parts = list(path.relative_to(folder).with_suffix("").parts)
    return parts[:-1]


def _required(tree: ast.AST, package: list[str]) -> Iterator[str]:
    """The dotted names ``tree`` imports, relative imports resolved within ``package`` (``from . import x`` names
    ``<package>.x``); not under an ``if`` (``TYPE_CHECKING``, a version test: optional), not in a ``try`` whose
    handlers catch ``ImportError`` (or ``ModuleNotFoundError``, ``Exception``, everything), not in a
    ``with suppress(ImportError)``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
                base = ".".join([*anchor, *([base] if base else [])])
            if base:
                yield base
                yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.If) or (isinstance(node, ast.Try) and _catches_import_error(node)):
            if isinstance(node, ast.Try):
                stack.extend([*node.handlers, *node.orelse, *node.finalbody])
        elif isinstance(node, ast.With) and _suppresses_import_error(node):
            continue
        else:
            stack.extend(ast.iter_child_nodes(node))


def _suppresses_import_error(node: ast.With) -> bool:
    for item in node.items:
        call = item.context_expr
        if isinstance(call, ast.Call) and any(
            isinstance(arg, ast.Name) and arg.id in ("ImportError", "ModuleNotFoundError") for arg in call.args
        ):
            return True
    return False


def _catches_import_error(node: ast.Try) -> bool:
    caught = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
    for handler in node.handlers:
        if handler.type is None:
            return True
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(name, ast.Name) and name.id in caught for name in names):
            return True
    return False
