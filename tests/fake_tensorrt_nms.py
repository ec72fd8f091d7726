"""TEST DOUBLE (part of tests/fake_tensorrt.py): TensorRT's plugin registry with the EfficientNMS_TRT creator, and
the numpy evaluation of the layers added after parsing (tests/fake_tensorrt_layers.py), which the fake engine runs
after onnxruntime has computed the parsed graph.

Read from NVIDIA/TensorRT:

* python/src/infer/pyPlugin.cpp: ``PluginField(name, data: buffer, type=PluginFieldType.UNKNOWN)``; ``PluginFieldType``
  FLOAT16..UNKNOWN on release/8.5, + BF16/INT64/FP8 from 10.0, INT4 from 10.1, FP4 from 10.8; the C++ collection is
  ``PluginFieldCollection_`` and python/src/pyTensorRT.cpp binds ``PluginFieldCollection`` as a vector of
  PluginField; ``IPluginRegistry`` has ``get_plugin_creator`` and ``plugin_creator_list`` up to 10.x,
  ``get_creator``/``all_creators`` from 10.0, and only the latter on release/11.0 and 11.1 (the 11.4 bindings wheel
  too); ``init_libnvinfer_plugins(logger, namespace)`` registers the standard plugins;
* plugin/efficientNMSPlugin/efficientNMSPlugin.cpp: the creator's fields (``class_agnostic`` from release/8.6),
  ``createPlugin``'s checks (the six required attributes; FLOAT32 thresholds, score >= 0, IoU > 0; INT32
  max_output_boxes > 0, background_class, box_coding 0/1; score_activation and class_agnostic read as int32 0/1
  without a type check; unknown names ignored) and its outputs (int32 count [B, 1], boxes [B, K, 4], scores
  [B, K], int32 classes [B, K]); efficientNMSInference.cu: scores >= threshold kept, IoU >= threshold suppresses,
  outputs zeroed first, at most 5000 candidates;
* include/NvInfer.h INMSLayer: scores above the threshold, boxes sorted by score regardless of class, the TopK
  limit per batch item, IoU <= threshold kept, only boxes of one class compared, rows (batch, class, box) by batch
  then decreasing score.
"""

from __future__ import annotations

import enum
import types

import numpy as np

_FIELD_TYPES = [("FLOAT16", (8, 5)), ("FLOAT32", (8, 5)), ("FLOAT64", (8, 5)), ("INT8", (8, 5)), ("INT16", (8, 5)),
                ("INT32", (8, 5)), ("CHAR", (8, 5)), ("DIMS", (8, 5)), ("UNKNOWN", (8, 5)), ("BF16", (10, 0)),
                ("INT64", (10, 0)), ("FP8", (10, 0)), ("INT4", (10, 1)), ("FP4", (10, 8))]
_REQUIRED = ("score_threshold", "iou_threshold", "max_output_boxes", "background_class", "score_activation",
             "box_coding")
EFFICIENT_NMS_CANDIDATES = 5000  # efficientNMSPlugin.cpp: numSelectedBoxes on SM >= 7.x


def install_plugin_api(trt: types.ModuleType, *, release: tuple[int, int], plugins: bool) -> None:
    calls, gen = trt.calls, 8 if release[0] <= 8 else 10 if release[0] in (9, 10) else 11
    FieldType = enum.IntEnum("PluginFieldType", [(n, i) for i, (n, since) in enumerate(_FIELD_TYPES)
                                                 if since <= release])
    trt.PluginFieldType = FieldType

    class PluginField:
        __slots__ = ("name", "_raw", "type", "size")

        def __init__(self, name: str = "", data=None, type=FieldType.UNKNOWN) -> None:  # noqa: A002
            if not isinstance(name, str) or not isinstance(type, FieldType):
                raise TypeError("PluginField(): incompatible constructor arguments (name: str, data: buffer, "
                                "type: PluginFieldType)")
            try:
                view = memoryview(data) if data is not None else memoryview(b"")
            except TypeError:
                raise TypeError("PluginField(): incompatible constructor arguments: data must support the buffer "
                                f"protocol (a numpy array), not {data.__class__.__name__}") from None
            self.name, self._raw, self.type = name, view.tobytes(), type
            self.size = view.nbytes // max(view.itemsize, 1)

    class PluginFieldCollection(list):
        """py::bind_vector<std::vector<PluginField>>: a list that holds PluginField only."""

        def __init__(self, fields=()) -> None:
            fields = list(fields)
            if not all(isinstance(f, PluginField) for f in fields):
                raise TypeError("PluginFieldCollection(): incompatible constructor arguments: PluginField items only")
            super().__init__(fields)

    class PluginFieldCollection_:  # noqa: N801 - the bindings' name for the C++ collection
        def __init__(self, fields) -> None:
            self._fields = list(fields)

        def __len__(self) -> int:
            return len(self._fields)

        def __getitem__(self, index: int):
            if not 0 <= index < len(self._fields):
                raise IndexError(index)
            return self._fields[index]

    class IPluginV2:
        __slots__ = ("plugin_type", "plugin_version", "plugin_namespace", "_fields")

        def __init__(self, fields: dict) -> None:
            self.plugin_type, self.plugin_version, self.plugin_namespace = "EfficientNMS_TRT", "1", ""
            self._fields = fields

        num_outputs = property(lambda self: 4)

        def _check(self, shapes: list, kinds: list) -> list[str]:
            # supportsFormatCombination and getOutputDimensions' assumptions
            if len(shapes) not in (2, 3):
                return [f"EfficientNMS_TRT takes boxes, scores (and anchors), not {len(shapes)} inputs"]
            boxes, scores = shapes[0], shapes[1]
            out = []
            if kinds[0] != kinds[1] or kinds[0].name not in ("FLOAT", "HALF"):
                out.append(f"EfficientNMS_TRT inputs must both be FLOAT or HALF ({kinds[0].name}, {kinds[1].name})")
            if len(boxes) not in (3, 4) or boxes[-1] not in (4, -1) or len(scores) != 3 or (
                    boxes[1] > 0 and scores[1] > 0 and boxes[1] != scores[1]):
                out.append(f"EfficientNMS_TRT boxes {list(boxes)} / scores {list(scores)}: [B, N, 4] and [B, N, C]")
            return out

    class IPluginCreator:
        __slots__ = ("plugin_namespace",)
        name, plugin_version = "EfficientNMS_TRT", "1"

        def __init__(self) -> None:
            self.plugin_namespace = ""

        @property
        def field_names(self):
            names = [*_REQUIRED[:4], "score_activation", *(("class_agnostic",) if release >= (8, 6) else ()),
                     "box_coding"]
            kinds = {"score_threshold": FieldType.FLOAT32, "iou_threshold": FieldType.FLOAT32}
            return PluginFieldCollection_([PluginField(n, None, kinds.get(n, FieldType.INT32)) for n in names])

        def create_plugin(self, name, field_collection):
            if not isinstance(name, str) or not isinstance(field_collection, (PluginFieldCollection,
                                                                              PluginFieldCollection_)):
                raise TypeError("create_plugin(): incompatible function arguments: (name: str, field_collection: "
                                "PluginFieldCollection_)")
            fields, problem = _decode(list(field_collection), FieldType, release)
            calls.append(("create_plugin", self.name, fields, problem))
            return None if problem else IPluginV2(fields)

    class IPluginRegistry:
        __slots__ = ("_creators",)

        def __init__(self) -> None:
            self._creators = []

        def _find(self, kind: str, version: str, namespace: str):
            return next((c for c in self._creators if (c.name, c.plugin_version, c.plugin_namespace)
                         == (kind, version, namespace)), None)

    if gen < 11:  # pyPlugin.cpp release/8.5 ... release/10.16; gone from release/11.0
        def get_plugin_creator(self, type, version, plugin_namespace=""):  # noqa: A002
            calls.append(("get_plugin_creator", type, version, plugin_namespace))
            return self._find(type, version, plugin_namespace)

        IPluginRegistry.get_plugin_creator = get_plugin_creator
        IPluginRegistry.plugin_creator_list = property(lambda self: list(self._creators))
    if gen >= 10:  # from release/10.0
        def get_creator(self, type, version, plugin_namespace=""):  # noqa: A002
            calls.append(("get_creator", type, version, plugin_namespace))
            return self._find(type, version, plugin_namespace)

        IPluginRegistry.get_creator = get_creator
        IPluginRegistry.all_creators = property(lambda self: list(self._creators))

    registry = IPluginRegistry()

    def init_libnvinfer_plugins(logger, namespace) -> bool:
        trt._check_logger(logger)
        calls.append(("init_libnvinfer_plugins", namespace))
        if plugins and registry._find("EfficientNMS_TRT", "1", namespace) is None:
            creator = IPluginCreator()
            creator.plugin_namespace = namespace
            registry._creators.append(creator)
        return plugins

    trt.PluginField, trt.PluginFieldCollection, trt.PluginFieldCollection_ = (PluginField, PluginFieldCollection,
                                                                              PluginFieldCollection_)
    trt.IPluginV2, trt.IPluginCreator, trt.IPluginRegistry = IPluginV2, IPluginCreator, IPluginRegistry
    trt.get_plugin_registry = lambda: registry
    trt.init_libnvinfer_plugins = init_libnvinfer_plugins


def _decode(fields: list, FieldType, release: tuple[int, int]) -> tuple[dict, str | None]:
    """efficientNMSPlugin.cpp's createPlugin: the values as the C++ reads them (raw bytes as the C type)."""
    names = {f.name for f in fields}
    missing = [n for n in _REQUIRED if n not in names]
    if missing:
        return {}, f"missing required attributes {missing}"
    values: dict = {}
    for field in fields:
        name, raw = field.name, field._raw
        typed = {"score_threshold": FieldType.FLOAT32, "iou_threshold": FieldType.FLOAT32,
                 "max_output_boxes": FieldType.INT32, "background_class": FieldType.INT32,
                 "box_coding": FieldType.INT32}
        readers = {**{n: np.float32 for n in ("score_threshold", "iou_threshold")},
                   **{n: np.int32 for n in ("max_output_boxes", "background_class", "box_coding",
                                            "score_activation", "class_agnostic")}}
        if name == "class_agnostic" and release < (8, 6):
            continue  # release/8.5's createPlugin has no such branch: ignored
        if name not in readers:
            continue
        if name in typed and field.type != typed[name]:
            return {}, f"PLUGIN_VALIDATE failed: {name} has type {field.type.name}, {typed[name].name} expected"
        if len(raw) < 4:
            return {}, f"{name}: {len(raw)} bytes where the plugin reads 4"
        values[name] = readers[name](np.frombuffer(raw[:4], readers[name])[0]).item()
    checks = {"score_threshold": lambda v: v >= 0.0, "iou_threshold": lambda v: v > 0.0,
              "max_output_boxes": lambda v: v > 0, "box_coding": lambda v: v in (0, 1),
              "score_activation": lambda v: v in (0, 1), "class_agnostic": lambda v: v in (0, 1)}
    for name, ok in checks.items():
        if name in values and not ok(values[name]):
            return {}, f"PLUGIN_VALIDATE failed: {name} = {values[name]}"
    return values, None


# ---------------------------------------------------------------- evaluation of the added layers

def serialize(network) -> list[dict]:
    """The added layers as the fake plan stores them (names resolved now, after any renaming)."""
    program = []
    for layer in network._program:
        params = {}
        for key, value in layer._params.items():
            if isinstance(value, np.ndarray):
                value = {"array": value.tolist(), "dtype": str(value.dtype)}
            elif isinstance(value, enum.Enum):
                value = value.name
            elif key == "plugin":
                value = dict(value._fields)
            params[key] = value
        program.append({"kind": layer._type, "inputs": [t.name for t in layer._inputs],
                        "outputs": [t.name for t in layer._outputs], "params": params})
    return program


def evaluate(program: list[dict], values: dict) -> dict:
    """Run the steps in dependency order (a layer's input may be added after it, as set_input allows)."""
    values, pending = dict(values), list(program)
    while pending:
        ready = [step for step in pending if all(name in values for name in step["inputs"])]
        if not ready:
            raise AssertionError(f"the fake engine cannot evaluate {[s['kind'] for s in pending]}: inputs missing")
        for step in ready:
            inputs = [values[name] for name in step["inputs"]]
            for name, result in zip(step["outputs"], _run(step["kind"], step["params"], inputs)):
                values[name] = result
            pending.remove(step)
    return values


def _run(kind: str, p: dict, x: list) -> list:
    if kind == "Constant":
        return [np.asarray(p["value"]["array"], p["value"]["dtype"]).reshape(p["shape"])]
    if kind == "Shuffle":
        out = np.transpose(x[0], p["first_transpose"]) if p.get("first_transpose") else x[0]
        if p.get("reshape_dims") is not None:
            out = out.reshape([out.shape[i] if d == 0 and p["zero_is_placeholder"] else d
                               for i, d in enumerate(p["reshape_dims"])])
        return [out]
    if kind == "Gather":
        data, index = x
        if p["mode"] == "ND":
            return [data[tuple(np.moveaxis(index, -1, 0))]]
        if p["num_elementwise_dims"] == 1:
            return [np.stack([np.take(data[b], index[b], axis=p["axis"] - 1) for b in range(len(data))])]
        return [np.take(data, index, axis=p["axis"])]
    if kind == "Scatter":
        out = x[0].copy()
        out[tuple(np.moveaxis(x[1], -1, 0))] = x[2]
        return [out]
    if kind == "ElementWise":
        ops = {"SUM": np.add, "PROD": np.multiply, "SUB": np.subtract, "DIV": np.divide, "MAX": np.maximum,
               "MIN": np.minimum, "FLOOR_DIV": np.floor_divide, "GREATER": np.greater, "LESS": np.less,
               "EQUAL": np.equal, "POW": np.power}
        out = ops[p["op"]](x[0], x[1])
        return [out if out.dtype == np.bool_ else out.astype(x[0].dtype)]
    if kind == "Select":
        return [np.where(x[0], x[1], x[2]).astype(x[1].dtype)]
    if kind == "Unary":
        return [{"EXP": np.exp, "LOG": np.log, "ABS": np.abs, "NEG": np.negative}[p["op"]](x[0])]
    if kind == "Concatenation":
        return [np.concatenate(x, axis=p["axis"])]
    if kind == "Reduce":
        axes = tuple(i for i in range(x[0].ndim) if p["axes"] >> i & 1)
        op = {"SUM": np.sum, "MAX": np.max, "MIN": np.min, "PROD": np.prod, "AVG": np.mean}[p["op"]]
        return [op(x[0], axis=axes, keepdims=p["keep_dims"]).astype(x[0].dtype)]
    if kind == "TopK":
        axis = next(i for i in range(x[0].ndim) if p["axes"] >> i & 1)
        order = np.argsort(-x[0] if p["op"] == "MAX" else x[0], axis=axis, kind="stable")
        order = np.take(order, np.arange(p["k"]), axis=axis)
        return [np.take_along_axis(x[0], order, axis), order.astype(np.int64 if p["indices"] == "INT64" else np.int32)]
    if kind == "Cast":
        kinds = {"FLOAT": np.float32, "HALF": np.float16, "INT32": np.int32, "BOOL": np.bool_, "INT64": np.int64}
        return [x[0].astype(kinds[p["to"]])]
    if kind == "NMS":
        iou = float(x[3]) if len(x) > 3 else 0.0
        score = float(x[4]) if len(x) > 4 else 0.0
        rows = inms(x[0], x[1], int(x[2]), iou, score, p["format"], p["topk_box_limit"])
        return [rows.astype(np.int64 if p["indices_type"] == "INT64" else np.int32), np.int32(len(rows))]
    if kind == "PluginV2":
        return efficient_nms(x[0], x[1], p["plugin"])
    raise AssertionError(kind)


def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    if center:
        xy, half = boxes[..., :2], boxes[..., 2:] / 2
        return np.concatenate([xy - half, xy + half], -1)
    return np.concatenate([np.minimum(boxes[..., :2], boxes[..., 2:]), np.maximum(boxes[..., :2], boxes[..., 2:])],
                          -1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    low, high = np.maximum(box[:2], others[:, :2]), np.minimum(box[2:], others[:, 2:])
    inter = np.prod(np.clip(high - low, 0, None), axis=1)
    area = lambda b: np.prod(b[..., 2:] - b[..., :2], axis=-1)  # noqa: E731
    return inter / np.maximum(area(box) + area(others) - inter, 1e-12)


def _greedy(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, keep, agnostic: bool, limit: int):
    """Indices kept, in decreasing score order; ``keep(iou)`` says whether a box survives an overlap."""
    chosen: list[int] = []
    for index in np.argsort(-scores, kind="stable"):
        if len(chosen) >= limit:
            break
        rivals = [j for j in chosen if agnostic or classes[j] == classes[index]]
        if not rivals or keep(_iou(boxes[index], boxes[rivals])).all():
            chosen.append(int(index))
    return chosen


def inms(boxes, scores, per_class: int, iou: float, score: float, fmt: str, topk_limit: int) -> np.ndarray:
    rows = []
    for b in range(scores.shape[0]):
        n, c = np.nonzero(scores[b] > score)
        values = scores[b][n, c]
        top = np.argsort(-values, kind="stable")[:topk_limit]
        n, c, values = n[top], c[top], values[top]
        picked = boxes[b][n] if boxes.ndim == 3 else boxes[b][n, c]
        corner = _corners(picked.astype(np.float64), fmt == "CENTER_SIZES")
        chosen = []
        for cls in np.unique(c):
            members = np.nonzero(c == cls)[0]
            kept = _greedy(corner[members], values[members], c[members], lambda v: v <= iou, False, per_class)
            chosen += [int(members[k]) for k in kept]
        chosen.sort(key=lambda k: -values[k])
        rows += [(b, int(c[k]), int(n[k])) for k in chosen]
    return np.asarray(rows, np.int64).reshape(-1, 3)


def efficient_nms(boxes, scores, f: dict) -> list:
    batch, keep = scores.shape[0], f["max_output_boxes"]
    if f.get("score_activation"):
        scores = 1 / (1 + np.exp(-scores))
    counts = np.zeros((batch, 1), np.int32)
    out_boxes, out_scores = np.zeros((batch, keep, 4), np.float32), np.zeros((batch, keep), np.float32)
    out_classes = np.zeros((batch, keep), np.int32)
    for b in range(batch):
        n, c = np.nonzero(scores[b] >= f["score_threshold"])
        mask = c != f["background_class"]
        n, c = n[mask], c[mask]
        values = scores[b][n, c]
        top = np.argsort(-values, kind="stable")[:EFFICIENT_NMS_CANDIDATES]
        n, c, values = n[top], c[top], values[top]
        picked = boxes[b][n] if boxes.ndim == 3 else boxes[b][n, c]
        corner = _corners(picked.astype(np.float64), f["box_coding"] == 1)
        chosen = _greedy(corner, values, c, lambda v: v < f["iou_threshold"], bool(f.get("class_agnostic")), keep)
        counts[b, 0] = len(chosen)
        out_boxes[b, :len(chosen)] = corner[chosen]
        out_scores[b, :len(chosen)] = values[chosen]
        out_classes[b, :len(chosen)] = c[chosen]
    return [counts, out_boxes, out_scores, out_classes]
