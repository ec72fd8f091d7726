"""What the FP16 graph's validation runs in a child process (see :mod:`orinkit.convert.fp16.convert`)."""

from __future__ import annotations

import signal

from orinkit.core.failpoints import reach
from orinkit.core.optional import require


def _fp16_node_of_type(model, op_type: str) -> bool:
    onnx = require("onnx")
    halves = {i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16}
    halves |= {n.output[0] for n in model.graph.node
               if n.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16 for a in n.attribute)}
    for node in model.graph.node:
        if node.op_type == "Cast":
            continue
        halves_in = any(name in halves for name in node.input)
        if halves_in:
            halves.update(node.output)
            if node.op_type == op_type:
                return True
    return False


def _crashes_on(model, spec: str) -> bool:
    kind, _, opset = spec.partition("@")
    if kind != "any":
        return _fp16_node_of_type(model, kind)
    onnx = require("onnx")
    versions = {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")}
    halves = any(v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
                 for v in (*model.graph.input, *model.graph.output, *model.graph.value_info))
    halves = halves or any(n.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16
                                                       for a in n.attribute) for n in model.graph.node)
    halves = halves or any(i.data_type == onnx.TensorProto.FLOAT16 for i in model.graph.initializer)
    return halves and (not opset or int(opset) in versions)


def check_file(path: str, sample: dict | None) -> str | None:
    """None when the ONNX file at ``path`` passes the checker, strict shape inference, an onnxruntime session
    with its default optimisations and a run on ``sample``; otherwise the first failure, as one line."""
    onnx = require("onnx")
    ort = require("onnxruntime")
    model = onnx.load(path)
    # Test hook standing for a crash of onnxruntime's optimiser on an FP16 node of one op type (OP), or on any FP16
    # node of a graph at one opset (any@OPSET: every FP16 form of one exporter's graph crashes; any: every one).
    reach("fp16-validate-crash", signal=signal.SIGSEGV, when=lambda spec: _crashes_on(model, spec))
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        return f"onnx.checker: {exc}".splitlines()[0]
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as exc:
        return f"shape inference: {exc}".splitlines()[0]
    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        return f"onnxruntime session: {exc}".splitlines()[0]
    if sample is not None:
        declared = {i.name for i in session.get_inputs()}
        try:
            session.run(None, {k: v for k, v in sample.items() if k in declared})
        except Exception as exc:
            return f"onnxruntime run: {exc}".splitlines()[0]
    return None
