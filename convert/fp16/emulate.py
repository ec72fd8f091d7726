"""A faithful FP16 emulation on onnxruntime's CPU provider.

onnxruntime runs many FP16 ops in FP32 on the CPU and so hides overflow. Instead the FP32 graph is kept and
every floating tensor a converted node produces is stored through FP16 (Cast to FLOAT16, Cast back), weights are
rounded to FP16, and the session runs with graph optimisations off. |x| > 65504 then becomes inf, as in a TensorRT
FP16 engine. It emulates FP16 storage (rounding and range), not FP16 accumulation order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from orinkit.convert.fp16.graphs import float_tensors, onnx_module, session


def _round_trip(onnx, source: str, target: str, tag: str) -> list:
    half = f"{target}__{tag}_fp16"
    return [
        onnx.helper.make_node("Cast", [source], [half], to=onnx.TensorProto.FLOAT16, name=f"{half}_cast"),
        onnx.helper.make_node("Cast", [half], [target], to=onnx.TensorProto.FLOAT, name=f"{target}__{tag}_back"),
    ]


def emulated_fp16(model, keep_fp32: Iterable[str] = ()):
    """A copy of ``model`` whose nodes, except ``keep_fp32``, store their FP32 outputs in FP16."""
    onnx = onnx_module()
    keep = set(keep_fp32)
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    floats = float_tensors(model)
    initializers = {i.name for i in graph.initializer}

    rounded: dict[str, str] = {}  # FP32 graph input or weight → its FP16-rounded stand-in
    nodes = []
    for tensor in graph.input:
        if tensor.name in floats and tensor.name not in initializers:
            rounded[tensor.name] = f"{tensor.name}__rounded"
            nodes += _round_trip(onnx, tensor.name, rounded[tensor.name], "in")
    for init in list(graph.initializer):
        if init.data_type == onnx.TensorProto.FLOAT:
            values = onnx.numpy_helper.to_array(init).astype(np.float16).astype(np.float32)
            copy = onnx.numpy_helper.from_array(values, f"{init.name}__rounded")
            graph.initializer.append(copy)
            rounded[init.name] = copy.name

    for node in model.graph.node:
        node = _copy(onnx, node)
        if node.name in keep:
            nodes.append(node)
            continue
        for index, name in enumerate(node.input):
            if name in rounded:
                node.input[index] = rounded[name]
        nodes.append(node)
        for index, name in enumerate(node.output):
            if name in floats:
                raw = f"{name}__fp32"
                node.output[index] = raw
                nodes += _round_trip(onnx, raw, name, "out")
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return result


def _copy(onnx, node):
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy


def run(model, samples: Sequence[dict], *, optimize: bool = True) -> list[list[np.ndarray]]:
    """Outputs of ``model`` for each sample, in graph output order."""
    sess = session(model, optimize=optimize)
    names = [o.name for o in model.graph.output]
    return [sess.run(names, sample) for sample in samples]


def run_emulated(model, samples: Sequence[dict], keep_fp32: Iterable[str] = ()) -> list[list[np.ndarray]]:
    return run(emulated_fp16(model, keep_fp32), samples, optimize=False)


def activation_ranges(model, samples: Sequence[dict]) -> dict[str, float]:
    """max |x| over the samples of every FP32 tensor each node produces, by node name (inf for inf/NaN)."""
    onnx = onnx_module()
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    floats = float_tensors(model)
    present = {o.name for o in probe.graph.output}
    owner: dict[str, str] = {}
    for node in probe.graph.node:
        for name in node.output:
            if name in floats:
                owner[name] = node.name
                if name not in present:
                    probe.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    sess = session(probe)
    names = list(owner)
    ranges: dict[str, float] = {}
    for sample in samples:
        for name, value in zip(names, sess.run(names, sample)):
            value = np.asarray(value, dtype=np.float64)
            peak = float(np.max(np.abs(value))) if value.size else 0.0
            if not np.all(np.isfinite(value)):
                peak = float("inf")
            ranges[owner[name]] = max(ranges.get(owner[name], 0.0), peak)
    return ranges
