"""Which nodes cannot compute in FP16 at all, known before any graph is built: ONNX's own operator schemas.

An op whose ONNX type constraint admits float32 but not float16 for an input it reads (Range: T in float, double,
int16/32/64) makes the FP16 graph invalid wherever it takes an FP16 tensor. The repair
(:mod:`orinkit.convert.fp16.repair`) would find each such node in the end, one failing onnxruntime session and a
bisection of the graph at a time (the six Range nodes of a YOLOv8 export took 11 s of a 41 s conversion); read
from the schemas, they are kept in FP32 up front. What onnxruntime's CPU provider lacks a kernel for is not
listed: its session inserts the Casts itself.
"""

from __future__ import annotations

from functools import cache

from orinkit.convert.fp16.graphs import float_tensors, onnx_module

FLOAT, HALF = "tensor(float)", "tensor(float16)"


def _opset(model, domain: str) -> int | None:
    aliases = ("", "ai.onnx") if domain in ("", "ai.onnx") else (domain,)
    return next((o.version for o in model.opset_import if o.domain in aliases), None)


@cache
def _float32_only_inputs(op_type: str, version: int, domain: str) -> tuple[tuple[int, bool], ...] | None:
    """The schema's inputs as (index, the node must stay FP32 for it); None for an op unknown to onnx. An input
    typed float32-only whose type the outputs share (Range's T) keeps the node in FP32; one typed on its own
    (Resize's scales) only stays FP32 itself, which the conversion does already (FP32_ONLY_INPUTS)."""
    defs = onnx_module().defs
    try:
        schema = defs.get_schema(op_type, version, domain)
    except Exception:  # noqa: BLE001 - a custom domain or an op newer than this onnx: nothing known in advance
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    produced = {formal.type_str for formal in schema.outputs}
    result = []
    for index, formal in enumerate(schema.inputs):
        types = allowed.get(formal.type_str, {formal.type_str})
        only32 = FLOAT in types and HALF not in types and formal.type_str in produced
        result.append((index, only32))
        if formal.option == defs.OpSchema.FormalParameterOption.Variadic:
            result.append((-1, only32))  # every later input shares it
            break
    return tuple(result)


def float32_only(model) -> dict[str, str]:
    """Nodes that read a floating tensor through an input ONNX types without float16: name → op type."""
    floats = float_tensors(model)
    found: dict[str, str] = {}
    for node in model.graph.node:
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        version = _opset(model, domain)
        if version is None:
            continue
        formal = _float32_only_inputs(node.op_type, version, domain)
        if not formal:
            continue
        flags = dict(formal)
        for index, name in enumerate(node.input):
            only32 = flags.get(index, flags.get(-1, False))
            if name and name in floats and only32:
                found[node.name] = node.op_type
                break
    return found
