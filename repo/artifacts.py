"""Signatures read from the artifacts themselves: an ONNX graph, a plan's manifest, a TorchScript module."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from orinkit.core.optional import require
from orinkit.formats.dtypes import dtype, from_numpy, from_onnx
from orinkit.formats.manifest import EngineManifest, ManifestError, read_manifest
from orinkit.repo.errors import ArtifactError, SignatureError
from orinkit.repo.signature import Signature, TensorSpec

# What `add` gives a model with a dynamic batch axis when no limit is asked for.
DEFAULT_MAX_BATCH = 8


def _batched_signature(
    inputs: Sequence[tuple[str, str, tuple[int, ...]]],
    outputs: Sequence[tuple[str, str, tuple[int, ...]]],
    *,
    max_batch_size: int | None,
    batch_limit: int | None,
    source: str,
) -> Signature:
    """Full shapes → Triton's view: with a batch limit the first axis leaves the dims."""
    fixed = [name for name, _, shape in (*inputs, *outputs) if shape[:1] != (-1,)]
    if max_batch_size is None:
        max_batch_size = 0 if fixed else min(DEFAULT_MAX_BATCH, batch_limit or DEFAULT_MAX_BATCH)
    if max_batch_size > 0:
        if fixed:
            raise SignatureError(
                f"{source}: max_batch_size {max_batch_size} needs a dynamic first axis, but "
                f"{', '.join(fixed)} {'has' if len(fixed) == 1 else 'have'} a fixed one",
                hint="export with a dynamic batch axis, or use max_batch_size 0",
            )
        if batch_limit is not None and max_batch_size > batch_limit:
            raise SignatureError(
                f"{source}: max_batch_size {max_batch_size} exceeds the engine's profile maximum {batch_limit}",
                hint=f"use at most {batch_limit}, or rebuild the engine with a larger --max-shapes batch",
            )
    cut = 1 if max_batch_size > 0 else 0
    return Signature(
        inputs=tuple(TensorSpec(n, d, s[cut:]) for n, d, s in inputs),
        outputs=tuple(TensorSpec(n, d, s[cut:]) for n, d, s in outputs),
        max_batch_size=max_batch_size,
    )


def _onnx_tensors(values) -> list[tuple[str, str, tuple[int, ...]]]:
    tensors = []
    for value in values:
        kind = value.type.tensor_type
        if not kind.HasField("shape"):
            raise SignatureError(f"tensor '{value.name}' has no shape in the graph", hint="run shape inference")
        dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in kind.shape.dim)
        tensors.append((value.name, from_onnx(kind.elem_type).triton, dims))
    return tensors


FullShapes = tuple[list[tuple[str, str, tuple[int, ...]]], list[tuple[str, str, tuple[int, ...]]]]


def onnx_full_shapes(path: str | os.PathLike[str]) -> FullShapes:
    """(inputs, outputs) of an ONNX graph as (name, dtype, full shape), initializers excluded."""
    onnx = require("onnx")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError, OSError or its own errors
        raise ArtifactError(f"{path} is not a readable ONNX model: {exc}", hint="re-export it") from exc
    graph = model.graph
    if not graph.node and not graph.output:
        raise ArtifactError(f"{path} is not a readable ONNX model: it holds no graph (an empty or foreign file)",
                            hint="pass a complete .onnx file")
    if any(not o.type.tensor_type.HasField("shape") for o in graph.output):
        graph = onnx.shape_inference.infer_shapes(model).graph
    initializers = {i.name for i in graph.initializer}
    return _onnx_tensors(i for i in graph.input if i.name not in initializers), _onnx_tensors(graph.output)


def onnx_signature(path: str | os.PathLike[str], *, max_batch_size: int | None = None) -> Signature:
    """Inputs (initializers excluded) and outputs of an ONNX graph. A dynamic first axis everywhere makes a
    batching model (max_batch_size defaults to 8); otherwise the dims are the full shapes and max_batch_size 0."""
    inputs, outputs = onnx_full_shapes(path)
    return _batched_signature(inputs, outputs, max_batch_size=max_batch_size, batch_limit=None, source=str(path))


def manifest_full_shapes(manifest: EngineManifest) -> FullShapes:
    return ([(t.name, t.dtype, t.dims) for t in manifest.inputs],
            [(t.name, t.dtype, t.dims) for t in manifest.outputs])


def manifest_signature(manifest: EngineManifest, *, max_batch_size: int | None = None, source: str) -> Signature:
    limit = manifest.max_batch()
    return _batched_signature(
        *manifest_full_shapes(manifest),
        max_batch_size=max_batch_size,
        batch_limit=limit or None,
        source=source,
    )


def plan_manifest(path: str | os.PathLike[str]) -> EngineManifest:
    """The plan's sidecar manifest; on a device with TensorRT, read from the engine when there is none."""
    try:
        manifest = read_manifest(path)
    except ManifestError as missing:
        try:
            from orinkit.formats.engine import describe_engine

            manifest = describe_engine(path)
        except ImportError:
            raise ArtifactError(str(missing), hint=missing.hint) from missing
    return manifest


def plan_signature(path: str | os.PathLike[str], *, max_batch_size: int | None = None) -> Signature:
    return manifest_signature(plan_manifest(path), max_batch_size=max_batch_size, source=str(path))


def _check_torchscript_names(tensors: Sequence[TensorSpec], kind: str) -> None:
    for index, tensor in enumerate(tensors):
        if not tensor.name.endswith(f"__{index}"):
            raise SignatureError(
                f"TorchScript {kind} '{tensor.name}' is number {index}: the PyTorch backend binds tensors by names "
                f"ending in __<index>", hint=f"name it like {tensor.name.split('__')[0]}__{index} "
                f"(e.g. --{kind} {tensor.name.split('__')[0]}__{index}:{tensor.dtype}:"
                f"{'x'.join(map(str, tensor.dims)) or 'scalar'})")


def torchscript_signature(
    path: str | os.PathLike[str],
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec] | None = None,
    *,
    max_batch_size: int = 0,
) -> Signature:
    """Inputs as declared (named ``<name>__<index>``, as the PyTorch backend binds them); outputs as declared, or
    found by running the module once on zeros of the declared shapes when torch is installed."""
    if not inputs:
        raise SignatureError("a TorchScript model needs its inputs declared",
                             hint="pass --input input__0:DTYPE:DIMS for each, in forward()'s order")
    _check_torchscript_names(inputs, "input")
    if outputs is None:
        outputs = _run_torchscript(Path(path), list(inputs), max_batch_size)
    _check_torchscript_names(outputs, "output")
    return Signature(tuple(inputs), tuple(outputs), max_batch_size)


def _run_torchscript(path: Path, inputs: Sequence[TensorSpec], max_batch_size: int) -> list[TensorSpec]:
    torch = require("torch")
    import numpy as np

    try:
        # torch 2.9+ deprecates TorchScript in favour of torch.export, but a .pt for Triton's PyTorch backend is
        # TorchScript by definition: reading one is what was asked, so its FutureWarning says nothing to the user.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"`torch\.jit\.load` is deprecated", category=FutureWarning)
            module = torch.jit.load(str(path), map_location="cpu").eval()
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError, ValueError and more for foreign files
        raise ArtifactError(f"{path} is not a TorchScript module: {str(exc).splitlines()[0][:200]}",
                            hint="save it with torch.jit.save(torch.jit.script(model) or torch.jit.trace(...))"
                            ) from None
    batch = (1,) if max_batch_size > 0 else ()
    samples = [torch.from_numpy(np.zeros(batch + tuple(max(d, 1) for d in t.dims), dtype(t.dtype).numpy))
               for t in inputs]
    try:
        with torch.no_grad():
            result = module(*samples)
    except Exception as exc:  # noqa: BLE001 - whatever forward() raises on inputs of the declared shapes
        shapes = ", ".join(f"{t.name} {list(s.shape)}" for t, s in zip(inputs, samples))
        first = next((line for line in str(exc).splitlines() if line.strip() and "Traceback" not in line), str(exc))
        raise SignatureError(
            f"{Path(path).name} fails on zeros of the declared input shapes ({shapes}): {first.strip()[:200]}",
            hint="declare the shapes forward() takes (--input NAME__0:DTYPE:DIMS, without the batch axis when "
                 "--max-batch-size > 0), or declare the outputs too (--output) to skip this run") from None
    results = result if isinstance(result, (tuple, list)) else (result,)
    cut = len(batch)
    return [
        TensorSpec(f"output__{i}", from_numpy(r.detach().numpy().dtype).triton, tuple(r.shape[cut:]))
        for i, r in enumerate(results)
    ]


def oneflow_layout_problem(saved: Path) -> str | None:
    """What is wrong with a OneFlow saved-model folder, or None: it must be a folder of the export's files, not
    empty and not the folder around the export."""
    if not saved.is_dir():
        return f"{saved.name} is a file, not a OneFlow saved-model folder"
    entries = [p for p in saved.iterdir() if not p.name.startswith(".")]
    if not entries:
        return "the OneFlow model folder is empty"
    if len(entries) == 1 and entries[0].is_dir():
        return f"the OneFlow model folder holds only the folder '{entries[0].name}' (nested one level too deep)"
    return None
