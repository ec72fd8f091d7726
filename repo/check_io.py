"""The tensors of a model's config against its artifact, and against what tritonserver accepts at all: part of
``edge-repo check`` (:mod:`orinkit.repo.check`), which passes its report in."""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.formats.manifest import ManifestError, read_manifest
from orinkit.repo import autocomplete
from orinkit.repo.artifacts import manifest_full_shapes, onnx_full_shapes
from orinkit.repo.configs import Runtime, tensor_specs
from orinkit.repo.errors import RepoError
from orinkit.repo.pbtxt import CONFIG_NAME
from orinkit.repo.signature import dims_compatible


def check_declared_dims(report, folder: Path, config: mc.ModelConfig) -> None:
    """tritonserver refuses a config tensor without dims ("model input 'x' must specify 'dims'"), scalars
    included: a scalar is declared as dims [1] with an empty reshape."""
    for kind, tensors in (("input", config.input), ("output", config.output)):
        for tensor in tensors:
            if not tensor.dims:
                report.error("io-scalar", folder.name, folder / CONFIG_NAME,
                             f"{kind} '{tensor.name}' has no dims (a scalar): tritonserver refuses it",
                             "declare it as dims: [ 1 ] with reshape: { shape: [ ] }")


def full_shapes(report, folder, runtime, version):
    """The artifact's (inputs, outputs) with full shapes, or None where the artifact cannot tell."""
    try:
        if runtime in (Runtime.ONNXRUNTIME, Runtime.PYTHON_ONNXRUNTIME):
            return onnx_full_shapes(version / "model.onnx"), version / "model.onnx", None
        if runtime is Runtime.TENSORRT_PLAN:
            manifest = read_manifest(version / "model.plan")
            return manifest_full_shapes(manifest), version / "model.plan", manifest.max_batch()
    except ManifestError as exc:
        report.warning("no-manifest", folder.name, version / "model.plan", exc.message,
                       "rebuild it with edge-convert, or run check on the device")
    except RepoError as exc:
        report.error("artifact-unreadable", folder.name, version, exc.message, exc.hint or "replace the file")
    return None


def check_io(report, folder: Path, config: mc.ModelConfig, runtime: Runtime, version: Path, *,
              auto_complete: bool = False) -> None:
    name = folder.name
    if runtime in (Runtime.PYTORCH, Runtime.PYTHON_TORCHSCRIPT):
        for kind, tensors in (("input", config.input), ("output", config.output)):
            for index, tensor in enumerate(tensors):
                if not tensor.name.endswith(f"__{index}"):
                    report.error("torchscript-naming", name, folder / CONFIG_NAME,
                                 f"{kind} '{tensor.name}' does not follow the <name>__<index> naming the PyTorch "
                                 "backend binds by", f"name it {kind}__{index}")
        return
    found = full_shapes(report, folder, runtime, version)
    if found is None:
        return
    (inputs, outputs), artifact, profile_batch = found
    declared = (tensor_specs(config.input), tensor_specs(config.output))
    batched = config.max_batch_size > 0
    if profile_batch and batched and config.max_batch_size > profile_batch:
        report.error("batch-exceeds-profile", name, folder / CONFIG_NAME,
                     f"max_batch_size {config.max_batch_size} exceeds the engine's profile maximum {profile_batch}",
                     f"set max_batch_size to at most {profile_batch}, or rebuild with a larger max batch")
    where = f"{artifact.parent.name}/{artifact.name}"
    for kind, have, want in (("input", declared[0], inputs), ("output", declared[1], outputs)):
        actual = {n: (d, s) for n, d, s in want}
        for tensor in have:
            if tensor.name not in actual:
                report.error("io-name", name, folder / CONFIG_NAME, f"{kind} '{tensor.name}' is not in {where}",
                             f"the model's {kind}s are {', '.join(actual) or 'none'}")
                continue
            real_dtype, shape = actual[tensor.name]
            if tensor.dtype != real_dtype:
                report.error("io-dtype", name, folder / CONFIG_NAME,
                             f"{kind} '{tensor.name}' is {tensor.dtype} in the config but {real_dtype} in {where}",
                             f"set data_type: TYPE_{real_dtype.replace('BYTES', 'STRING')}")
            expected = shape[1:] if batched else shape
            if batched and shape[:1] != (-1,):
                report.error("batch-axis-fixed", name, folder / CONFIG_NAME,
                             f"max_batch_size {config.max_batch_size} but {kind} '{tensor.name}' has a fixed first "
                             f"axis {list(shape)} in {where}", "set max_batch_size: 0 and full dims, or re-export "
                             "with a dynamic batch axis")
            elif batched and dims_compatible(tensor.dims, shape) and not dims_compatible(tensor.dims, expected):
                report.error("dims-include-batch", name, folder / CONFIG_NAME,
                             f"{kind} '{tensor.name}' dims {list(tensor.dims)} include the batch axis",
                             f"with max_batch_size > 0 write dims {list(expected)}")
            elif not dims_compatible(tensor.dims, expected):
                report.error("io-dims", name, folder / CONFIG_NAME,
                             f"{kind} '{tensor.name}' has dims {list(tensor.dims)} in the config but "
                             f"{list(expected)} in {where}", f"set dims: {list(expected)}")
        missing = [n for n in actual if n not in {t.name for t in have}]
        renamed = any(t.name not in actual for t in have)  # then io-name already lists the real names
        # onnxruntime/tensorrt fill the inputs only where the config declares none (then all of them).
        completes = auto_complete and config.backend in autocomplete.IO_FROM_MODEL_FILE and not have
        if missing and kind == "input" and not renamed and not completes:
            report.error("io-missing", name, folder / CONFIG_NAME, f"the config lacks {kind}s {', '.join(missing)} "
                         f"of {where}", "declare every model input")
