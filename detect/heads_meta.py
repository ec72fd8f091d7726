"""What a detector's ONNX file says about itself: tensor shapes, and the metadata Ultralytics writes.

Ultralytics' exporter puts ``str(value)`` of each entry into ``metadata_props``: ``names`` (a Python dict literal),
``stride`` (the largest, e.g. ``32``), ``imgsz`` (``[640, 640]``), ``task`` (``detect``, ``segment``, ``pose``,
``obb``, ``classify``), ``batch``, ``args`` (the export arguments, ``nms`` among them). The YOLOv5 repository writes
only ``stride`` and ``names``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from orinkit.detect.errors import DetectInputError
from orinkit.detect.labels import parse_metadata_names


@dataclass(frozen=True)
class TensorFacts:
    name: str
    shape: tuple | None  # ints, None for a dynamic size; None when the rank is unknown
    integer: bool  # an integer element type (EfficientNMS' counts and classes)

    def describe(self) -> str:
        if self.shape is None:
            return f"{self.name} [?]"
        return f"{self.name} [{', '.join('?' if d is None else str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class ModelFacts:
    inputs: tuple[TensorFacts, ...]
    outputs: tuple[TensorFacts, ...]
    metadata: dict = field(default_factory=dict)  # the raw metadata_props
    names: tuple[str, ...] | None = None  # from metadata 'names'
    task: str | None = None
    imgsz: tuple[int, int] | None = None  # (height, width)
    export_nms: bool = False  # Ultralytics args: nms=True (NMS inside the graph)

    @property
    def ultralytics(self) -> bool:
        return self.task is not None or "imgsz" in self.metadata

    def describe_outputs(self) -> str:
        return ", ".join(output.describe() for output in self.outputs) or "none"


_INTEGER_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}  # onnx.TensorProto UINT8..INT64, UINT32, UINT64


def _tensor_facts(value_info) -> TensorFacts:
    kind = value_info.type.tensor_type
    shape = None
    if kind.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in kind.shape.dim)
    return TensorFacts(value_info.name, shape, kind.elem_type in _INTEGER_TYPES)


def _literal(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _imgsz(text: str | None) -> tuple[int, int] | None:
    value = _literal(text) if text else None
    if isinstance(value, int) and value > 0:
        return value, value
    if isinstance(value, (list, tuple)) and len(value) in (1, 2) and all(isinstance(v, int) and v > 0 for v in value):
        return (value[0], value[-1])
    return None


def load_model(model):
    """An ``onnx.ModelProto`` as it is, or one read from a path (weights left out: only shapes are needed)."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(str(model), load_external_data=False)
    except FileNotFoundError:
        raise DetectInputError(f"no model file at {model}", hint="check the path") from None
    except Exception as exc:  # noqa: BLE001 - protobuf signals a file that is no ONNX with several types
        raise DetectInputError(f"{model} is not an ONNX model onnx can read: {str(exc)[:120]}",
                               hint="give the .onnx file the exporter wrote") from None


def model_facts(model) -> ModelFacts:
    model = load_model(model)
    graph = model.graph
    facts_outputs = tuple(_tensor_facts(output) for output in graph.output)
    if any(output.shape is None for output in facts_outputs):
        # Some exporters leave output shapes out: shape inference fills them from the graph.
        import onnx

        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
            facts_outputs = tuple(_tensor_facts(output) for output in inferred.output)
        except Exception:  # noqa: BLE001 - inference is best effort; unknown shapes are reported as such
            pass
    initializers = {init.name for init in graph.initializer}
    inputs = tuple(_tensor_facts(i) for i in graph.input if i.name not in initializers)
    metadata = {prop.key: prop.value for prop in model.metadata_props}
    args = _literal(metadata.get("args", "")) or {}
    names = parse_metadata_names(metadata["names"]) if "names" in metadata else None
    return ModelFacts(inputs=inputs, outputs=facts_outputs, metadata=metadata, names=names,
                      task=metadata.get("task") or None, imgsz=_imgsz(metadata.get("imgsz")),
                      export_nms=bool(isinstance(args, dict) and args.get("nms")))
