"""TEST DOUBLE (part of tests/fake_tensorrt.py): the INetworkDefinition layer API that orinkit calls after parsing
(the ``--nms`` glue), imitating NVIDIA/TensorRT's python/src/infer/pyGraph.cpp and include/NvInfer.h per release.

What each release binds (release/8.5, release/8.6, release/10.14, release/10.16, release/11.1; 11.4's bindings
wheel, tensorrt-cu12-bindings 11.4.0.106, names the same methods):

* ``add_constant(shape, weights)``, ``add_select(condition, then_input, else_input)``, ``add_shuffle``,
  ``add_gather(input, indices, axis)`` (+ ``num_elementwise_dims``),
  ``add_gather_v2(input, indices, mode)``, ``add_scatter(data, indices, updates, mode)``, ``add_elementwise``,
  ``add_unary``, ``add_concatenation`` (+ ``axis``), ``add_reduce(input, op, axes, keep_dims)``,
  ``add_topk(input, op, k, axes)``, ``add_nms(boxes, scores, max_output_boxes_per_class)``, ``add_plugin_v2``,
  ``mark_output``/``unmark_output``: every release from 8.5;
* ``add_cast(input, to_type)``: from 8.6 (8.5 has no ICastLayer);
* ``add_topk(..., indices_type)``, ``add_nms(..., indices_type)`` and ``INMSLayer.indices_type``: from 10.14, which
  deprecates the shorter forms;
* ``add_plugin_v3``: from 10.0.

Python argument types are checked as pybind11 does (TypeError for a list where a tensor goes, an int where an enum
goes, a list where a numpy array goes). What TensorRT checks when it builds (ranks, broadcasting, types, TopK's
K <= 3840, INMSLayer's scalar inputs and its TopK limit of 5000 on SM 8.7) is checked by :func:`problems`, which
the fake builder calls: the build then fails with TensorRT's kind of error, as the real one does.
"""

from __future__ import annotations

import enum
import types

import numpy as np

_ENUMS = {
    "ElementWiseOperation": "SUM PROD MAX MIN SUB DIV POW FLOOR_DIV AND OR XOR EQUAL GREATER LESS",
    "UnaryOperation": "EXP LOG SQRT RECIP ABS NEG SIN COS TAN SINH COSH",
    "ReduceOperation": "SUM PROD MAX MIN AVG",
    "TopKOperation": "MAX MIN",
    "GatherMode": "DEFAULT ELEMENT ND",
    "ScatterMode": "ELEMENT ND",
    "BoundingBoxFormat": "CORNER_PAIRS CENTER_SIZES",
}
COMPARISONS = ("EQUAL", "GREATER", "LESS")
LOGICAL = ("AND", "OR", "XOR")
TOPK_MAX_K = 3840  # NvInfer.h addTopK: "Currently only values of K up to 3840 are supported"
NMS_TOPK_LIMIT = 5000  # NvInfer.h INMSLayer: 5000 except on SM 5.3 and 6.2 (the Orin is SM 8.7)
_NUMPY_TO_TRT = {np.dtype(np.float32): "FLOAT", np.dtype(np.float16): "HALF", np.dtype(np.int8): "INT8",
                 np.dtype(np.int32): "INT32", np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "UINT8",
                 np.dtype(np.int64): "INT64"}


def install_network_api(trt: types.ModuleType, *, release: tuple[int, int], Tensor, layer_class, network_class):
    """Add the layer API of ``release`` to the fake ``network_class`` (whose instances keep ``_program``)."""
    for name, members in _ENUMS.items():
        setattr(trt, name, enum.IntEnum(name, [(m, i) for i, m in enumerate(members.split())]))
    DataType = trt.DataType
    modern = release >= (10, 14)

    def tensor_arg(value, what: str):
        if not isinstance(value, Tensor):
            raise TypeError(f"{what}(): incompatible function arguments: expected tensorrt.ITensor, got "
                            f"{type(value).__name__}")
        return value

    def enum_arg(value, kind: type, what: str):
        if not isinstance(value, kind):
            raise TypeError(f"{what}(): incompatible function arguments: expected tensorrt.{kind.__name__}, got "
                            f"{type(value).__name__}")
        return value

    def make(network, kind: str, inputs: list, cls=None, **params):
        layer = (cls or Added)(f"(Unnamed Layer* {len(network._layers)}) [{kind}]", kind, [])
        layer._inputs, layer._params = list(inputs), dict(params)
        network._layers.append(layer)
        network._program.append(layer)
        layer._refresh()
        return layer

    class Added(layer_class):
        """A layer added through the API: its output shapes follow its inputs and settings, as TensorRT's do when
        queried; ``_params`` are what the fake engine evaluates."""

        __slots__ = ("_inputs", "_params")

        def _refresh(self) -> None:
            shapes, dtypes = _infer(self._type, self._params, [tuple(t.shape) for t in self._inputs],
                                    [t.dtype for t in self._inputs], DataType)
            while len(self._outputs) < len(shapes):
                index = len(self._outputs)
                self._outputs.append(Tensor(f"{self.name}_output_{index}", (), DataType.FLOAT))
            for tensor, shape, dtype in zip(self._outputs, shapes, dtypes):
                tensor.shape = shape
                tensor._set_dtype(dtype)

        def _set(self, key: str, value) -> None:
            self._params[key] = value
            self._refresh()

        num_inputs = property(lambda self: len(self._inputs))

        def get_input(self, index: int):
            return self._inputs[index]

    def prop(key: str, check=None):
        def setter(self, value):
            if check is not None:
                value = check(value)
            self._set(key, value)
        return property(lambda self: self._params.get(key), setter)

    def dims(value):
        if not isinstance(value, (tuple, list)) or not all(isinstance(d, (int, np.integer)) for d in value):
            raise TypeError(f"incompatible type for Dims/Permutation: {value!r}")
        return tuple(int(d) for d in value)

    class ShuffleLayer(Added):
        __slots__ = ()
        first_transpose = prop("first_transpose", dims)
        second_transpose = prop("second_transpose", dims)
        reshape_dims = prop("reshape_dims", dims)
        zero_is_placeholder = prop("zero_is_placeholder", bool)

    class GatherLayer(Added):
        __slots__ = ()
        axis = prop("axis", int)
        num_elementwise_dims = prop("num_elementwise_dims", int)
        mode = prop("mode", lambda v: enum_arg(v, trt.GatherMode, "mode"))

    class ConcatenationLayer(Added):
        __slots__ = ()
        axis = prop("axis", int)

    class NMSLayer(Added):
        __slots__ = ()
        bounding_box_format = prop("format", lambda v: enum_arg(v, trt.BoundingBoxFormat, "bounding_box_format"))
        topk_box_limit = prop("topk_box_limit", int)

        def set_input(self, index: int, tensor) -> None:
            tensor_arg(tensor, "set_input")
            if index < len(self._inputs):
                self._inputs[index] = tensor
            elif index == len(self._inputs):
                self._inputs.append(tensor)
            else:
                raise IndexError("INMSLayer inputs are set in order: 3 (IoU threshold) before 4 (score threshold)")
            self._refresh()

    if modern:
        NMSLayer.indices_type = prop("indices_type", lambda v: enum_arg(v, DataType, "indices_type"))

    class TopKLayer(Added):
        __slots__ = ()
        k = prop("k", int)

    class PluginV2Layer(Added):
        __slots__ = ()
        plugin = property(lambda self: self._params["plugin"])

    def add_constant(self, shape, weights):
        shape = dims(shape)
        if not isinstance(weights, np.ndarray):  # trt.Weights converts implicitly from numpy arrays only
            raise TypeError("add_constant(): incompatible function arguments: weights must be a numpy array "
                            f"(tensorrt.Weights), got {type(weights).__name__}")
        kind = _NUMPY_TO_TRT.get(weights.dtype)
        if kind is None or not hasattr(DataType, kind):
            raise TypeError(f"Unsupported numpy data type {weights.dtype} for Weights")
        return make(self, "Constant", [], value=np.array(weights), shape=shape, dtype=kind)

    def add_shuffle(self, input):  # noqa: A002 - the bindings' argument name
        return make(self, "Shuffle", [tensor_arg(input, "add_shuffle")], ShuffleLayer, zero_is_placeholder=True)

    def add_gather(self, input, indices, axis):  # noqa: A002
        return make(self, "Gather", [tensor_arg(input, "add_gather"), tensor_arg(indices, "add_gather")],
                    GatherLayer, axis=int(axis), num_elementwise_dims=0, mode=trt.GatherMode.DEFAULT)

    def add_gather_v2(self, input, indices, mode):  # noqa: A002
        return make(self, "Gather", [tensor_arg(input, "add_gather_v2"), tensor_arg(indices, "add_gather_v2")],
                    GatherLayer, axis=0, num_elementwise_dims=0, mode=enum_arg(mode, trt.GatherMode, "add_gather_v2"))

    def add_scatter(self, data, indices, updates, mode):
        return make(self, "Scatter", [tensor_arg(t, "add_scatter") for t in (data, indices, updates)],
                    mode=enum_arg(mode, trt.ScatterMode, "add_scatter"))

    def add_elementwise(self, input1, input2, op):
        return make(self, "ElementWise", [tensor_arg(input1, "add_elementwise"), tensor_arg(input2, "add_elementwise")],
                    op=enum_arg(op, trt.ElementWiseOperation, "add_elementwise").name)

    def add_select(self, condition, then_input, else_input):
        return make(self, "Select", [tensor_arg(t, "add_select") for t in (condition, then_input, else_input)])

    def add_unary(self, input, op):  # noqa: A002
        return make(self, "Unary", [tensor_arg(input, "add_unary")],
                    op=enum_arg(op, trt.UnaryOperation, "add_unary").name)

    def add_concatenation(self, inputs):
        if not isinstance(inputs, (list, tuple)):
            raise TypeError("add_concatenation(): incompatible function arguments: inputs must be a list of ITensor")
        return make(self, "Concatenation", [tensor_arg(t, "add_concatenation") for t in inputs], ConcatenationLayer,
                    axis=0)

    def add_reduce(self, input, op, axes, keep_dims):  # noqa: A002
        return make(self, "Reduce", [tensor_arg(input, "add_reduce")],
                    op=enum_arg(op, trt.ReduceOperation, "add_reduce").name, axes=int(axes), keep_dims=bool(keep_dims))

    def add_topk(self, input, op, k, axes, *indices_type):  # noqa: A002
        if indices_type and not modern:
            raise TypeError("add_topk(): incompatible function arguments (indices_type is bound from TensorRT 10.14)")
        kind = enum_arg(indices_type[0], DataType, "add_topk").name if indices_type else "INT32"
        return make(self, "TopK", [tensor_arg(input, "add_topk")], TopKLayer,
                    op=enum_arg(op, trt.TopKOperation, "add_topk").name, k=int(k), axes=int(axes), indices=kind)

    def add_nms(self, boxes, scores, max_output_boxes_per_class, *indices_type):
        if indices_type and not modern:
            raise TypeError("add_nms(): incompatible function arguments (indices_type is bound from TensorRT 10.14)")
        kind = enum_arg(indices_type[0], DataType, "add_nms").name if indices_type else "INT32"
        inputs = [tensor_arg(t, "add_nms") for t in (boxes, scores, max_output_boxes_per_class)]
        return make(self, "NMS", inputs, NMSLayer, format=trt.BoundingBoxFormat.CORNER_PAIRS,
                    topk_box_limit=NMS_TOPK_LIMIT, indices_type=getattr(DataType, kind))

    def add_cast(self, input, to_type):  # noqa: A002
        return make(self, "Cast", [tensor_arg(input, "add_cast")], to=enum_arg(to_type, DataType, "add_cast").name)

    def add_plugin_v2(self, inputs, plugin):
        if not isinstance(inputs, (list, tuple)) or not isinstance(plugin, trt.IPluginV2):
            raise TypeError("add_plugin_v2(): incompatible function arguments: (inputs: List[ITensor], plugin: "
                            "IPluginV2)")
        return make(self, "PluginV2", [tensor_arg(t, "add_plugin_v2") for t in inputs], PluginV2Layer, plugin=plugin)

    def add_plugin_v3(self, inputs, shape_inputs, plugin):
        raise TypeError("add_plugin_v3(): incompatible function arguments: plugin must be an IPluginV3 (the fake has "
                        "no V3 plugins; EfficientNMS_TRT is an IPluginV2DynamicExt)")

    def mark_output(self, tensor) -> None:
        self._outputs.append(tensor_arg(tensor, "mark_output"))

    def unmark_output(self, tensor) -> None:
        tensor_arg(tensor, "unmark_output")
        if tensor not in self._outputs:
            self._errors.append(f"unmarkOutput: tensor '{tensor.name}' is not a network output")
            return
        self._outputs.remove(tensor)

    methods = [add_constant, add_shuffle, add_gather, add_gather_v2, add_scatter, add_elementwise, add_select,
               add_unary, add_concatenation, add_reduce, add_topk, add_nms, add_plugin_v2, mark_output, unmark_output]
    methods += [add_cast] if release >= (8, 6) else []
    methods += [add_plugin_v3] if release >= (10, 0) else []
    for method in methods:
        setattr(network_class, method.__name__, method)


def _known(a: int, b: int) -> bool:
    return a >= 0 and b >= 0


def _broadcast(left: tuple, right: tuple) -> tuple | None:
    if len(left) != len(right):
        return None
    out = []
    for a, b in zip(left, right):
        if _known(a, b) and a != b and 1 not in (a, b):
            return None
        out.append(b if a == 1 else a if b == 1 else max(a, b) if _known(a, b) else -1)
    return tuple(out)


def _infer(kind: str, p: dict, shapes: list, dtypes: list, DataType) -> tuple[list, list]:
    """Output shapes (-1 unknown) and types; a best effort while settings are incomplete (checked at build)."""
    first = shapes[0] if shapes else ()
    if kind == "Constant":
        return [p["shape"]], [DataType[p["dtype"]]]
    if kind == "Shuffle":
        shape = tuple(first[i] for i in p["first_transpose"]) if p.get("first_transpose") else first
        if p.get("reshape_dims") is not None:
            wanted = p["reshape_dims"]
            copied = {i for i, d in enumerate(wanted) if d == 0 and p["zero_is_placeholder"] and i < len(shape)}
            before = shape
            shape = tuple(before[i] if i in copied else d for i, d in enumerate(wanted))
            # the -1 is what the input's other extents leave: known when they are, as TensorRT infers it
            rest = [d for i, d in enumerate(before) if i not in copied]
            fixed = [d for i, d in enumerate(wanted) if i not in copied and d != -1]
            if list(wanted).count(-1) == 1 and all(d >= 0 for d in rest):
                volume = int(np.prod(rest, dtype=np.int64)) // max(int(np.prod(fixed, dtype=np.int64)), 1)
                shape = tuple(volume if d == -1 and i not in copied else d for i, d in enumerate(shape))
        return [shape], [dtypes[0]]
    if kind == "Gather":
        data, index = first, shapes[1]
        if p["mode"].name == "ND":
            depth = index[-1] if index else 0
            return [tuple(index[:-1]) + tuple(data[depth:])], [dtypes[0]]
        axis, elementwise = p["axis"], p["num_elementwise_dims"]
        return [tuple(data[:axis]) + tuple(index[elementwise:]) + tuple(data[axis + 1:])], [dtypes[0]]
    if kind == "Scatter":
        return [first], [dtypes[0]]
    if kind == "ElementWise":
        shape = _broadcast(first, shapes[1]) or first
        return [shape], [DataType.BOOL if p["op"] in COMPARISONS else dtypes[0]]
    if kind == "Unary":
        return [first], [dtypes[0]]
    if kind == "Select":
        shape = _broadcast(_broadcast(first, shapes[1]) or first, shapes[2]) or first
        return [shape], [dtypes[1]]
    if kind == "Concatenation":
        axis = p["axis"]
        if not first or axis >= len(first):
            return [first], [dtypes[0]]
        extent = [s[axis] for s in shapes]
        return [first[:axis] + (sum(extent) if min(extent) >= 0 else -1,) + first[axis + 1:]], [dtypes[0]]
    if kind == "Reduce":
        axes = [i for i in range(len(first)) if p["axes"] >> i & 1]
        shape = tuple(1 if i in axes else d for i, d in enumerate(first)) if p["keep_dims"] else \
            tuple(d for i, d in enumerate(first) if i not in axes)
        return [shape], [dtypes[0]]
    if kind == "TopK":
        shape = tuple(p["k"] if p["axes"] >> i & 1 else d for i, d in enumerate(first))
        return [shape, shape], [dtypes[0], DataType[p["indices"]]]
    if kind == "NMS":
        return [(-1, 3), ()], [p["indices_type"], DataType.INT32]
    if kind == "Cast":
        return [first], [DataType[p["to"]]]
    if kind == "PluginV2":
        keep = p["plugin"]._fields.get("max_output_boxes", 0)
        batch = first[0] if first else -1
        floats = dtypes[0] if dtypes else DataType.FLOAT
        return ([(batch, 1), (batch, keep, 4), (batch, keep), (batch, keep)],
                [DataType.INT32, floats, floats, DataType.INT32])
    raise AssertionError(kind)


def problems(network, DataType) -> list[str]:
    """What TensorRT reports when it builds a network with these added layers (empty when it would build)."""
    found = list(network._errors)
    floats = {DataType.FLOAT, DataType.HALF}
    indices = {DataType.INT32} | ({DataType.INT64} if hasattr(DataType, "INT64") else set())
    for layer in network._program:
        kind, p = layer._type, layer._params
        shapes = [tuple(t.shape) for t in layer._inputs]
        kinds = [t.dtype for t in layer._inputs]

        def fail(text: str, layer=layer, found=found) -> None:
            found.append(f"3: [network.cpp::validate] Error Code 3: API Usage Error ({layer.name}: {text})")

        if kind == "Constant" and int(np.prod(p["shape"], dtype=np.int64)) != p["value"].size:
            fail(f"Parameter check failed, condition: weights.count == volume(dimensions) ({p['value'].size} vs "
                 f"{list(p['shape'])})")
        elif kind == "Shuffle":
            order = p.get("first_transpose")
            if order is not None and sorted(order) != list(range(len(shapes[0]))):
                fail(f"first_transpose {list(order)} is not a permutation of rank {len(shapes[0])}")
            if p.get("reshape_dims") is not None and list(p["reshape_dims"]).count(-1) > 1:
                fail("reshape dimensions have more than one -1")
        elif kind == "Gather":
            if kinds[1] not in indices:
                fail(f"Gather indices must be INT32 or INT64, not {kinds[1].name}")
            if p["mode"].name == "ND":
                if not shapes[1] or not 0 < shapes[1][-1] <= len(shapes[0]):
                    fail(f"GatherND indices {list(shapes[1])} do not index data {list(shapes[0])}")
            elif not 0 <= p["axis"] < len(shapes[0]) or p["num_elementwise_dims"] not in (0, 1) or (
                    p["num_elementwise_dims"] == 1 and (p["axis"] < 1 or not shapes[1]
                                                         or not _broadcast(shapes[0][:1], shapes[1][:1]))):
                fail(f"Gather axis {p['axis']} with {p['num_elementwise_dims']} element-wise dims does not fit data "
                     f"{list(shapes[0])} and indices {list(shapes[1])}")
        elif kind == "Scatter":
            data, index, updates = shapes
            expected = tuple(index[:-1]) + tuple(data[index[-1]:]) if index and index[-1] > 0 else None
            if kinds[1] not in indices or kinds[0] != kinds[2]:
                fail("Scatter needs INT32/INT64 indices and updates of the data's type")
            elif p["mode"].name != "ND" or expected is None or len(expected) != len(updates) or not _broadcast(
                    expected, updates) == tuple(max(a, b) for a, b in zip(expected, updates)):
                fail(f"ScatterND updates {list(updates)} do not fit data {list(data)} and indices {list(index)}")
        elif kind == "ElementWise":
            if kinds[0] != kinds[1]:
                fail(f"ElementWise inputs must have the same type ({kinds[0].name} vs {kinds[1].name})")
            elif _broadcast(shapes[0], shapes[1]) is None:
                fail(f"ElementWise dimensions {list(shapes[0])} and {list(shapes[1])} are not broadcastable (ranks "
                     "must match)")
            elif (p["op"] in LOGICAL) != (kinds[0] == DataType.BOOL):
                fail(f"{p['op']} on {kinds[0].name}")
        elif kind == "Select":
            if kinds[0] != DataType.BOOL or kinds[1] != kinds[2]:
                fail(f"Select needs a BOOL condition and two inputs of one type ({[k.name for k in kinds]})")
            elif _broadcast(shapes[0], shapes[1]) is None or _broadcast(_broadcast(shapes[0], shapes[1]),
                                                                         shapes[2]) is None:
                fail(f"Select inputs {[list(s) for s in shapes]} must share a rank and broadcast")
        elif kind == "Unary" and kinds[0] not in floats:
            fail(f"Unary {p['op']} needs FLOAT or HALF, not {kinds[0].name}")
        elif kind == "Concatenation":
            rank = len(shapes[0])
            if len(set(kinds)) != 1 or any(len(s) != rank for s in shapes) or not 0 <= p["axis"] < rank or any(
                    _broadcast(tuple(d for i, d in enumerate(s) if i != p["axis"]),
                               tuple(d for i, d in enumerate(shapes[0]) if i != p["axis"])) is None for s in shapes):
                fail(f"Concatenation of {[list(s) for s in shapes]} on axis {p['axis']}")
        elif kind == "Reduce" and (kinds[0] not in floats | {DataType.INT32} or not p["axes"]
                                   or p["axes"] >> len(shapes[0])):
            fail(f"Reduce axes {p['axes']:#b} on {list(shapes[0])} {kinds[0].name}")
        elif kind == "TopK":
            axes = [i for i in range(len(shapes[0])) if p["axes"] >> i & 1]
            extent = shapes[0][axes[0]] if len(axes) == 1 else -1
            if kinds[0] not in floats or len(axes) != 1 or p["axes"] >> len(shapes[0]) or axes[0] < len(shapes[0]) - 4:
                fail(f"TopK on {list(shapes[0])} {kinds[0].name} with axes {p['axes']:#b}")
            elif not 0 < p["k"] <= TOPK_MAX_K or (extent >= 0 and p["k"] > extent):
                fail(f"TopK k {p['k']} (at most {TOPK_MAX_K}, and no more than the {extent} elements)")
        elif kind == "NMS":
            found.extend(_nms_problems(layer, shapes, kinds, floats, DataType))
        elif kind == "Cast":
            allowed = {"FLOAT", "HALF", "INT32", "BOOL", "INT64", "INT8", "UINT8", "BF16"}
            if kinds[0].name not in allowed or p["to"] not in allowed:
                fail(f"Cast from {kinds[0].name} to {p['to']}")
        elif kind == "PluginV2":
            found.extend(f"{layer.name}: {text}" for text in layer._params["plugin"]._check(shapes, kinds))
    return found


def _nms_problems(layer, shapes, kinds, floats, DataType) -> list[str]:
    out = []
    boxes, scores = shapes[0], shapes[1]
    if kinds[0] not in floats or kinds[0] != kinds[1]:
        out.append(f"INMSLayer boxes and scores must both be FLOAT or both HALF ({kinds[0].name}, {kinds[1].name})")
    if len(boxes) not in (3, 4) or boxes[-1] not in (4, -1) or len(scores) != 3:
        out.append(f"INMSLayer boxes {list(boxes)} / scores {list(scores)}: [B, N, 4] and [B, N, C] expected")
    if shapes[2] != () or kinds[2] != DataType.INT32:
        out.append(f"INMSLayer MaxOutputBoxesPerClass must be a 0D INT32 tensor, not {list(shapes[2])} "
                   f"{kinds[2].name}")
    for index, what in ((3, "IoUThreshold"), (4, "ScoreThreshold")):
        if index < len(shapes) and (shapes[index] != () or kinds[index] != DataType.FLOAT):
            out.append(f"INMSLayer {what} must be a 0D FLOAT tensor, not {list(shapes[index])} {kinds[index].name}")
    if not 0 < layer._params["topk_box_limit"] <= NMS_TOPK_LIMIT:
        out.append(f"INMSLayer TopK box limit {layer._params['topk_box_limit']} exceeds {NMS_TOPK_LIMIT}")
    return [f"{layer.name}: {text}" for text in out]
