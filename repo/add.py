"""Place one model in a repository: its version folder with the artifact and a config derived from it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.convert.manifest import manifest_path
from orinkit.core.files import fsync_tree
from orinkit.repo.artifacts import onnx_signature, plan_signature, torchscript_signature
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


@dataclass(frozen=True)
class PlacedModel:
    name: str
    path: Path
    version: int
    runtime: Runtime
    config: mc.ModelConfig
    note: str = ""  # why this runtime, when orinkit chose it


def pymodel_source(name: str) -> str:
    """The text of a Python-backend model shipped in ``orinkit.repo.pymodels``."""
    return resources.files("orinkit.repo.pymodels").joinpath(f"{name}.py").read_text(encoding="utf-8")


def choose_onnx_runtime(backends: Path | None) -> tuple[Runtime, str]:
    """onnxruntime_onnx where the server has that backend; otherwise onnxruntime inside the Python backend."""
    if backends is None:
        from orinkit.server import backend_directory, locate_tritonserver

        backends = backend_directory(locate_tritonserver())
    if (backends / "onnxruntime").is_dir():
        return Runtime.ONNXRUNTIME, f"the server's backends ({backends}) include onnxruntime"
    return Runtime.PYTHON_ONNXRUNTIME, (
        f"the server's backends ({backends}) have no onnxruntime backend, so onnxruntime runs inside the Python "
        "backend; on the Orin place it with --runtime onnxruntime_onnx or convert it to a TensorRT plan"
    )


def resolve_runtime(artifact: Path, runtime: Runtime | str | None, *, backends: Path | None = None
                    ) -> tuple[Runtime, str]:
    """The runtime for ``artifact``: as given (checked against the file), or from its kind."""
    wanted = Runtime(runtime) if isinstance(runtime, str) and runtime != "auto" else runtime
    wanted = None if wanted == "auto" else wanted
    if artifact.is_dir():
        if wanted is Runtime.ONEFLOW:
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
    if runtime in ONNX_RUNTIMES:
        return onnx_signature(artifact, max_batch_size=options.max_batch_size)
    if runtime is Runtime.TENSORRT_PLAN:
        return plan_signature(artifact, max_batch_size=options.max_batch_size)
    if runtime is Runtime.PYTORCH:
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
    elif runtime is Runtime.PYTHON_ONNXRUNTIME:
        shutil.copyfile(artifact, folder / "model.onnx")
        (folder / "model.py").write_text(pymodel_source("onnxruntime_runner"), encoding="utf-8")
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

    model = onnx.load(str(artifact), load_external_data=False)
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
