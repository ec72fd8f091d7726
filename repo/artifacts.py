"""Signatures read from the artifacts themselves: an ONNX graph, a plan's manifest, a TorchScript module."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from orinkit.convert.manifest import EngineManifest, ManifestError, read_manifest
from orinkit.core.optional import require
from orinkit.repo.dtypes import dtype, from_numpy, from_onnx
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
    return ([(t.name, t.dtype, t.shape) for t in manifest.inputs],
            [(t.name, t.dtype, t.shape) for t in manifest.outputs])


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
            from orinkit.convert.manifest import describe_engine

            manifest = describe_engine(path)
        except ImportError:
            raise ArtifactError(str(missing), hint=missing.hint) from missing
    return manifest


def plan_signature(path: str | os.PathLike[str], *, max_batch_size: int | None = None) -> Signature:
    return manifest_signature(plan_manifest(path), max_batch_size=max_batch_size, source=str(path))


def torchscript_names(count: int, kind: str) -> list[str]:
    """The PyTorch backend binds tensors by position through names ending in ``__<index>``."""
    return [f"{kind}__{i}" for i in range(count)]


def torchscript_signature(
    path: str | os.PathLike[str],
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec] | None = None,
    *,
    max_batch_size: int = 0,
) -> Signature:
    """Inputs as declared (renamed input__0, …); outputs as declared, or found by running the module once on
    zeros of the declared shapes when torch is installed."""
    if not inputs:
        raise SignatureError("a TorchScript model needs its inputs declared", hint="pass --input DTYPE:DIMS")
    named_inputs = [TensorSpec(n, t.dtype, t.dims) for n, t in zip(torchscript_names(len(inputs), "input"), inputs)]
    if outputs is None:
        outputs = _run_torchscript(Path(path), named_inputs, max_batch_size)
    named_outputs = [
        TensorSpec(n, t.dtype, t.dims) for n, t in zip(torchscript_names(len(outputs), "output"), outputs)
    ]
    return Signature(named_inputs, named_outputs, max_batch_size)


def _run_torchscript(path: Path, inputs: Sequence[TensorSpec], max_batch_size: int) -> list[TensorSpec]:
    torch = require("torch")
    import numpy as np

    try:
        module = torch.jit.load(str(path), map_location="cpu").eval()
    except Exception as exc:
        raise ArtifactError(f"{path} is not a TorchScript module: {exc}", hint="save it with torch.jit.save") from exc
    batch = (1,) if max_batch_size > 0 else ()
    samples = [torch.from_numpy(np.zeros(batch + tuple(max(d, 1) for d in t.dims), dtype(t.dtype).numpy))
               for t in inputs]
    with torch.no_grad():
        result = module(*samples)
    results = result if isinstance(result, (tuple, list)) else (result,)
    cut = len(batch)
    return [
        TensorSpec(f"output__{i}", from_numpy(r.detach().numpy().dtype).triton, tuple(r.shape[cut:]))
        for i, r in enumerate(results)
    ]
