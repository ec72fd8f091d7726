"""Reading and editing the Q/DQ graphs ModelOpt writes: which nodes compute in INT8, switching a node's Q/DQ pairs
off and on without recalibrating (the scales stay valid, only the node reads the float tensor again), and the forms
older TensorRT needs (FP32 scales at opset 17; a calibration cache for DLA's implicit INT8).

A node is *quantized* when one of its inputs is the output of a DequantizeLinear fed by a QuantizeLinear: that is
the pattern TensorRT fuses into an INT8 kernel. Turning a node back means reading each such input's float source
(the Q's input) directly; the pair itself stays for the node's other consumers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np

from orinkit.convert.fp16.graphs import onnx_module, switch_nodes

QUANTIZE, DEQUANTIZE = "QuantizeLinear", "DequantizeLinear"
COMPUTE_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
SWITCH = "orinkit_int8_mask"
# TensorRT 8.5's ONNX parser takes Q/DQ only up to opset 17 (JetPack 5).
TRT85_OPSET = 17


def _dq_sources(graph) -> dict[str, str]:
    """DequantizeLinear output → the float tensor its QuantizeLinear quantized."""
    q_inputs = {n.output[0]: n.input[0] for n in graph.node if n.op_type == QUANTIZE}
    return {n.output[0]: q_inputs[n.input[0]] for n in graph.node
            if n.op_type == DEQUANTIZE and n.input[0] in q_inputs}


def _copy(model):
    """(a copy of ``model`` to edit, its DQ output → float source map)."""
    result = onnx_module().ModelProto()
    result.CopyFrom(model)
    return result, _dq_sources(result.graph)


def quantized_nodes(model) -> list[str]:
    """Names of the nodes (not Q/DQ themselves) that read at least one Q→DQ output, in graph order."""
    sources = _dq_sources(model.graph)
    return [n.name for n in model.graph.node if n.op_type not in (QUANTIZE, DEQUANTIZE)
            and any(i in sources for i in n.input)]


def int8_compute(model) -> tuple[list[str], list[str]]:
    """(Conv/MatMul/Gemm nodes whose data input is quantized, all Conv/MatMul/Gemm nodes)."""
    sources = _dq_sources(model.graph)
    compute = [n for n in model.graph.node if n.op_type in COMPUTE_OPS]
    return [n.name for n in compute if n.input and n.input[0] in sources], [n.name for n in compute]


def nodes_to_outputs(graph) -> list:
    """The nodes on the way back from each graph output to the last compute node on its path, that one included: a
    net's head (the attention guess keeps them out of INT8, the detector's guess reads its last convolutions from
    them). A Shape carries no values to an output, so the walk does not go through one."""
    producer = {output: node for node in graph.node for output in node.output}
    found, seen = [], set()
    stack = [o.name for o in graph.output]
    while stack:
        node = producer.get(stack.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        found.append(node)
        if node.op_type not in COMPUTE_OPS and node.op_type != "Shape":
            stack.extend(i for i in node.input if i)
    return found


def switchable(model) -> tuple[object, list[str]]:
    """``model`` with a boolean input :data:`SWITCH` (one entry per quantized node): entry i False makes node i
    read its float inputs instead of the dequantized ones. One session then serves every exclusion set the search
    tries, as the FP16 emulation's mask does."""
    onnx = onnx_module()
    result, sources = _copy(model)
    graph = result.graph
    units = quantized_nodes(result)
    index = {name: i for i, name in enumerate(units)}
    nodes = []
    for node in graph.node:
        if node.name in index:
            switch = f"{node.name}__int8"
            nodes += switch_nodes(SWITCH, index[node.name], switch)
            for i, name in enumerate(node.input):
                if name in sources:
                    chosen = f"{name}__for_{node.name}"
                    nodes.append(onnx.helper.make_node("Where", [switch, name, sources[name]], [chosen],
                                                       name=f"{chosen}_where"))
                    node.input[i] = chosen
        nodes.append(node)
    graph.input.append(onnx.helper.make_tensor_value_info(SWITCH, onnx.TensorProto.BOOL, [len(units)]))
    copied = list(nodes)
    del graph.node[:]
    graph.node.extend(copied)
    return result, units


def constants_as_initializers(model) -> int:
    """Move ``model``'s Constant nodes that hold a tensor a Conv/MatMul/Gemm reads into initializers, in place;
    returns how many moved.

    ModelOpt scales a Conv/MatMul weight per output channel only when the weight is an initializer: a weight that a
    Constant node produces (paddle2onnx's exports: 32 of a PP-OCRv4 recogniser's 38 convolutions and its MatMuls)
    gets one scale for the whole tensor, and with every node INT8 the text recogniser then changed all 48 held-out
    lines where per-channel scales change 13. The values are the same; only where they live moves."""
    onnx = onnx_module()
    graph = model.graph
    outputs = {o.name for o in graph.output}
    # Only what a compute node reads: a Constant elsewhere (shapes, scalars of a Mul) stays as it is, so ModelOpt
    # places its Q/DQ pairs as before on every other graph.
    weights = {name for n in graph.node if n.op_type in COMPUTE_OPS for name in n.input}
    moved = []
    for node in graph.node:
        if node.op_type != "Constant" or node.output[0] in outputs or node.output[0] not in weights:
            continue
        value = next((a.t for a in node.attribute if a.name == "value" and a.type == onnx.AttributeProto.TENSOR),
                     None)
        if value is None:  # value_float, value_ints...: scalars and shapes, never weights
            continue
        tensor = onnx.TensorProto()
        tensor.CopyFrom(value)
        tensor.name = node.output[0]
        graph.initializer.append(tensor)
        moved.append(node)
    for node in moved:
        graph.node.remove(node)
    return len(moved)


def switch_for(units: Sequence[str], excluded: Iterable[str]) -> np.ndarray:
    """The :data:`SWITCH` value that keeps every quantized node in INT8 except ``excluded``."""
    off = set(excluded)
    return np.array([name not in off for name in units], dtype=bool)


def without_qdq(model, excluded: Iterable[str]):
    """A copy of ``model`` where the ``excluded`` nodes read their float inputs, and the Q/DQ pairs no node reads
    any more are removed: the graph the gate judged with those nodes switched off."""
    result, sources = _copy(model)
    graph = result.graph
    off = set(excluded)
    for node in graph.node:
        if node.name in off:
            for i, name in enumerate(node.input):
                if name in sources:
                    node.input[i] = sources[name]
    _drop_unread(graph)
    return result


def _drop_unread(graph) -> None:
    outputs = {o.name for o in graph.output}
    while True:
        read = {i for n in graph.node for i in n.input} | outputs
        dead = [n for n in graph.node if n.op_type in (QUANTIZE, DEQUANTIZE, "Constant")
                and not any(o in read for o in n.output)]
        if not dead:
            return
        for node in dead:
            graph.node.remove(node)


def to_opset17(model):
    """The FP32-scale Q/DQ graph at opset 17 for TensorRT 8.5 (JetPack 5); FP16 scales have no opset-17 form.
    Rewritten node by node (:mod:`orinkit.convert.int8.opset17`): onnx.version_converter has no adapter down
    from opset 18 for Split or the Reduce ops."""
    from orinkit.convert.errors import OpsetConversionError
    from orinkit.convert.int8.opset17 import downgrade

    onnx = onnx_module()
    for init in model.graph.initializer:
        if init.name.endswith("scale") and init.data_type != onnx.TensorProto.FLOAT:
            raise OpsetConversionError(f"the Q/DQ scale {init.name} is not FP32, which opset 17 requires",
                                       hint="turn the graph FP32 first (orinkit.convert.int8.qdq.to_fp32)")
    return downgrade(model, TRT85_OPSET)


def _constants(graph) -> dict[str, np.ndarray]:
    onnx = onnx_module()
    values = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = onnx.numpy_helper.to_array(attribute.t)
    return values


def activation_scales(model) -> dict[str, float]:
    """The scale of every quantized activation (a Q whose input is not a weight), by the float tensor's name."""
    graph = model.graph
    values = _constants(graph)
    scales = {}
    for node in graph.node:
        if node.op_type == QUANTIZE and node.input[0] not in values:
            scale = np.asarray(values[node.input[1]], dtype=np.float32)
            if scale.size == 1:  # activations are per-tensor; per-channel scales belong to weights
                scales[node.input[0]] = float(scale.reshape(()))
    return scales


def calibration_cache(scales: dict[str, float], tensorrt_version: str) -> str:
    """TensorRT's calibration cache text (IInt8EntropyCalibrator2's format): a header naming the version as
    getInferLibVersion() numbers it, then one ``tensor: big-endian float32 in hex`` per tensor. The Q/DQ scale is
    the cache's scale (amax / 127), so the cache carries ModelOpt's calibration to DLA's implicit INT8."""
    major, minor, patch = (list(int(p) for p in tensorrt_version.split(".")[:3]) + [0, 0])[:3]
    number = major * 1000 + minor * 100 + patch if major < 10 else major * 10000 + minor * 100 + patch
    lines = [f"TRT-{number}-EntropyCalibration2"]
    lines += [f"{name}: {struct.pack('>f', value).hex()}" for name, value in sorted(scales.items())]
    return "\n".join(lines) + "\n"


def to_fp32(model):
    """The FP16-high-precision Q/DQ graph ModelOpt writes, turned FP32 throughout (scales, weights, Casts): the
    form TensorRT 8.5 takes. FP16 values are exact in FP32, so the scales are unchanged."""
    onnx = onnx_module()
    half, full = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    result = onnx.ModelProto()
    result.CopyFrom(model)
    graph = result.graph

    def widen(tensor) -> None:
        if tensor.data_type == half:
            tensor.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor).astype(np.float32),
                                                         tensor.name))

    for init in graph.initializer:
        widen(init)
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:
                widen(attribute.t)
            elif node.op_type == "Cast" and attribute.name == "to" and attribute.i == half:
                attribute.i = full
    for value in (*graph.input, *graph.output):
        if value.type.tensor_type.elem_type == half:
            value.type.tensor_type.elem_type = full
    del graph.value_info[:]
    return result
