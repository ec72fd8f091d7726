"""Place one model in a repository: its version folder with the artifact and a config derived from it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.core.files import fsync_tree
from orinkit.formats.manifest import manifest_path
from orinkit.repo.artifacts import oneflow_layout_problem, onnx_signature, plan_signature, torchscript_signature
from orinkit.repo.configs import Runtime, build_config
from orinkit.repo.errors import ArtifactError, SignatureError, UnsupportedArtifactError
from orinkit.repo.layout import check_model_name, new_model_folder
from orinkit.repo.options import ModelOptions
from orinkit.repo.pbtxt import CONFIG_NAME, write_config
from orinkit.repo.signature import Signature, TensorSpec

_BY_SUFFIX = {
    ".plan": Runtime.TENSORRT_PLAN,
    ".engine": Runtime.TENSORRT_PLAN,
    ".pt": Runtime.PYTORCH,
    ".pth": Runtime.PYTORCH,
    ".torchscript": Runtime.PYTORCH,
    ".py": Runtime.PYTHON,
}
ONNX_RUNTIMES = (Runtime.ONNXRUNTIME, Runtime.PYTHON_ONNXRUNTIME)
TORCHSCRIPT_RUNTIMES = (Runtime.PYTORCH, Runtime.PYTHON_TORCHSCRIPT)
# What each runtime needs declared; the others read their inputs and outputs from the file.
DECLARED_IO = (Runtime.PYTHON, Runtime.ONEFLOW, *TORCHSCRIPT_RUNTIMES)


@dataclass(frozen=True)
class PlacedModel:
    name: str
    path: Path
    version: int
    runtime: Runtime
    config: mc.ModelConfig
    note: str = ""  # why this runtime, when orinkit chose it


def _choose(native: Runtime, fallback: Runtime, backends: Path | None, *, device_hint: str) -> tuple[Runtime, str]:
    """``native`` where the server has its backend; otherwise ``fallback``, the same file run inside the Python
    backend (the local tritonserver has only that one)."""
    if backends is None:
        from orinkit.server import backend_directory, locate_tritonserver

        backends = backend_directory(locate_tritonserver())
    if (backends / native.backend).is_dir():
        return native, f"the server's backends ({backends}) include {native.backend}"
    return fallback, (
        f"the server's backends ({backends}) have no {native.backend} backend, so the model runs inside the Python "
        f"backend; on the Orin {device_hint}"
    )


def choose_onnx_runtime(backends: Path | None) -> tuple[Runtime, str]:
    return _choose(Runtime.ONNXRUNTIME, Runtime.PYTHON_ONNXRUNTIME, backends,
                   device_hint="place it with --runtime onnxruntime_onnx or convert it to a TensorRT plan")


def resolve_runtime(artifact: Path, runtime: Runtime | str | None, *, backends: Path | None = None
                    ) -> tuple[Runtime, str]:
    """The runtime for ``artifact``: as given (checked against the file), or from its kind."""
    wanted = Runtime(runtime) if isinstance(runtime, str) and runtime != "auto" else runtime
    wanted = None if wanted == "auto" else wanted
    if artifact.is_dir():
        if wanted is Runtime.ONEFLOW:
            problem = oneflow_layout_problem(artifact)
            if problem is not None:
                raise ArtifactError(f"{artifact}: {problem}",
                                    hint="pass the folder oneflow.saved_model wrote (its files directly inside)")
            return wanted, ""
        raise UnsupportedArtifactError(
            f"{artifact} is a folder", hint="a folder is placed only as a OneFlow saved model: --runtime oneflow"
        )
    suffix = artifact.suffix.lower()
    if suffix == ".onnx":
        if wanted is None:
            return choose_onnx_runtime(backends)
        if wanted in ONNX_RUNTIMES:
            return wanted, ""
    elif _BY_SUFFIX.get(suffix) is Runtime.PYTORCH and wanted in (None, *TORCHSCRIPT_RUNTIMES):
        if wanted is None:
            return _choose(Runtime.PYTORCH, Runtime.PYTHON_TORCHSCRIPT, backends,
                           device_hint="place it with --runtime pytorch_libtorch")
        return wanted, ""
    elif suffix in _BY_SUFFIX and wanted in (None, _BY_SUFFIX[suffix]):
        return _BY_SUFFIX[suffix], ""
    kinds = ", ".join(sorted({*_BY_SUFFIX, ".onnx"}))
    raise UnsupportedArtifactError(
        f"{artifact.name} cannot be placed as {wanted.value if wanted else 'a model'}",
        hint=f"orinkit places {kinds} files and OneFlow folders; pick the --runtime that matches the file",
    )


def derive_signature(
    artifact: Path,
    runtime: Runtime,
    options: ModelOptions,
    inputs: Sequence[TensorSpec] | None = None,
    outputs: Sequence[TensorSpec] | None = None,
) -> Signature:
    """The model's I/O from the artifact itself; declared only where the artifact cannot tell (Python, OneFlow,
    TorchScript inputs)."""
    if runtime not in DECLARED_IO and (inputs or outputs):
        raise SignatureError(
            f"--input/--output declare the tensors of Python, OneFlow and TorchScript models; a {runtime.value} "
            "model's come from the file itself",
            hint="drop --input/--output (edge-repo add prints what it read), or re-export the model with the names "
                 "you want")
    if runtime in ONNX_RUNTIMES:
        return onnx_signature(artifact, max_batch_size=options.max_batch_size)
    if runtime is Runtime.TENSORRT_PLAN:
        return plan_signature(artifact, max_batch_size=options.max_batch_size)
    if runtime in TORCHSCRIPT_RUNTIMES:
        return torchscript_signature(artifact, inputs or (), outputs, max_batch_size=options.max_batch_size or 0)
    if not inputs or not outputs:
        raise SignatureError(
            f"a {runtime.value} model declares its inputs and outputs (the file cannot tell them)",
            hint="pass --input NAME:DTYPE:DIMS and --output NAME:DTYPE:DIMS",
        )
    return Signature(tuple(inputs), tuple(outputs), options.max_batch_size or 0)


def fill_version(folder: Path, artifact: Path, runtime: Runtime, extra_files: Sequence[Path] = ()) -> None:
    """Copy the artifact (and what it needs) into a version folder, under the name Triton looks for."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / runtime.model_file
    if runtime is Runtime.ONEFLOW:
        shutil.copytree(artifact, target)
    elif runtime.runner is not None:
        shutil.copyfile(artifact, folder / ("model.onnx" if runtime is Runtime.PYTHON_ONNXRUNTIME else "model.pt"))
        from orinkit.repo.python_model import model_source

        (folder / "model.py").write_text(model_source(f"orinkit.repo.pymodels.{runtime.runner}"), encoding="utf-8")
    else:
        shutil.copyfile(artifact, target)
    if runtime is Runtime.TENSORRT_PLAN and manifest_path(artifact).is_file():
        shutil.copyfile(manifest_path(artifact), manifest_path(target))
    if runtime in ONNX_RUNTIMES:
        _copy_external_data(artifact, folder)
    for extra in extra_files:
        if not Path(extra).is_file():
            raise ArtifactError(f"extra file {extra} does not exist", hint="check the path")
        shutil.copyfile(extra, folder / Path(extra).name)
    fsync_tree(folder)


def _copy_external_data(artifact: Path, folder: Path) -> None:
    """Large ONNX models keep weights in files beside the graph; they travel with it."""
    import onnx

    try:
        model = onnx.load(str(artifact), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, OSError, onnx's own: a file cut short or foreign
        raise ArtifactError(f"{artifact.name} is not a readable ONNX model ({type(exc).__name__}: "
                            f"{str(exc).splitlines()[0][:200] if str(exc) else 'no detail'})",
                            hint="pass a complete .onnx file; re-export it if it was cut short") from None
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = next(e.value for e in tensor.external_data if e.key == "location")
            if not (folder / location).exists():
                shutil.copyfile(artifact.parent / location, folder / location)


def add_model(
    repository: str | os.PathLike[str],
    artifact: str | os.PathLike[str],
    *,
    name: str | None = None,
    runtime: Runtime | str | None = None,
    version: int = 1,
    options: ModelOptions | None = None,
    inputs: Sequence[TensorSpec] | None = None,
    outputs: Sequence[TensorSpec] | None = None,
    extra_files: Sequence[Path] = (),
    backends: Path | None = None,
) -> PlacedModel:
    """Place ``artifact`` as a new model: ``<repository>/<name>/<version>/`` plus a config derived from the
    artifact. The model folder appears whole or not at all."""
    repository, artifact = Path(repository), Path(artifact)
    options = options or ModelOptions()
    if not artifact.exists():
        raise ArtifactError(f"{artifact} does not exist", hint="check the path")
    chosen, note = resolve_runtime(artifact, runtime, backends=backends)
    if name is None:
        name = artifact.stem if artifact.stem not in ("model", "") else artifact.resolve().parent.name
    if version < 1:
        raise SignatureError(f"version {version} is below 1", hint="versions are 1, 2, ...")
    signature = derive_signature(artifact, chosen, options, inputs, outputs)
    config = build_config(check_model_name(name), chosen, signature, options)
    hint = f"deploy a new version with: edge-repo deploy {name} {artifact} --repo {repository}"
    with new_model_folder(repository, name, hint=hint) as staging:
        fill_version(staging / str(version), artifact, chosen, extra_files)
        write_config(staging / CONFIG_NAME, config)
    return PlacedModel(name, repository / name, version, chosen, config, note)
