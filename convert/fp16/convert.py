"""The FP16 ONNX graph: FP16 everywhere except the nodes kept in FP32, with FP32 inputs and outputs.

TensorRT 11 has no FP16 flag (strongly typed networks): precision comes from the graph itself, and this graph is
also the portable FP16 artifact for 8.5/10.x. Casts are inserted lazily where a tensor's producer and consumer
disagree; weights get an FP16 copy. Its validation, and the repair of a graph that fails it, are in
:mod:`orinkit.convert.fp16.repair`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from orinkit.convert.fp16.graphs import float_tensors, onnx_module

# Inputs the ONNX spec types as float32 whatever the data's type (Resize's roi and scales).
FP32_ONLY_INPUTS = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}


@dataclass
class Fp16Graph:
    model: object  # onnx.ModelProto
    types: dict[str, int]  # every tensor's element type
    origins: list[str | None]  # per node of ``model``: the original node it was made for
    shapes: dict[str, object]  # the FP32 model's inferred shapes (TensorShapeProto) by tensor name

    def shape_of(self, name: str):
        """A tensor's shape: its own, or that of the FP32 tensor it holds in another precision."""
        for suffix in ("__fp16", "__fp32"):
            if name.endswith(suffix) and name not in self.shapes:
                name = name[: -len(suffix)]
        return self.shapes.get(name)


class _Builder:
    def __init__(self, model, keep: set[str]) -> None:
        self.onnx = onnx_module()
        self.model = model
        self.keep = keep
        self.floats = float_tensors(model)
        inferred = self.onnx.shape_inference.infer_shapes(model).graph
        values = (*inferred.input, *inferred.value_info, *inferred.output)
        self.types = {v.name: v.type.tensor_type.elem_type for v in values}
        self.shapes = {v.name: v.type.tensor_type.shape for v in values if v.type.tensor_type.HasField("shape")}
        self.types.update({i.name: i.data_type for i in model.graph.initializer})
        graph = model.graph
        self.initializers = {i.name: i for i in graph.initializer}
        self.outputs = {o.name for o in graph.output}
        self.native: dict[str, tuple[str, int]] = {}  # tensor → (name holding it natively, 16 or 32)
        self.versions: dict[tuple[str, int], str] = {}
        self.nodes: list = []
        self.origins: list[str | None] = []
        self.new_initializers: list = []
        self.current: str | None = None

    def _emit(self, node) -> None:
        self.nodes.append(node)
        self.origins.append(self.current)

    def get(self, tensor: str, bits: int) -> str:
        """A name holding ``tensor`` in ``bits`` precision, adding a Cast or an FP16 weight copy once."""
        name, native = self.native.get(tensor, (tensor, 32))
        if native == bits:
            return name
        key = (tensor, bits)
        if key not in self.versions:
            target = f"{tensor}__fp{bits}"
            TP = self.onnx.TensorProto
            if tensor in self.initializers and bits == 16:
                values = self.onnx.numpy_helper.to_array(self.initializers[tensor]).astype(np.float16)
                self.new_initializers.append(self.onnx.numpy_helper.from_array(values, target))
            else:
                to = TP.FLOAT16 if bits == 16 else TP.FLOAT
                self._emit(self.onnx.helper.make_node("Cast", [name], [target], to=to, name=f"{target}_cast"))
            self.types[target] = TP.FLOAT16 if bits == 16 else TP.FLOAT
            self.versions[key] = target
        return self.versions[key]

    def add(self, node) -> None:
        self.current = node.name
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
                self.types[native] = self.onnx.TensorProto.FLOAT16
        self._emit(copy)

    def _convert_attributes(self, node) -> None:
        TP = self.onnx.TensorProto
        for attribute in node.attribute:
            if node.op_type == "Cast" and attribute.name == "to" and attribute.i == TP.FLOAT:
                attribute.i = TP.FLOAT16
            elif attribute.type == self.onnx.AttributeProto.TENSOR and attribute.t.data_type == TP.FLOAT:
                values = self.onnx.numpy_helper.to_array(attribute.t).astype(np.float16)
                attribute.t.CopyFrom(self.onnx.numpy_helper.from_array(values, attribute.t.name))

    def build(self) -> Fp16Graph:
        for node in self.model.graph.node:
            self.add(node)
        producers = {o: n.name for n in self.model.graph.node for o in n.output}
        for output in self.model.graph.output:
            if output.name in self.floats and self.native.get(output.name, (None, 32))[1] == 16:
                self.current = producers.get(output.name)
                native = self.native[output.name][0]
                self._emit(self.onnx.helper.make_node("Cast", [native], [output.name],
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
        return Fp16Graph(result, self.types, self.origins, self.shapes)


def build_fp16(model, keep_fp32: Iterable[str] = ()) -> Fp16Graph:
    return _Builder(model, set(keep_fp32)).build()


def prefix_graph(built: Fp16Graph, count: int):
    """The first ``count`` nodes of ``built`` as a graph of their own, whose outputs are what they leave unused."""
    onnx = onnx_module()
    source = built.model
    nodes = list(source.graph.node[:count])
    consumed = {name for node in nodes for name in node.input}
    graph_outputs = {o.name for o in source.graph.output}
    outputs = [name for node in nodes for name in node.output
               if name and (name not in consumed or name in graph_outputs)]
    used = consumed | set(outputs)
    values = []
    for name in outputs:
        value = onnx.helper.make_tensor_value_info(name, built.types.get(name, onnx.TensorProto.FLOAT), None)
        shape = built.shape_of(name)
        if shape is not None:
            value.type.tensor_type.shape.CopyFrom(shape)
        else:
            value.type.tensor_type.ClearField("shape")
        values.append(value)
    graph = onnx.helper.make_graph(nodes, f"{source.graph.name}_prefix_{count}", list(source.graph.input), values,
                                   initializer=[i for i in source.graph.initializer if i.name in used])
    model = onnx.helper.make_model(graph, opset_imports=list(source.opset_import), ir_version=source.ir_version)
    return model
