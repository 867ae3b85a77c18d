"""``RuntimeLayer``: the runtime (``effectively_once_runtime``) as a Lambda layer, plus the pinned Powertools layer.

Why a layer and not a copy inside the user's asset: a user's ``lambda_.Function(code=Code.from_asset("src"))``
stays exactly as written (no bundling step, no Docker, the folder is not touched) and gets the runtime with one
line, ``layers=RuntimeLayer(self, "Runtime").layers``; the runtime's version is the installed library's, updated
with it, and one layer version serves every function of a stack that uses it.

The layer's content is the runtime package laid out as ``python/effectively_once_runtime/...``: Lambda extracts a
layer into ``/opt`` and, for Python runtimes, ``/opt/python`` is on ``sys.path`` (source: AWS Lambda Developer
Guide, "Packaging your layer content", section "Layer paths for each Lambda runtime"). It is built without Docker
at synth time from the package source the library ships: located with :mod:`importlib` (the top-level package the
wheel installs, or ``lambda_src/`` in a checkout), copied without ``__pycache__``/``*.pyc`` into a staging folder
named after a digest of that content (:func:`stage_runtime_layer`), so the asset hash changes with the source and
nothing else. The runtime is pure Python and needs Python 3.11 or newer (pyproject's ``requires-python``): the
layer declares both architectures and :data:`RUNTIME_LAYER_RUNTIMES`. Powertools, which the runtime imports, is
not in it: Powertools' own public layer is, resolved per architecture and runtime
(:func:`~effectively_once.powertools_layer.public_powertools_layer`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import jsii
from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IValidation

from ._assets import ASSET_EXCLUDES
from ._validation import check_type, fail, message
from .limits import POWERTOOLS_LAYER_DOC
from .powertools_layer import POWERTOOLS_RUNTIME, public_powertools_layer

#: The package the layer carries (and the name a user's handler imports).
RUNTIME_PACKAGE = "effectively_once_runtime"
#: The folder of a layer that Lambda puts on ``sys.path`` for Python runtimes (``/opt/python``). Source: AWS Lambda
#: Developer Guide, "Packaging your layer content", "Layer paths for each Lambda runtime".
LAYER_PYTHON_DIR = "python"
LAYER_PATHS_DOC = "AWS Lambda Developer Guide, Packaging your layer content (Layer paths for each Lambda runtime)"
#: Python runtimes the layer runs on: the runtime needs Python >= 3.11 (pyproject ``requires-python``), and
#: Powertools publishes its layer up to python3.14 (see ``limits.POWERTOOLS_SSM_REGIONS``).
RUNTIME_LAYER_RUNTIMES = (
    lambda_.Runtime.PYTHON_3_11,
    lambda_.Runtime.PYTHON_3_12,
    lambda_.Runtime.PYTHON_3_13,
    lambda_.Runtime.PYTHON_3_14,
)
#: Architectures Lambda offers; the runtime is pure Python, so its layer declares both.
RUNTIME_LAYER_ARCHITECTURES = (lambda_.Architecture.X86_64, lambda_.Architecture.ARM_64)

#: Lambda's default architecture: a function without ``architecture`` runs on it (AWS Lambda API Reference,
#: ``Architectures`` of CreateFunction / UpdateFunctionCode: "The default value is x86_64").
LAMBDA_DEFAULT_ARCHITECTURE = lambda_.Architecture.X86_64

_BYTE_CODE_DIRS = {"__pycache__"}
_BYTE_CODE_SUFFIXES = {".pyc", ".pyo"}


def check_architecture(prop: str, architecture: object) -> lambda_.Architecture:
    """``architecture`` when it is ``lambda_.Architecture.X86_64`` or ``ARM_64``.

    :raises ValueError: another type (a string such as ``"arm64"`` included), or an architecture Lambda does not
        offer (``lambda_.Architecture.custom(...)``), naming ``prop``.
    """
    check_type(prop, architecture, lambda_.Architecture, "a lambda_.Architecture (X86_64 or ARM_64)")
    assert isinstance(architecture, lambda_.Architecture)
    if architecture.name not in {a.name for a in RUNTIME_LAYER_ARCHITECTURES}:
        raise fail(prop, architecture.name, "must be x86_64 or arm64 (lambda_.Architecture)", LAYER_PATHS_DOC)
    return architecture


def runtime_package_dir() -> Path:
    """The folder of the installed ``effectively_once_runtime`` package (its ``__init__.py``'s parent).

    Installed from the wheel it is the top-level package in site-packages; in a checkout (editable install, tests)
    it is ``lambda_src/effectively_once_runtime``.

    :raises FileNotFoundError: the package cannot be found on ``sys.path``.
    """
    spec = importlib.util.find_spec(RUNTIME_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"the {RUNTIME_PACKAGE} package was not found on sys.path: install effectively-once (the wheel ships "
            "it as a top-level package) or add the checkout's lambda_src/ to the path"
        )
    return Path(spec.origin).resolve().parent


def _source_files(source: Path) -> list[Path]:
    """Every file of the package, relative to ``source``, sorted; no byte code."""
    return sorted(
        path.relative_to(source)
        for path in source.rglob("*")
        if path.is_file()
        and path.suffix not in _BYTE_CODE_SUFFIXES
        and not _BYTE_CODE_DIRS.intersection(path.relative_to(source).parts)
    )


def _digest(source: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    for relative in files:
        digest.update(relative.as_posix().encode() + b"\0")
        digest.update((source / relative).read_bytes() + b"\0")
    return digest.hexdigest()


def stage_runtime_layer(source: Path | None = None) -> Path:
    """A folder holding ``python/effectively_once_runtime/...``: the layer's content, without byte code.

    The folder is ``<temp dir>/effectively-once-runtime-layer-<sha256 of the content>``: the same source gives the
    same folder (reused when its content checks out, staged again otherwise) and the same asset hash.

    :param source: the package folder. :default: :func:`runtime_package_dir`.
    :raises FileNotFoundError: as :func:`runtime_package_dir`; ``source`` has no ``__init__.py``.
    """
    source = source or runtime_package_dir()
    files = _source_files(source)
    if Path("__init__.py") not in files:
        raise FileNotFoundError(f"{source} is not the {RUNTIME_PACKAGE} package: it has no __init__.py")
    digest = _digest(source, files)
    root = Path(tempfile.gettempdir()) / f"effectively-once-runtime-layer-{digest[:32]}"
    package = Path(LAYER_PYTHON_DIR) / RUNTIME_PACKAGE

    def holds_the_source() -> bool:
        return root.is_dir() and _source_files(root / package) == files and _digest(root / package, files) == digest

    if holds_the_source():
        return root
    staging = Path(tempfile.mkdtemp(prefix="effectively-once-runtime-layer-"))
    for relative in files:
        target = staging / package / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / relative, target)
    try:
        if holds_the_source():  # another process staged the same content meanwhile: keep its folder
            shutil.rmtree(staging)
            return root
        if root.exists():  # altered or partial: replaced by the fresh copy
            shutil.rmtree(root)
        os.replace(staging, root)
    except OSError:  # lost a race with another process; this copy holds the same content
        return staging
    return root


class RuntimeLayer(Construct):
    """The runtime layer and the Powertools layer a function built on ``effectively_once_runtime`` needs.

    ``lambda_.Function(..., code=lambda_.Code.from_asset("src"), layers=RuntimeLayer(self, "Runtime").layers)``:
    the function's own handler can then ``from effectively_once_runtime import Consumer``. Wire the function to its
    queue with :class:`~effectively_once.IdempotentQueueConsumer`, which sets the environment the runtime reads.

    Children (ids are stable): ``Layer`` (``lambda.LayerVersion``: ``python/effectively_once_runtime/``, both
    architectures, :data:`RUNTIME_LAYER_RUNTIMES`) and, unless ``powertools_layer`` is given, ``PowertoolsLayer``
    (the public layer of the pinned release, its ARN read at deploy time from Powertools' SSM parameter for
    ``architecture`` and ``runtime``).

    :param architecture: the architecture of the functions that use these layers: ``lambda_.Architecture.X86_64``
        or ``ARM_64``; picks the Powertools layer (Powertools builds one per architecture). Every function of the
        stack that uses the resolved Powertools layer must run on it: otherwise synth fails (CDK checks a layer's
        runtimes, not its architectures); use one ``RuntimeLayer`` per architecture.
        :default: ``lambda_.Architecture.X86_64`` (Lambda's default for a function without ``architecture``).
    :param runtime: the function's Python runtime; picks the Powertools layer, and a function on another runtime
        is rejected by CDK (the Powertools layer declares only this one). :default: ``lambda_.Runtime.PYTHON_3_14``
        (:data:`~effectively_once.powertools_layer.POWERTOOLS_RUNTIME`).
    :param powertools_layer: the Powertools layer. :default: ``None``: Powertools' public layer of
        ``POWERTOOLS_VERSION`` for ``architecture`` and ``runtime``; required where Powertools publishes no SSM
        parameter (the China and GovCloud partitions, regions outside ``limits.POWERTOOLS_SSM_REGIONS``).
    :raises ValueError: ``architecture`` is not a ``lambda_.Architecture`` or is neither x86_64 nor arm64;
        ``runtime`` is not one of :data:`RUNTIME_LAYER_RUNTIMES`; ``powertools_layer`` is ``None`` and the stack's
        region is known and has no Powertools parameter.
    :raises FileNotFoundError: the runtime package is not installed (:func:`runtime_package_dir`).
    :raises RuntimeError: at synth (``app.synth()``: "Validation failed"), a function in the same stack uses the
        resolved Powertools layer and runs on another architecture than ``architecture``.

    Attributes:
        architecture (lambda.Architecture): what the Powertools layer was resolved for.
        layer (lambda.LayerVersion): the runtime. powertools_layer (lambda.ILayerVersion): Powertools.
        layers (list[lambda.ILayerVersion]): ``[powertools_layer, layer]``, for a function's ``layers``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        architecture: lambda_.Architecture = lambda_.Architecture.X86_64,
        runtime: lambda_.Runtime = POWERTOOLS_RUNTIME,
        powertools_layer: lambda_.ILayerVersion | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.architecture = check_architecture("architecture", architecture)
        supported = [r.name for r in RUNTIME_LAYER_RUNTIMES]
        if runtime.name not in supported:
            raise fail(
                "runtime",
                runtime.name,
                f"must be one of {', '.join(supported)}: the runtime needs Python 3.11 or newer and Powertools "
                "publishes its layer up to python3.14",
                LAYER_PATHS_DOC,
            )
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(str(stage_runtime_layer()), exclude=ASSET_EXCLUDES),
            compatible_architectures=list(RUNTIME_LAYER_ARCHITECTURES),
            compatible_runtimes=list(RUNTIME_LAYER_RUNTIMES),
            description="effectively_once_runtime: Consumer, names, settings (effectively-once)",
        )
        if powertools_layer is None:
            powertools_layer = public_powertools_layer(
                self, "PowertoolsLayer", architecture=architecture, runtime=runtime
            )
            # A given layer's architecture is the user's to know; the one resolved here is ours to check.
            self.node.add_validation(_SameArchitecture(self, powertools_layer))
        self.powertools_layer = powertools_layer
        self.layers: list[lambda_.ILayerVersion] = [self.powertools_layer, self.layer]


@jsii.implements(IValidation)
class _SameArchitecture:
    """At synth: every function of the stack that uses the Powertools layer resolved for ``runtime.architecture``
    runs on that architecture (CDK's ``Function.addLayers`` checks a layer's runtimes only)."""

    def __init__(self, runtime: RuntimeLayer, powertools_layer: lambda_.ILayerVersion) -> None:
        self._runtime = runtime
        self._layer = powertools_layer

    def validate(self) -> list[str]:
        stack = Stack.of(self._runtime)
        wanted = self._runtime.architecture.name
        layer = stack.resolve(self._layer.layer_version_arn)
        errors = []
        for child in stack.node.find_all():
            if not isinstance(child, lambda_.CfnFunction) or Stack.of(child) is not stack:
                continue
            if layer not in (stack.resolve(child.layers) or []):
                continue
            architectures = stack.resolve(child.architectures) or [LAMBDA_DEFAULT_ARCHITECTURE.name]
            if architectures != [wanted]:
                function = child.node.scope.node.path if child.node.scope else child.node.path
                fix = "ARM_64" if architectures == ["arm64"] else "X86_64"
                errors.append(
                    message(
                        "architecture",
                        wanted,
                        f"of RuntimeLayer {self._runtime.node.path} must be the architecture of every function "
                        f"using its Powertools layer (Powertools builds one layer per architecture), and function "
                        f"{function} runs on {', '.join(architectures)}: give it a RuntimeLayer with "
                        f"architecture=lambda_.Architecture.{fix}",
                        POWERTOOLS_LAYER_DOC,
                    )
                )
        return errors
