"""Small graph helpers shared by the emulation, the range analysis and the FP16 conversion."""

from __future__ import annotations

from orinkit.core.optional import require


def onnx_module():
    return require("onnx")


def float_tensors(model) -> set[str]:
    """Names of every FP32 tensor in the graph (inputs, intermediates, outputs, initializers)."""
    onnx = onnx_module()
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    names = {v.name for v in (*graph.input, *graph.value_info, *graph.output)
             if v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}
    names |= {i.name for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT}
    return names


def float_producers(model) -> list[str]:
    """Names of the nodes that produce at least one FP32 tensor, in graph (topological) order."""
    floats = float_tensors(model)
    return [node.name for node in model.graph.node if any(o in floats for o in node.output)]


def session(model, *, optimize: bool = True):
    """An onnxruntime CPU session for an in-memory model."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if not optimize:
        # Fusions would remove the Cast pairs that carry the FP16 rounding.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def switch_nodes(mask: str, index: int, switch: str) -> list:
    """Nodes that read entry ``index`` of the boolean graph input ``mask`` into the scalar tensor ``switch``: how
    one graph serves every set of nodes a search tries (the FP16 emulation's and the INT8 gate's, which ``Where``
    nodes then follow)."""
    onnx = onnx_module()
    at = onnx.helper.make_tensor(f"{switch}_index", onnx.TensorProto.INT64, [], [index])
    return [onnx.helper.make_node("Constant", [], [f"{switch}_index"], value=at, name=f"{switch}_index_const"),
            onnx.helper.make_node("Gather", [mask, f"{switch}_index"], [switch], axis=0, name=f"{switch}_gather")]
