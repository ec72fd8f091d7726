"""The FP16 ONNX graph: FP16 everywhere except the nodes kept in FP32, with FP32 inputs and outputs.

TensorRT 11 has no FP16 flag (strongly typed networks): precision comes from the graph itself, and this graph is
also the portable FP16 artifact for 8.5/10.x. Casts are inserted lazily where a tensor's producer and consumer
disagree; weights get an FP16 copy. The result is validated (checker, strict shape inference, an onnxruntime
run); a node onnxruntime or the checker rejects in FP16 is kept in FP32 and the conversion repeated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from orinkit.convert.errors import Fp16GraphError
from orinkit.convert.fp16.graphs import float_tensors, onnx_module, session

# Inputs the ONNX spec types as float32 whatever the data's type (Resize's roi and scales).
FP32_ONLY_INPUTS = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}
_NODE_IN_ERROR = re.compile(r"node(?: name:)? \(?([^\s()]+)\)?")


class _Builder:
    def __init__(self, model, keep: set[str]) -> None:
        self.onnx = onnx_module()
        self.model = model
        self.keep = keep
        self.floats = float_tensors(model)
        graph = model.graph
        self.initializers = {i.name: i for i in graph.initializer}
        self.outputs = {o.name for o in graph.output}
        self.native: dict[str, tuple[str, int]] = {}  # tensor → (name holding it natively, 16 or 32)
        self.versions: dict[tuple[str, int], str] = {}
        self.nodes: list = []
        self.new_initializers: list = []

    def get(self, tensor: str, bits: int) -> str:
        """A name holding ``tensor`` in ``bits`` precision, adding a Cast or an FP16 weight copy once."""
        name, native = self.native.get(tensor, (tensor, 32))
        if native == bits:
            return name
        key = (tensor, bits)
        if key not in self.versions:
            target = f"{tensor}__fp{bits}"
            if tensor in self.initializers and bits == 16:
                values = self.onnx.numpy_helper.to_array(self.initializers[tensor]).astype(np.float16)
                self.new_initializers.append(self.onnx.numpy_helper.from_array(values, target))
            else:
                to = self.onnx.TensorProto.FLOAT16 if bits == 16 else self.onnx.TensorProto.FLOAT
                self.nodes.append(self.onnx.helper.make_node("Cast", [name], [target], to=to,
                                                             name=f"{target}_cast"))
            self.versions[key] = target
        return self.versions[key]

    def add(self, node) -> None:
        copy = self.onnx.NodeProto()
        copy.CopyFrom(node)
        kept = node.name in self.keep
        for index, tensor in enumerate(copy.input):
            if tensor and tensor in self.floats:
                wants32 = kept or (node.op_type, index) in FP32_ONLY_INPUTS
                copy.input[index] = self.get(tensor, 32 if wants32 else 16)
        if not kept:
            self._convert_attributes(copy)
        for index, tensor in enumerate(copy.output):
            if tensor in self.floats and not kept:
                native = f"{tensor}__fp16" if tensor in self.outputs else tensor
                copy.output[index] = native
                self.native[tensor] = (native, 16)
        self.nodes.append(copy)

    def _convert_attributes(self, node) -> None:
        TP = self.onnx.TensorProto
        for attribute in node.attribute:
            if node.op_type == "Cast" and attribute.name == "to" and attribute.i == TP.FLOAT:
                attribute.i = TP.FLOAT16
            elif attribute.type == self.onnx.AttributeProto.TENSOR and attribute.t.data_type == TP.FLOAT:
                values = self.onnx.numpy_helper.to_array(attribute.t).astype(np.float16)
                attribute.t.CopyFrom(self.onnx.numpy_helper.from_array(values, attribute.t.name))

    def build(self):
        for node in self.model.graph.node:
            self.add(node)
        for output in self.model.graph.output:
            if output.name in self.floats and self.native.get(output.name, (None, 32))[1] == 16:
                native = self.native[output.name][0]
                self.nodes.append(self.onnx.helper.make_node("Cast", [native], [output.name],
                                                             to=self.onnx.TensorProto.FLOAT,
                                                             name=f"{output.name}__output_cast"))
        result = self.onnx.ModelProto()
        result.CopyFrom(self.model)
        graph = result.graph
        del graph.node[:]
        graph.node.extend(self.nodes)
        graph.initializer.extend(self.new_initializers)
        used = {name for node in self.nodes for name in node.input}
        kept_initializers = [i for i in graph.initializer if i.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept_initializers)
        del graph.value_info[:]
        return result


def _validate(model, sample: dict | None) -> None:
    onnx = onnx_module()
    onnx.checker.check_model(model)
    onnx.shape_inference.infer_shapes(model, strict_mode=True)
    sess = session(model)
    if sample is not None:
        sess.run(None, sample)


def to_fp16(model, keep_fp32: Iterable[str] = (), *, sample: dict | None = None, max_repairs: int = 16):
    """The FP16 graph of ``model`` keeping ``keep_fp32`` nodes in FP32; returns (model, nodes kept in FP32)."""
    keep = set(keep_fp32)
    names = {node.name for node in model.graph.node}
    for _ in range(max_repairs + 1):
        converted = _Builder(model, keep).build()
        try:
            _validate(converted, sample)
            return converted, tuple(n.name for n in model.graph.node if n.name in keep)
        except Exception as exc:  # checker, shape inference and onnxruntime each raise their own types
            message = str(exc)
            culprits = [m for m in _NODE_IN_ERROR.findall(message) if m in names and m not in keep]
            if not culprits:
                raise Fp16GraphError(f"the FP16 graph is invalid and no node could be blamed: {message[:300]}",
                                     hint="convert without --fp16, or report the model") from exc
            keep.update(culprits[:1])
    raise Fp16GraphError(f"the FP16 graph still failed after keeping {max_repairs} more nodes in FP32",
                         hint="convert without --fp16")
