"""The decode glue ``edge-convert --nms`` adds to a parsed network before NMS: a raw detector head becomes boxes
``[B, N, 4]`` (x1 y1 x2 y2, input pixels) and scores ``[B, N, C]``.

Only layers that TensorRT 8.5 already binds are used (pyGraph.cpp on release/8.5, release/10.16, release/11.1:
``add_gather``, ``add_shuffle`` with ``first_transpose``/``reshape_dims``, ``add_elementwise``, ``add_unary``,
``add_concatenation``, ``add_constant``); ``add_cast`` only where a strongly typed network hands over a non-FP32
head, which happens only on 10.x/11 (8.5 has no ICastLayer, and its networks keep FP32 tensors). Channels are taken
with gathers rather than slices so that dynamic batch and anchor axes need no shape arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from orinkit.convert.errors import EngineBuildError, NmsError

PREFIX = "orinkit_nms"


class Glue:
    """Adds layers to a network, each checked and named. The bindings return None where TensorRT refuses a layer
    (network.cpp logs why), so every add goes through :meth:`_made`."""

    def __init__(self, trt: ModuleType, network) -> None:
        self.trt, self.network, self.count = trt, network, 0
        self.layers: list = []

    def _made(self, layer, what: str):
        if layer is None:
            raise EngineBuildError(f"TensorRT {self.trt.__version__} refused the {what} layer of the NMS glue",
                                   hint="see the TensorRT errors above; build without --nms and use the Python "
                                        "NMS step instead")
        self.count += 1
        layer.name = f"{PREFIX}/{self.count}_{what}"
        self.layers.append(layer)
        return layer

    def const(self, values: np.ndarray, shape: Sequence[int] | None = None):
        # A numpy array converts to trt.Weights implicitly; the network keeps it alive (keep_alive<1, 3>).
        array = np.ascontiguousarray(values)
        dims = tuple(array.shape if shape is None else shape)
        return self._made(self.network.add_constant(dims, array), "constant").get_output(0)

    def gather(self, tensor, indices: Sequence[int], axis: int):
        index = self.const(np.asarray(list(indices), np.int32))
        return self._made(self.network.add_gather(tensor, index, axis), "gather").get_output(0)

    def gather_rows(self, tensor, indices, axis: int = 1):
        """Per batch item: ``tensor[b, indices[b, k], ...]`` (IGatherLayer kDEFAULT with one element-wise dim)."""
        layer = self._made(self.network.add_gather(tensor, indices, axis), "gather")
        layer.num_elementwise_dims = 1
        return layer.get_output(0)

    def transpose(self, tensor, order: Sequence[int]):
        layer = self._made(self.network.add_shuffle(tensor), "shuffle")
        layer.first_transpose = tuple(order)
        return layer.get_output(0)

    def reshape(self, tensor, dims: Sequence[int]):
        # zero_is_placeholder (the default) keeps a 0 entry at the input's extent: the dynamic batch passes through.
        layer = self._made(self.network.add_shuffle(tensor), "shuffle")
        layer.reshape_dims = tuple(dims)
        return layer.get_output(0)

    def binary(self, left, right, op: str):
        operation = getattr(self.trt.ElementWiseOperation, op)
        return self._made(self.network.add_elementwise(left, right, operation), op.lower()).get_output(0)

    def scalar(self, tensor, value: float, op: str, rank: int = 3):
        """``tensor <op> value`` with the value as a constant of the tensor's rank (TensorRT broadcasts size-1 axes
        only between tensors of equal rank)."""
        kind = np.int32 if tensor.dtype == self.trt.int32 else np.float32
        return self.binary(tensor, self.const(np.full((1,) * rank, value, kind)), op)

    def unary(self, tensor, op: str):
        layer = self.network.add_unary(tensor, getattr(self.trt.UnaryOperation, op))
        return self._made(layer, op.lower()).get_output(0)

    def concat(self, tensors: Sequence, axis: int):
        layer = self._made(self.network.add_concatenation(list(tensors)), "concat")
        layer.axis = axis
        return layer.get_output(0)

    def cast(self, tensor, dtype):
        return self._made(self.network.add_cast(tensor, dtype), "cast").get_output(0)

    def select(self, condition, then, otherwise):
        return self._made(self.network.add_select(condition, then, otherwise), "select").get_output(0)

    def reduce(self, tensor, op: str, axis: int):
        layer = self.network.add_reduce(tensor, getattr(self.trt.ReduceOperation, op), 1 << axis, True)
        return self._made(layer, "reduce").get_output(0)


def candidate_count(spec, tensor) -> int | None:
    """The number of candidate boxes N the head yields: from the tensor where it is static, else from the input
    size and strides (Ultralytics: P3-P5, strides 8/16/32; YOLOv5: three anchors per cell)."""
    axis = 2 if spec.head == "yolov8" else 1
    shape = tuple(tensor.shape)
    if len(shape) == 3 and shape[axis] > 0:
        return int(shape[axis])
    height, width = spec.input_size
    if not height or not width:
        return None
    strides = spec.strides or (8, 16, 32)
    cells = sum(math.ceil(height / s) * math.ceil(width / s) for s in strides)
    return 3 * cells if spec.head == "yolov5" else cells


def decode_head(glue: Glue, head, spec):
    """The head tensor → (boxes x1 y1 x2 y2 [B, N, 4], scores [B, N, C]), both FP32."""
    trt = glue.trt
    if len(tuple(head.shape)) != 3:
        raise NmsError(f"the {spec.head} head '{spec.output}' has shape {list(head.shape)} in the parsed network, "
                       "not [batch, channels, boxes] or [batch, boxes, channels]",
                       hint="check --head; build without --nms to use the Python NMS step")
    if head.dtype != trt.float32:  # a strongly typed FP16 graph (10.x INT8 routes, 11.x) may end in HALF
        head = glue.cast(head, trt.float32)
    classes = spec.num_classes
    channels = tuple(head.shape)[1 if spec.head == "yolov8" else 2]
    expected = 4 + classes if spec.head == "yolov8" else 5 + classes
    if channels > 0 and channels != expected:
        raise NmsError(f"the {spec.head} head '{spec.output}' has {channels} channels, {expected} expected for "
                       f"{classes} classes", hint="check --labels and --head")
    if spec.head == "yolov8":  # [B, 4 + C, N]: cx cy w h, then class scores (already sigmoid)
        xy = glue.transpose(glue.gather(head, (0, 1), 1), (0, 2, 1))
        wh = glue.transpose(glue.gather(head, (2, 3), 1), (0, 2, 1))
        scores = glue.transpose(glue.gather(head, range(4, 4 + classes), 1), (0, 2, 1))
    else:  # [B, N, 5 + C]: box, objectness, class scores; the score is objectness x class
        xy, wh = glue.gather(head, (0, 1), 2), glue.gather(head, (2, 3), 2)
        objectness = glue.gather(head, (4,), 2)
        scores = glue.binary(glue.gather(head, range(5, 5 + classes), 2), objectness, "PROD")
        if spec.head == "yolox":
            xy, wh = _grid_decode(glue, xy, wh, spec, candidate_count(spec, head))
    half = glue.scalar(wh, 0.5, "PROD")
    boxes = glue.concat([glue.binary(xy, half, "SUB"), glue.binary(xy, half, "SUM")], 2)
    return boxes, scores


def best_class_only(glue: Glue, scores):
    """Zero every score but each box's best: one class per box, as Ultralytics' NMS and orinkit's Python step
    decide (NMS over all classes would let a box come back once per class above the threshold). ISelectLayer, not
    a cast, so that it builds on 8.5 too."""
    best = glue.reduce(scores, "MAX", 2)
    return glue.select(glue.binary(scores, best, "EQUAL"), scores, glue.scalar(scores, 0.0, "PROD"))


def yolox_grid(input_size: tuple[int, int], strides: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """YOLOX's ``demo_postprocess``: per stride, cells row by row (x fastest); (x, y) offsets [N, 2] and strides.
    A level of a padded-convolution backbone has ceil(size / stride) cells (orinkit.detect's decode counts so)."""
    height, width = input_size
    grids, steps = [], []
    for stride in strides:
        rows, cols = math.ceil(height / stride), math.ceil(width / stride)
        ys, xs = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        grids.append(np.stack((xs, ys), -1).reshape(-1, 2))
        steps.append(np.full((rows * cols, 1), stride))
    return np.concatenate(grids).astype(np.float32), np.concatenate(steps).astype(np.float32)


def _grid_decode(glue: Glue, xy, wh, spec, count: int | None):
    """YOLOX exports grid offsets: xy = (xy + grid) x stride, wh = exp(wh) x stride. The grid is a constant for
    the model's input size, so the engine's height and width must be that size."""
    if not spec.strides or not all(spec.input_size):
        raise NmsError("the YOLOX decode needs the input size and strides, which the head does not give",
                       hint="pass --shapes with the model's input size, or build without --nms")
    grid, stride = yolox_grid(spec.input_size, spec.strides)
    if count is not None and count != len(grid):
        raise NmsError(f"the YOLOX head yields {count} boxes, but strides {list(spec.strides)} at "
                       f"{spec.input_size[0]}x{spec.input_size[1]} make {len(grid)}",
                       hint="pass the --shapes the model was exported at, or build without --nms")
    steps = glue.const(stride[None])
    xy = glue.binary(glue.binary(xy, glue.const(grid[None]), "SUM"), steps, "PROD")
    wh = glue.binary(glue.unary(wh, "EXP"), steps, "PROD")
    return xy, wh
