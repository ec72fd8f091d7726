"""A faithful FP16 emulation on onnxruntime's CPU provider, switchable node by node at run time.

onnxruntime runs many FP16 ops in FP32 on the CPU and so hides overflow. Instead the FP32 graph is kept and the
floating tensors a converted node produces are stored through FP16 (Cast to FLOAT16, Cast back); the weights and
graph inputs it reads are rounded to FP16; the session runs with graph optimisations off, so no fusion removes
the rounding. |x| > 65504 then becomes inf, as in a TensorRT FP16 engine. It emulates FP16 storage (rounding and
range), not FP16 accumulation order.

Which nodes are converted is a boolean input of the graph (:data:`MASK`, one entry per node that produces a
floating tensor, in :func:`~orinkit.convert.fp16.graphs.float_producers` order): each such node picks its
rounded or exact tensors with ``Where``. One graph and one session serve every set of FP32 nodes a search tries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from orinkit.convert.fp16.graphs import (
    float_producers,
    float_tensors,
    onnx_module,
    session,
    switch_nodes,
)

MASK = "orinkit_fp16_mask"


def _cast_pair(onnx, source: str, target: str) -> list:
    half = f"{target}__half"
    return [
        onnx.helper.make_node("Cast", [source], [half], to=onnx.TensorProto.FLOAT16, name=f"{half}_cast"),
        onnx.helper.make_node("Cast", [half], [target], to=onnx.TensorProto.FLOAT, name=f"{target}_cast"),
    ]


def switchable_fp16(model):
    """``(graph, units)``: ``model`` with the :data:`MASK` input; ``units[i]`` is the node mask entry i converts."""
    onnx = onnx_module()
    floats = float_tensors(model)
    units = float_producers(model)
    index = {name: i for i, name in enumerate(units)}
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    initializers = {i.name for i in graph.initializer}

    rounded: dict[str, str] = {}  # an FP32 graph input or weight → its FP16-rounded stand-in
    nodes = []
    for tensor in graph.input:
        if tensor.name in floats and tensor.name not in initializers:
            rounded[tensor.name] = f"{tensor.name}__rounded"
            nodes += _cast_pair(onnx, tensor.name, rounded[tensor.name])
    for init in list(graph.initializer):
        if init.data_type == onnx.TensorProto.FLOAT:
            values = onnx.numpy_helper.to_array(init).astype(np.float16).astype(np.float32)
            graph.initializer.append(onnx.numpy_helper.from_array(values, f"{init.name}__rounded"))
            rounded[init.name] = f"{init.name}__rounded"

    for node in model.graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        if node.name not in index:
            # Produces no floating tensor (Shape, ArgMax, ...): as in the FP16 graph it reads rounded inputs.
            for i, name in enumerate(copy.input):
                copy.input[i] = rounded.get(name, name)
            nodes.append(copy)
            continue
        switch = f"{node.name}__fp16"
        nodes += switch_nodes(MASK, index[node.name], switch)
        for i, name in enumerate(copy.input):
            if name in rounded:
                chosen = f"{name}__for_{node.name}"
                nodes.append(onnx.helper.make_node("Where", [switch, rounded[name], name], [chosen],
                                                   name=f"{chosen}_where"))
                copy.input[i] = chosen
        nodes.append(copy)
        for i, name in enumerate(copy.output):
            if name in floats:
                raw = f"{name}__exact"
                copy.output[i] = raw
                nodes += _cast_pair(onnx, raw, f"{name}__stored")
                nodes.append(onnx.helper.make_node("Where", [switch, f"{name}__stored", raw], [name],
                                                   name=f"{name}__where"))
    graph.input.append(onnx.helper.make_tensor_value_info(MASK, onnx.TensorProto.BOOL, [len(units)]))
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return result, units


def mask_for(units: Sequence[str], keep_fp32: Iterable[str]) -> np.ndarray:
    """The :data:`MASK` value that converts every unit except ``keep_fp32``."""
    keep = set(keep_fp32)
    return np.array([name not in keep for name in units], dtype=bool)


class Emulator:
    """Sessions for the FP32 reference and the switchable emulation of one model, built once."""

    def __init__(self, model) -> None:
        self.model = model
        self.names = [o.name for o in model.graph.output]
        self.reference_session = session(model)
        graph, self.units = switchable_fp16(model)
        self.session = session(graph, optimize=False)

    def reference(self, samples: Sequence[dict]) -> list[list[np.ndarray]]:
        return [self.reference_session.run(self.names, sample) for sample in samples]

    def emulate(self, samples: Sequence[dict], keep_fp32: Iterable[str] = (), *,
                converted: Iterable[str] | None = None) -> list[list[np.ndarray]]:
        """Outputs with every node in FP16 except ``keep_fp32`` (or, with ``converted``, only those in FP16)."""
        if converted is not None:
            chosen = set(converted)
            mask = np.array([name in chosen for name in self.units], dtype=bool)
        else:
            mask = mask_for(self.units, keep_fp32)
        return [self.session.run(self.names, {**sample, MASK: mask}) for sample in samples]


def run(model, samples: Sequence[dict], *, optimize: bool = True) -> list[list[np.ndarray]]:
    """Outputs of ``model`` for each sample, in graph output order."""
    sess = session(model, optimize=optimize)
    names = [o.name for o in model.graph.output]
    return [sess.run(names, sample) for sample in samples]


def run_emulated(model, samples: Sequence[dict], keep_fp32: Iterable[str] = ()) -> list[list[np.ndarray]]:
    """The FP16 emulation's outputs with every node but ``keep_fp32`` converted (builds its own sessions)."""
    graph, units = switchable_fp16(model)
    sess = session(graph, optimize=False)
    names = [o.name for o in model.graph.output]
    mask = mask_for(units, keep_fp32)
    return [sess.run(names, {**sample, MASK: mask}) for sample in samples]


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
