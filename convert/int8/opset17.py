"""ModelOpt's Q/DQ graph (opset 19 and later) written at opset 17, the newest TensorRT 8.5's parser takes (JetPack 5).

``onnx.version_converter`` has no adapter down from opset 18 for Split (nor for the Reduce ops), which every
YOLO export holds: it died with "No Adapter From Version $18 for Split" after a 4-minute INT8 run. The changes
between 17 and 21 are few and known, so each node is rewritten here by a table:

* Split 18 added ``num_outputs``: dropped (opset 13's Split without sizes splits evenly, as ``num_outputs`` does
  when the axis divides); explicit sizes are written where the axis is known and does not divide.
* ReduceMax/Min/Mean/Prod/L1/L2/LogSum/LogSumExp/SumSquare 18 moved ``axes`` from an attribute to an input:
  a constant input goes back to the attribute; ``noop_with_empty_axes`` (new in 18) is dropped when it changes
  nothing.
* Ops that only gained element types or attributes with neutral defaults in 18-21 (Cast, Constant, Q/DQ,
  Reshape, Shape, Pad, Resize, ...) are taken as they are, once their new attributes are checked to be unset
  or at their default; a new value that opset 17 cannot express is refused by name.
* Anything else whose schema changed after 17 is refused by name: :class:`OpsetConversionError`, never a
  traceback.
"""

from __future__ import annotations

import math

import numpy as np

from orinkit.convert.errors import OpsetConversionError
from orinkit.convert.fp16.graphs import onnx_module

REDUCE_AXES_INPUT = {"ReduceMax", "ReduceMin", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                     "ReduceLogSumExp", "ReduceSumSquare"}
# Attributes that opsets 18-21 added to ops otherwise unchanged, with the value that means "as in opset 17".
NEUTRAL = {
    "Cast": {"saturate": 1}, "CastLike": {"saturate": 1},
    "QuantizeLinear": {"saturate": 1, "block_size": 0, "output_dtype": 0},
    "DequantizeLinear": {"block_size": 0},
    "Resize": {"antialias": 0, "keep_aspect_ratio_policy": b"stretch"},
    "AveragePool": {"dilations": None}, "LpPool": {"ceil_mode": 0},
    "ScatterElements": {"reduction": (b"none", b"add", b"mul")}, "ScatterND": {"reduction": (b"none", b"add", b"mul")},
    "Pad": {"mode": (b"constant", b"reflect", b"edge")},
}
# Ops whose later versions only widened their element types (and the attributes above).
TYPES_ONLY = {"Cast", "CastLike", "Constant", "QuantizeLinear", "DequantizeLinear", "Reshape", "Shape", "Size",
              "Identity", "Equal", "Squeeze", "Unsqueeze", "Transpose", "Flatten", "ConstantOfShape", "Pad",
              "Resize", "AveragePool", "LpPool", "ScatterElements", "ScatterND", "ReduceSum", "IsInf", "IsNaN",
              "GridSample"}


def _opset(model) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


def _changed_after(op_type: str, version: int, target: int) -> bool:
    defs = onnx_module().defs
    try:
        now = defs.get_schema(op_type, version).since_version
    except Exception:  # noqa: BLE001 - an op unknown to this onnx release: judged by the table alone
        return True
    try:
        then = defs.get_schema(op_type, target).since_version
    except Exception:  # noqa: BLE001 - the op did not exist at the target opset
        return True
    return now != then


def _attribute(node, name):
    return next((a for a in node.attribute if a.name == name), None)


def _value(attribute):
    helper = onnx_module().helper
    return None if attribute is None else helper.get_attribute_value(attribute)


def _drop(node, name) -> None:
    attribute = _attribute(node, name)
    if attribute is not None:
        node.attribute.remove(attribute)


class _Downgrade:
    def __init__(self, model, target: int) -> None:
        onnx = onnx_module()
        self.onnx, self.model, self.target = onnx, model, target
        self.version = _opset(model)
        graph = model.graph
        self.constants = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.constants[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t)
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
        except Exception:  # noqa: BLE001 - shapes only refine Split; without them the even split is kept
            inferred = graph
        self.shapes = {v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
                       for v in (*inferred.input, *inferred.value_info, *inferred.output)
                       if v.type.tensor_type.HasField("shape")}
        self.new_initializers: list = []

    def refuse(self, node, why: str):
        raise OpsetConversionError(
            f"the INT8 graph cannot be written at opset {self.target} for TensorRT 8.5: node {node.name} "
            f"({node.op_type}, opset {self.version}) {why}",
            hint="build on TensorRT 10/11 with model.int8.onnx, or keep that node out of INT8 (--int8-exclude) and "
                 "export the model at opset 17")

    def split(self, node) -> None:
        count = _value(_attribute(node, "num_outputs"))
        _drop(node, "num_outputs")
        if count is None or (len(node.input) > 1 and node.input[1]):
            return  # explicit sizes are an input at opset 13 as at 18
        axis = _value(_attribute(node, "axis")) or 0
        shape = self.shapes.get(node.input[0])
        size = None if shape is None else shape[axis]
        if size is None or size % count == 0:
            return  # an even split: opset 13's Split without sizes does the same
        chunk = math.ceil(size / count)
        sizes = np.array([chunk] * (count - 1) + [size - chunk * (count - 1)], dtype=np.int64)
        name = f"{node.name}__split_sizes"
        self.new_initializers.append(self.onnx.numpy_helper.from_array(sizes, name))
        del node.input[1:]
        node.input.append(name)

    def reduce(self, node) -> None:
        noop = _value(_attribute(node, "noop_with_empty_axes")) or 0
        _drop(node, "noop_with_empty_axes")
        axes_input = node.input[1] if len(node.input) > 1 else ""
        if not axes_input:
            if noop:
                node.op_type = "Identity"
                del node.attribute[:]
            return
        if axes_input not in self.constants:
            self.refuse(node, "reads its axes from a computed tensor, which opset 17 cannot take as an attribute")
        axes = [int(a) for a in np.asarray(self.constants[axes_input]).reshape(-1)]
        del node.input[1:]
        if not axes and noop:
            node.op_type = "Identity"
            del node.attribute[:]
            return
        if axes:
            node.attribute.append(self.onnx.helper.make_attribute("axes", axes))

    def neutral(self, node) -> None:
        for name, neutral in NEUTRAL.get(node.op_type, {}).items():
            attribute = _attribute(node, name)
            if attribute is None:
                continue
            value = _value(attribute)
            allowed = neutral if isinstance(neutral, tuple) else (neutral,)
            if neutral is None or value not in allowed:
                self.refuse(node, f"sets {name}={value!r}, which opset {self.target} does not have")
            if neutral is not None and not isinstance(neutral, tuple):
                node.attribute.remove(attribute)
        if node.op_type == "Resize":
            if _attribute(node, "axes") is not None:
                self.refuse(node, "resizes named axes only (axes), which opset 17 does not have")
            mode = _value(_attribute(node, "coordinate_transformation_mode"))
            if mode == b"half_pixel_symmetric":
                self.refuse(node, "uses coordinate_transformation_mode half_pixel_symmetric (opset 19)")
        if node.op_type == "Pad" and len(node.input) > 3 and node.input[3]:
            self.refuse(node, "pads named axes only (its axes input, opset 18)")
        if any(a.type in (self.onnx.AttributeProto.GRAPH, self.onnx.AttributeProto.GRAPHS) for a in node.attribute):
            self.refuse(node, "holds a sub-graph, which this conversion does not rewrite")

    def run(self):
        for node in self.model.graph.node:
            if node.domain not in ("", "ai.onnx") or not _changed_after(node.op_type, self.version, self.target):
                continue
            if node.op_type == "Split":
                self.split(node)
            elif node.op_type in REDUCE_AXES_INPUT:
                self.reduce(node)
            elif node.op_type in TYPES_ONLY:
                self.neutral(node)
            else:
                self.refuse(node, f"has no opset-{self.target} form known to orinkit")
        self.model.graph.initializer.extend(self.new_initializers)
        for entry in self.model.opset_import:
            if entry.domain in ("", "ai.onnx"):
                entry.version = self.target
        self.model.ir_version = min(self.model.ir_version, 8)  # opset 17's IR (TensorRT 8.5's parser reads 8)
        del self.model.graph.value_info[:]
        try:
            self.onnx.checker.check_model(self.model)
        except Exception as exc:  # noqa: BLE001 - any checker failure is this conversion's, said in one line
            why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
            raise OpsetConversionError(f"the INT8 graph written at opset {self.target} is not valid ONNX ({why})",
                                       hint="build on TensorRT 10/11 with model.int8.onnx, and report the model"
                                       ) from exc
        return self.model


def downgrade(model, target: int = 17):
    """A copy of ``model`` at opset ``target`` (17 by default), rewritten node by node (see the module's text);
    ``model`` itself is left as it is. A model at ``target`` or below comes back unchanged."""
    onnx = onnx_module()
    if _opset(model) <= target:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return _Downgrade(copy, target).run()
