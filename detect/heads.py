"""Which detection head an ONNX graph ends in, read from its output shapes and the metadata Ultralytics writes.

================  =============================================  ==========================================
kind              outputs                                        where from
================  =============================================  ==========================================
``yolov8``        ``[B, 4+nc, N]`` cx cy w h (pixels), scores    Ultralytics YOLOv8, YOLO11, YOLOv5u, v9
``yolov5``        ``[B, N, 5+nc]`` cx cy w h, objectness, cls    the YOLOv5 repository (3 anchors a cell)
``end2end``       ``[B, K, 6]`` x1 y1 x2 y2 score class          YOLOv10, YOLO26, Ultralytics ``nms=True``
``yolox``         ``[B, N, 5+nc]`` raw grid offsets              YOLOX (one cell per row: N = grid cells)
``efficient_nms`` num_dets, boxes, scores, classes               TensorRT's EfficientNMS in the graph
``detr``          boxes ``[B, Q, 4]`` (0..1 cx cy w h) + logits  DETR, RT-DETR, D-FINE (Ultralytics' RT-DETR:
                                                                 one ``[B, Q, 4+nc]`` output)
================  =============================================  ==========================================

YOLOv5 and YOLOX rows look alike; their count tells them apart: YOLOX has one row per grid cell at strides 8, 16
and 32 (8400 at 640x640), YOLOv5 three (25200). A YOLOX exported with its decode inside the graph gives pixel
boxes like YOLOv5's: pass ``head="yolov5"`` for it. Segmentation, pose, OBB and classification models are refused
by name (``UnsupportedTaskError``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from orinkit.detect.errors import DetectError, DetectInputError, UnrecognizedHeadError, UnsupportedTaskError
from orinkit.detect.heads_meta import ModelFacts, TensorFacts, model_facts
from orinkit.detect.labels import check_count, load_labels

HEAD_KINDS = ("yolov8", "yolov5", "end2end", "yolox", "efficient_nms", "detr")
YOLOX_STRIDES = ((8, 16, 32), (8, 16, 32, 64))
DEFAULT_SIZE = (640, 640)  # where neither the graph nor the metadata says: Ultralytics' and YOLOX's default
_REFUSED_TASKS = {"segment": "an instance segmentation", "pose": "a pose estimation",
                  "obb": "an oriented-box (OBB) detection", "classify": "a classification"}
# The metadata key edge-convert --head writes; recognize() honours it as if head= were given.
HEAD_KEY = "orinkit_head"
_HEAD_HINT = f"if it is a detector, name its head: --task detect --head KIND (one of {', '.join(HEAD_KINDS)})"


@dataclass(frozen=True)
class Head:
    kind: str  # one of HEAD_KINDS
    input_name: str
    input_size: tuple[int, int]  # (height, width) the model takes
    outputs: tuple[str, ...]  # the output names decode() reads, in its order
    num_classes: int  # 0 where the graph does not say (NMS inside, no names given)
    names: tuple[str, ...]  # class names by class id
    strides: tuple[int, ...] = ()  # YOLOX grid strides

    def __post_init__(self) -> None:
        if self.kind not in HEAD_KINDS:
            raise DetectInputError(f"unknown head kind {self.kind!r}", hint=f"use one of {', '.join(HEAD_KINDS)}")
        object.__setattr__(self, "input_size", tuple(int(v) for v in self.input_size))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))
        object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))

    @property
    def needs_nms(self) -> bool:
        return self.kind in ("yolov8", "yolov5", "yolox")

    def as_dict(self) -> dict:
        return {"kind": self.kind, "input_name": self.input_name, "input_size": list(self.input_size),
                "outputs": list(self.outputs), "num_classes": self.num_classes, "names": list(self.names),
                "strides": list(self.strides)}

    @classmethod
    def from_dict(cls, data) -> Head:
        try:
            return cls(kind=data["kind"], input_name=data["input_name"], input_size=tuple(data["input_size"]),
                       outputs=tuple(data["outputs"]), num_classes=int(data["num_classes"]),
                       names=tuple(data.get("names", ())), strides=tuple(data.get("strides", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise DetectInputError(f"a head description lacks or misuses a field: {exc}",
                                   hint="write it with Head.as_dict()") from None


class _Misfit(Exception):
    """The graph does not fit one head kind; the message says why."""


def grid_count(size: tuple[int, int], strides: Sequence[int]) -> int:
    """Grid cells over all levels: a stride-s level of a padded-convolution backbone is ceil(h/s) x ceil(w/s)."""
    height, width = size
    return sum(math.ceil(height / s) * math.ceil(width / s) for s in strides)


def _size_from_rows(rows: int) -> tuple[int, int] | None:
    """The square input size whose grid (x 1 or x 3 anchors) at strides 8/16/32 has ``rows`` rows, if any."""
    for anchors in (1, 3):
        side = math.isqrt(round(rows / anchors * 1024 / 21))
        if side % 32 == 0 and side and anchors * grid_count((side, side), (8, 16, 32)) == rows:
            return side, side
    return None


def _rank3(facts: ModelFacts) -> TensorFacts:
    if len(facts.outputs) != 1:
        raise _Misfit(f"it has one output, the graph has {len(facts.outputs)}")
    output = facts.outputs[0]
    if output.shape is None or len(output.shape) != 3:
        raise _Misfit(f"its output is [batch, rows, columns], the graph's is {output.describe()}")
    return output


def _fit_yolov8(facts: ModelFacts, size) -> tuple[tuple[str, ...], int, tuple[int, ...]]:
    output = _rank3(facts)
    channels = output.shape[1]
    if channels is None or channels < 5:
        raise _Misfit(f"it needs [batch, 4 + classes, anchors], {output.describe()} has no static 4 + classes")
    return (output.name,), channels - 4, ()


def _fit_yolov5(facts: ModelFacts, size):
    output = _rank3(facts)
    columns = output.shape[2]
    if columns is None or columns < 6:
        raise _Misfit(f"it needs [batch, rows, 5 + classes], {output.describe()} has fewer than 6 columns")
    return (output.name,), columns - 5, ()


def _fit_yolox(facts: ModelFacts, size):
    (name,), classes, _ = _fit_yolov5(facts, size)
    rows = facts.outputs[0].shape[1]
    if rows is None:  # dynamic: nothing to check against; the common strides
        return (name,), classes, YOLOX_STRIDES[0]
    for strides in YOLOX_STRIDES:
        if grid_count(size, strides) == rows:
            return (name,), classes, strides
    expected = grid_count(size, YOLOX_STRIDES[0])
    raise _Misfit(f"YOLOX has one row per grid cell at strides 8/16/32 ({expected} at {size[0]}x{size[1]}), "
                  f"{facts.outputs[0].describe()} has {rows}")


def _fit_end2end(facts: ModelFacts, size):
    output = _rank3(facts)
    columns = output.shape[2]
    if columns is None or columns < 6:
        raise _Misfit(f"it needs [batch, boxes, 6] (x1 y1 x2 y2 score class), the graph's is {output.describe()}")
    return (output.name,), 0, ()


_ROLE_WORDS = (("num_dets", ("num", "count")), ("boxes", ("box",)), ("scores", ("score", "conf")),
               ("classes", ("class", "label")))


def _role(name: str) -> str | None:
    lowered = name.lower()
    for role, words in _ROLE_WORDS:
        if any(word in lowered for word in words):
            return role
    return None


def _efficient_nms_roles(outputs: Sequence[TensorFacts]) -> dict[str, TensorFacts]:
    roles: dict[str, TensorFacts] = {}
    for output in outputs:
        role = _role(output.name)
        if role and role not in roles:
            roles[role] = output
    if len(roles) < 4:  # names say nothing: the plugin's own output order
        roles = dict(zip(("num_dets", "boxes", "scores", "classes"), outputs))
    return roles


def _looks_like_efficient_nms(outputs: Sequence[TensorFacts]) -> bool:
    """Whether four outputs have EfficientNMS' shapes: an integer num_dets [B, 1], boxes [B, K, 4], scores [B, K]
    and classes [B, K] on one K. Four outputs alone say little (YOLOv5's raw maps beside its rows, CenterFace's
    heatmap, scale, offset and landmarks)."""
    if len(outputs) != 4:
        return False
    roles = _efficient_nms_roles(outputs)
    count, boxes, scores, classes = (roles[r].shape for r in ("num_dets", "boxes", "scores", "classes"))
    if None in (count, boxes, scores, classes) or not roles["num_dets"].integer:
        return False
    if len(count) != 2 or count[1] not in (1, None) or len(boxes) != 3 or boxes[2] not in (4, None) \
            or len(scores) != 2 or len(classes) != 2:
        return False
    return len({boxes[1], scores[1], classes[1]} - {None}) <= 1


def _fit_efficient_nms(facts: ModelFacts, size):
    outputs = facts.outputs
    if len(outputs) != 4:
        raise _Misfit(f"it has 4 outputs (num_dets, boxes, scores, classes), the graph has {len(outputs)}")
    roles = _efficient_nms_roles(outputs)
    ranks = {role: None if t.shape is None else len(t.shape) for role, t in roles.items()}
    boxes = roles["boxes"].shape
    if ranks["boxes"] != 3 or boxes[2] not in (4, None) or ranks["scores"] != 2 or ranks["classes"] != 2 \
            or ranks["num_dets"] not in (1, 2):
        shapes = ", ".join(f"{role} {t.describe()}" for role, t in roles.items())
        raise _Misfit(f"it needs num_dets [B, 1], boxes [B, K, 4], scores [B, K], classes [B, K]; read {shapes}")
    return tuple(roles[role].name for role in ("num_dets", "boxes", "scores", "classes")), 0, ()


def _fit_detr(facts: ModelFacts, size):
    outputs = facts.outputs
    if len(outputs) == 1:  # Ultralytics' RT-DETR: [B, Q, 4 + nc], scores already through a sigmoid
        output = _rank3(facts)
        columns = output.shape[2]
        if columns is None or columns < 5:
            raise _Misfit(f"a one-output DETR needs [batch, queries, 4 + classes], the graph's is {output.describe()}")
        return (output.name,), columns - 4, ()
    if len(outputs) != 2 or any(o.shape is None or len(o.shape) != 3 for o in outputs):
        raise _Misfit("it needs boxes [B, Q, 4] and logits [B, Q, classes], the graph has "
                      + ", ".join(o.describe() for o in outputs))
    boxes = [o for o in outputs if "box" in o.name.lower()]
    if len(boxes) != 1:
        boxes = [o for o in outputs if o.shape[2] == 4]
    if len(boxes) != 1:
        raise _Misfit("it needs exactly one [B, Q, 4] boxes output beside the logits")
    logits = outputs[1] if boxes[0] is outputs[0] else outputs[0]
    queries = {boxes[0].shape[1], logits.shape[1]} - {None}
    if logits.shape[2] is None or len(queries) > 1:
        raise _Misfit(f"boxes and logits must agree on the queries and logits need a static class count: "
                      f"{boxes[0].describe()}, {logits.describe()}")
    return (boxes[0].name, logits.name), logits.shape[2], ()


_FITS = {"yolov8": _fit_yolov8, "yolov5": _fit_yolov5, "end2end": _fit_end2end, "yolox": _fit_yolox,
         "efficient_nms": _fit_efficient_nms, "detr": _fit_detr}


def _refuse_task(facts: ModelFacts) -> None:
    task = (facts.task or "").lower()
    if task in _REFUSED_TASKS:
        raise UnsupportedTaskError(f"this is {_REFUSED_TASKS[task]} model (metadata task={task}), not a detector; "
                                   "orinkit.detect decodes detection heads only",
                                   hint="export the detection variant (e.g. yolo11n.pt, not yolo11n-seg.pt), or "
                                        "convert it without --task detect")
    if task and task != "detect":
        raise UnsupportedTaskError(f"the model's metadata says task={task}, not detect",
                                   hint="convert it without --task detect")
    shapes = [o.shape for o in facts.outputs]
    if len(shapes) == 2 and any(s and len(s) == 4 and s[1] == 32 for s in shapes) \
            and any(s and len(s) == 3 for s in shapes):
        raise UnsupportedTaskError("this is an instance segmentation model (a 32-channel mask prototype output "
                                   "beside the boxes), not a detector",
                                   hint="export the detection variant, or convert it without --task detect")


def _image_input(facts: ModelFacts) -> tuple[str, tuple[int, int] | None]:
    images = [i for i in facts.inputs if i.shape is not None and len(i.shape) == 4]
    if not images:
        seen = ", ".join(i.describe() for i in facts.inputs) or "none"
        raise UnrecognizedHeadError(f"the graph has no [batch, 3, height, width] image input (inputs: {seen})",
                                    hint="a detector takes one NCHW image tensor")
    image = images[0]
    channels, height, width = image.shape[1:]
    if channels not in (3, None):
        raise UnrecognizedHeadError(f"the image input {image.describe()} takes {channels} channels; orinkit.detect "
                                    "feeds 3-channel images", hint="export the model with a 3-channel NCHW input")
    static = (height, width) if height and width else None
    return image.name, static


def _grid_kind(rows_first, columns, size) -> str | None:
    """The kind whose row count is this size's grid: what makes a head without metadata believable (a lane or
    text model's [B, rows, columns] output rarely has exactly the grid's row count)."""
    cells = [grid_count(size, strides) for strides in YOLOX_STRIDES]
    if columns is not None and columns in cells and rows_first is not None and rows_first >= 5:
        return "yolov8"
    if rows_first is not None and columns is not None and columns >= 6:
        if rows_first in cells:
            return "yolox"
        if rows_first in [3 * c for c in cells]:
            return "yolov5"
    if columns == 6 and rows_first is not None:
        return "end2end"
    return None


def _auto_kind(facts: ModelFacts, size: tuple[int, int]) -> str:
    outputs = facts.outputs
    if _looks_like_efficient_nms(outputs):
        return "efficient_nms"
    if len(outputs) == 2:
        return "detr"
    if len(outputs) == 1 and outputs[0].shape is not None and len(outputs[0].shape) == 3:
        rows_first, columns = outputs[0].shape[1], outputs[0].shape[2]
        kind = _grid_kind(rows_first, columns, size)
        if kind is None and facts.names:  # the exporter named the classes: the shapes alone may decide
            classes = len(facts.names)
            if rows_first == classes + 4:
                kind = "yolov8"
            elif facts.ultralytics and columns == classes + 4 and not facts.export_nms:
                kind = "detr"
            elif columns == 6 or facts.export_nms:
                kind = "end2end"
            elif columns == classes + 5:
                kind = "yolov5"
        if kind:
            return kind
    raise UnrecognizedHeadError(f"the graph's outputs fit no known detection head (outputs: "
                                f"{facts.describe_outputs()}; input size {size[0]}x{size[1]})", hint=_HEAD_HINT)


def _default_size(facts: ModelFacts) -> tuple[int, int]:
    if facts.imgsz:
        return facts.imgsz
    if len(facts.outputs) == 1 and facts.outputs[0].shape is not None and len(facts.outputs[0].shape) == 3:
        for rows in facts.outputs[0].shape[1:]:
            if rows:
                size = _size_from_rows(rows)
                if size:
                    return size
    return DEFAULT_SIZE


def recognize(model, *, head: str | None = None,
              labels: str | os.PathLike | Sequence[str] | None = None) -> Head:
    """The :class:`Head` of ``model`` (an ``onnx.ModelProto`` or a path): its kind, input, outputs, class count and
    names. ``head`` forces a kind (refused with the reason where the graph does not fit it); ``labels`` (a file or
    a list) names the classes and must match their count. A dynamic input size comes from Ultralytics' ``imgsz``
    metadata, else from the output's row count, else 640x640. ``model`` may also be the :class:`ModelFacts` of a
    signature (a served model's, read without onnx)."""
    facts = model if isinstance(model, ModelFacts) else model_facts(model)
    _refuse_task(facts)
    grids = [o for o in facts.outputs if o.shape is not None and len(o.shape) == 5]
    if grids and len(grids) < len(facts.outputs):
        # YOLOv5's older exports add each level's raw [B, 3, ny, nx, 5 + nc] map beside the decoded rows: unused
        facts = replace(facts, outputs=tuple(o for o in facts.outputs if o not in grids))
    input_name, static_size = _image_input(facts)
    size = static_size or _default_size(facts)
    # A head named once (edge-convert --head) travels in the model's metadata to every later step.
    head = head or facts.metadata.get(HEAD_KEY) or None
    if head is not None and head not in HEAD_KINDS:
        raise DetectInputError(f"unknown head kind {head!r}", hint=f"use one of {', '.join(HEAD_KINDS)}")
    kind = head or _auto_kind(facts, size)
    try:
        outputs, num_classes, strides = _FITS[kind](facts, size)
    except _Misfit as misfit:
        said = f"head {head!r} was asked for but does not fit the graph" if head else \
            f"the graph's outputs suggest the {kind} head but do not fit it"
        raise UnrecognizedHeadError(f"{said}: {misfit} (outputs: {facts.describe_outputs()})",
                                    hint=_HEAD_HINT) from None
    names = facts.names
    where = "the model's metadata 'names'"
    if labels is not None:
        names, where = load_labels(labels), "the labels"
    if names:
        check_count(names, num_classes, where)
        num_classes = num_classes or len(names)
    else:
        names = tuple(str(i) for i in range(num_classes))
    return Head(kind=kind, input_name=input_name, input_size=size, outputs=outputs, num_classes=num_classes,
                names=names, strides=strides)


def mark(model, *, head: str | None = None, labels=None) -> Head:
    """Recognize ``model`` (an ``onnx.ModelProto``, changed in place) with ``head`` and ``labels`` and write them
    into its metadata (``orinkit_head``, and ``names`` as Ultralytics writes it), so that every later step that
    reads the file (the gates, the engine's NMS, edge-repo add-detector) sees the same head and class names."""
    found = recognize(model, head=head, labels=labels)
    written = {"task": "detect"}
    if head is not None:
        written[HEAD_KEY] = found.kind
    if labels is not None:
        written["names"] = repr(dict(enumerate(found.names)))
    kept = [prop for prop in model.metadata_props if prop.key not in written]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    for key, value in written.items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value
    return found


def is_detector(model) -> bool:
    """Whether :func:`recognize` finds a detection head in ``model`` (for ``--criterion auto``)."""
    try:
        recognize(model)
    except DetectError:
        return False
    return True
