"""Decode a detector's outputs into boxes, then class-aware NMS: vectorised numpy, batched.

Semantics as Ultralytics' ``non_max_suppression`` (the reference most users compare against): a candidate is a
box whose best class score is strictly above ``conf`` (one class per box, no multi-label), at most
:data:`MAX_CANDIDATES` of them (the best) go into NMS, a box is suppressed by a kept box of the same class with IoU
strictly above ``iou``, and at most ``max_det`` boxes are kept, best first. The kept set and its order are
torchvision's ``batched_nms`` ones.

NMS runs in rounds: the best remaining box of every class is kept at once and everything of its class it overlaps
goes, so a round is a handful of array operations over all classes together and the number of rounds is the
largest number of boxes kept in one class, not the number kept overall. Once ``max_det`` boxes are kept, boxes
ranked below the ``max_det``-th kept one cannot enter the answer (nor suppress anything that could) and are dropped.
At validation's conf 0.001 (thousands of candidates, clusters of overlapping boxes) this is several times faster
than torchvision's C++ loop; see benchmarks/detect.py. Imports numpy only (this runs in Triton's Python backend).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError

MAX_CANDIDATES = 30000  # Ultralytics' max_nms: more candidates than this, and only the best go into NMS

Candidates = tuple[np.ndarray, np.ndarray, np.ndarray]  # boxes xyxy [M, 4] float32, scores [M], class ids [M]


@dataclass(frozen=True)
class NmsOptions:
    conf: float = 0.25  # keep boxes scoring strictly above this (validation uses 0.001)
    iou: float = 0.7  # suppress same-class boxes overlapping a kept one by more than this
    max_det: int = 300
    agnostic: bool = False  # suppress across classes too

    def __post_init__(self) -> None:
        if not isinstance(self.conf, (int, float)) or not 0 <= self.conf < 1:
            raise DetectInputError(f"conf must be in [0, 1), got {self.conf!r}", hint="e.g. 0.25 (0.001 to validate)")
        if not isinstance(self.iou, (int, float)) or not 0 < self.iou <= 1:
            raise DetectInputError(f"iou must be in (0, 1], got {self.iou!r}", hint="e.g. 0.7 (Ultralytics' default)")
        if isinstance(self.max_det, bool) or not isinstance(self.max_det, (int, np.integer)) or self.max_det < 1:
            raise DetectInputError(f"max_det must be a whole number >= 1, got {self.max_det!r}", hint="e.g. 300")

    def as_dict(self) -> dict:
        return {"conf": self.conf, "iou": self.iou, "max_det": int(self.max_det), "agnostic": self.agnostic}

    @classmethod
    def from_dict(cls, data: Mapping) -> NmsOptions:
        return cls(**data)


DEFAULT_OPTIONS = NmsOptions()


def _empty() -> Candidates:
    return np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32)


def _xyxy(cx, cy, w, h) -> np.ndarray:
    boxes = np.empty((len(cx), 4), np.float32)
    half_w, half_h = w / 2, h / 2
    boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3] = cx - half_w, cy - half_h, cx + half_w, cy + half_h
    return boxes


def _best(index: np.ndarray, score: np.ndarray, limit: int) -> np.ndarray:
    if index.size <= limit:
        return index
    return index[np.argsort(-score[index], kind="stable")[:limit]]


def decode_yolov8(x: np.ndarray, conf: float, limit: int = MAX_CANDIDATES) -> Candidates:
    """One image's ``[4 + nc, N]``: cx cy w h in input pixels, then class scores (after the sigmoid)."""
    scores = x[4:]
    # The max over classes reads the [nc, N] rows in memory order (0.13 ms at 80 x 8400 here; np.argmax along
    # the same axis costs 1.1 ms): the class is looked up only for the few candidates above conf.
    best = scores.max(axis=0)
    index = _best(np.flatnonzero(best > conf), best, limit)
    if not index.size:
        return _empty()
    classes = scores[:, index].argmax(axis=0).astype(np.int32)
    box = x[:4, index]
    return _xyxy(box[0], box[1], box[2], box[3]), best[index], classes


def _objectness_candidates(x: np.ndarray, conf: float, limit: int):
    """Rows of ``[N, 5 + nc]`` whose objectness x best class score is above conf: (rows, scores, classes)."""
    # score = obj x cls <= obj: rows whose objectness is not above conf cannot pass, and are never multiplied.
    rows = np.flatnonzero(x[:, 4] > conf)
    candidates = x[rows]
    products = candidates[:, 5:] * candidates[:, 4:5]
    classes = products.argmax(axis=1)
    scores = products[np.arange(len(rows)), classes]
    passed = scores > conf
    rows, scores, classes, candidates = rows[passed], scores[passed], classes[passed], candidates[passed]
    if rows.size > limit:
        best = np.argsort(-scores, kind="stable")[:limit]
        rows, scores, classes, candidates = rows[best], scores[best], classes[best], candidates[best]
    return rows, candidates, scores, classes.astype(np.int32)


def decode_yolov5(x: np.ndarray, conf: float, limit: int = MAX_CANDIDATES) -> Candidates:
    """One image's ``[N, 5 + nc]``: cx cy w h (pixels), objectness, class scores; score = objectness x class."""
    _, rows, scores, classes = _objectness_candidates(x, conf, limit)
    return _xyxy(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]), scores, classes


@functools.lru_cache(maxsize=8)
def yolox_grid(size: tuple[int, int], strides: tuple[int, ...]) -> np.ndarray:
    """``[N, 3]`` (cell x, cell y, stride) of every YOLOX row, level by level, row-major within a level."""
    height, width = size
    levels = []
    for stride in strides:
        ys, xs = np.meshgrid(np.arange(math.ceil(height / stride)), np.arange(math.ceil(width / stride)),
                             indexing="ij")
        levels.append(np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, stride)], axis=1))
    return np.concatenate(levels).astype(np.float32)


def decode_yolox(x: np.ndarray, conf: float, size: tuple[int, int], strides: tuple[int, ...],
                 limit: int = MAX_CANDIDATES) -> Candidates:
    """One image's raw YOLOX ``[N, 5 + nc]``: xy offsets in cells, log wh in cells, objectness, class scores."""
    grid = yolox_grid(tuple(size), tuple(strides))
    if len(grid) != len(x):
        raise DetectInputError(f"a YOLOX output of {len(x)} rows does not fit a {size[0]}x{size[1]} input's "
                               f"{len(grid)} grid cells at strides {strides}", hint="check the input size")
    index, rows, scores, classes = _objectness_candidates(x, conf, limit)
    cell = grid[index]
    stride = cell[:, 2]
    cx, cy = (rows[:, 0] + cell[:, 0]) * stride, (rows[:, 1] + cell[:, 1]) * stride
    w, h = np.exp(rows[:, 2]) * stride, np.exp(rows[:, 3]) * stride
    return _xyxy(cx, cy, w, h), scores, classes


def decode_end2end(x: np.ndarray, conf: float) -> Candidates:
    """One image's ``[K, 6+]``: x1 y1 x2 y2 score class (NMS done inside, or not needed)."""
    keep = np.flatnonzero(x[:, 4] > conf)
    return np.ascontiguousarray(x[keep, :4], np.float32), x[keep, 4].astype(np.float32), \
        x[keep, 5].astype(np.int32)


def decode_efficient_nms(count, boxes, scores, classes, conf: float) -> Candidates:
    """One image's EfficientNMS outputs: the first ``count`` rows are valid."""
    n = min(max(int(np.asarray(count).reshape(-1)[0]), 0), len(scores))
    keep = np.flatnonzero(scores[:n] > conf)
    return np.asarray(boxes[keep], np.float32), np.asarray(scores[keep], np.float32), \
        np.asarray(classes[keep]).astype(np.int32)


def _probabilities(logits: np.ndarray) -> np.ndarray:
    if logits.size and (logits.min() < 0 or logits.max() > 1):  # logits, not yet through the sigmoid
        return 1 / (1 + np.exp(-logits.astype(np.float32)))
    return logits


def decode_detr(boxes: np.ndarray, probabilities: np.ndarray, conf: float, size: tuple[int, int]) -> Candidates:
    """One image's DETR queries: boxes ``[Q, 4]`` cx cy w h as fractions of the input, class probabilities."""
    classes = probabilities.argmax(axis=1)
    scores = probabilities[np.arange(len(classes)), classes]
    keep = np.flatnonzero(scores > conf)
    height, width = size
    box = boxes[keep].astype(np.float32) * np.array([width, height, width, height], np.float32)
    return _xyxy(box[:, 0], box[:, 1], box[:, 2], box[:, 3]), scores[keep].astype(np.float32), \
        classes[keep].astype(np.int32)


def head_arrays(head, outputs) -> list[np.ndarray]:
    """The outputs ``head`` reads, in its order, from a mapping by name (or a sequence in that order)."""
    if isinstance(outputs, Mapping):
        missing = [name for name in head.outputs if name not in outputs]
        if missing:
            raise DetectInputError(f"the outputs lack {', '.join(missing)} (given: {', '.join(map(str, outputs))})",
                                   hint=f"pass the model's outputs by name: {', '.join(head.outputs)}")
        arrays = [outputs[name] for name in head.outputs]
    else:
        arrays = list(outputs)
        if len(arrays) != len(head.outputs):
            raise DetectInputError(f"a {head.kind} head reads {len(head.outputs)} outputs, got {len(arrays)}",
                                   hint=f"pass {', '.join(head.outputs)} in that order")
    arrays = [np.asarray(a) for a in arrays]
    # FP16 engines answer float16: numpy's float16 arithmetic is emulated and slow, so one conversion up front.
    arrays = [a.astype(np.float32) if a.dtype.kind == "f" and a.dtype != np.float32 else a for a in arrays]
    batch = {len(a) if a.ndim else -1 for a in arrays}
    if len(batch) != 1 or -1 in batch:
        raise DetectInputError(f"the outputs disagree on the batch size or have none: "
                               f"{[list(a.shape) for a in arrays]}", hint="pass the model's outputs as they came")
    return arrays


def _check(array: np.ndarray, rank: int, what: str, last: int | None = None, axis: int = -1) -> None:
    if array.ndim != rank or (last is not None and array.shape[axis] != last):
        raise DetectInputError(f"expected {what}, got shape {list(array.shape)}",
                               hint="pass the outputs of the model this head was recognized from")


def decode(head, outputs, *, conf: float = 0.25, limit: int = MAX_CANDIDATES) -> list[Candidates]:
    """Per batch item: candidate boxes xyxy in MODEL-INPUT pixels, scores, class ids; only those scoring above
    ``conf``. Raw heads (``head.needs_nms``) still need :func:`nms`; the others are final."""
    arrays = head_arrays(head, outputs)
    kind, nc = head.kind, head.num_classes
    if kind == "yolov8":
        _check(arrays[0], 3, f"[batch, 4 + {nc}, anchors]", nc + 4 if nc else None, axis=1)
        return [decode_yolov8(x, conf, limit) for x in arrays[0]]
    if kind in ("yolov5", "yolox"):
        _check(arrays[0], 3, f"[batch, rows, 5 + {nc}]", nc + 5 if nc else None)
        if kind == "yolov5":
            return [decode_yolov5(x, conf, limit) for x in arrays[0]]
        return [decode_yolox(x, conf, head.input_size, head.strides or (8, 16, 32), limit) for x in arrays[0]]
    if kind == "end2end":
        _check(arrays[0], 3, "[batch, boxes, 6] (x1 y1 x2 y2 score class)")
        if arrays[0].shape[2] < 6:
            _check(arrays[0], 3, "[batch, boxes, 6] (x1 y1 x2 y2 score class)", 6)
        return [decode_end2end(x, conf) for x in arrays[0]]
    if kind == "efficient_nms":
        count, boxes, scores, classes = arrays
        _check(boxes, 3, "boxes [batch, K, 4]", 4)
        _check(scores, 2, "scores [batch, K]")
        return [decode_efficient_nms(*item, conf) for item in zip(count, boxes, scores, classes)]
    if kind == "detr":
        if len(arrays) == 1:  # [B, Q, 4 + nc]
            _check(arrays[0], 3, f"[batch, queries, 4 + {nc}]", nc + 4 if nc else None)
            boxes, probabilities = arrays[0][..., :4], _probabilities(arrays[0][..., 4:])
        else:
            boxes, logits = arrays
            _check(boxes, 3, "boxes [batch, queries, 4]", 4)
            _check(logits, 3, f"logits [batch, queries, {nc}]", nc or None)
            probabilities = _probabilities(logits)
        return [decode_detr(b, p, conf, head.input_size) for b, p in zip(boxes, probabilities)]
    raise DetectInputError(f"unknown head kind {kind!r}", hint="recognize the model with orinkit.detect.recognize")


PAIR_BUDGET = 32  # pairs per box worth one vectorised pass instead of more rounds (see nms)
FIXPOINT_PASSES = 12
ROUND_SHARE = 64  # rounds are slow where a round keeps fewer than one box in this many


def _overlaps(x1, y1, x2, y2, area, label, iou: float, budget: int):
    """Same-class pairs (i, j) with IoU > ``iou``, from a sweep along x (classes laid side by side). IoU > t needs
    the x overlap above t x the wider box's width, so a box j starting right of box i can only matter if it starts
    before x1_i + (1 - t) w_i: at t = 0.7 a third of each box's width is searched, not all of it. None when more
    than ``budget`` pairs would be measured."""
    count = len(x1)
    span = float(max(x2.max(), x1.max()) - min(x1.min(), x2.min())) + 2.0
    start = x1.astype(np.float64)
    width = x2.astype(np.float64) - start
    # a margin of a hair more than float32's rounding: the bound must not drop a pair float32 IoU would keep
    limit = start + (1.0 - iou) * width + 1e-5 * (np.abs(start) + np.abs(width)) + 1e-6
    key = label * span + start
    order = np.argsort(key, kind="stable")
    ends = np.searchsorted(key[order], (label * span + limit)[order], side="left")
    lengths = np.maximum(ends - np.arange(1, count + 1), 0)
    total = int(lengths.sum())
    if total > budget:
        return None
    first = np.repeat(np.arange(count), lengths)
    second = first + 1 + np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    i, j = order[first], order[second]
    width = np.minimum(x2[i], x2[j]) - np.maximum(x1[i], x1[j])
    height = np.minimum(y2[i], y2[j]) - np.maximum(y1[i], y1[j])
    inter = np.maximum(width, 0) * np.maximum(height, 0)
    over = inter / (area[i] + area[j] - inter) > iou
    return i[over], j[over]


def _fixpoint(rank, pairs) -> np.ndarray | None:
    """Greedy NMS from the overlapping pairs: a box is kept unless a kept box ranked above it overlaps it. That
    rule read all at once, repeated until nothing changes, is the greedy answer (each pass settles at least the
    next box in rank order; in practice a few passes settle all). None if it has not settled in time."""
    i, j = pairs
    above, below = np.where(rank[i] < rank[j], i, j), np.where(rank[i] < rank[j], j, i)
    keep = np.ones(len(rank), bool)
    for _ in range(FIXPOINT_PASSES):
        suppressed = np.zeros(len(rank), bool)
        suppressed[below[keep[above]]] = True
        if np.array_equal(~suppressed, keep):
            return rank[keep]
        keep = ~suppressed
    return None


def nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, *, iou: float = 0.7, max_det: int = 300,
        agnostic: bool = False) -> np.ndarray:
    """Greedy class-aware NMS: indices of the kept boxes, best score first (ties: the lower index first).

    Rounds first (each keeps the best remaining box of every class and drops what it overlaps: dense clusters go
    fast); once the boxes left meet few others along x (a crowd of one class, or what clusters leave behind), the
    rest is settled from the overlapping pairs at once (:func:`_fixpoint`)."""
    count = len(scores)
    if count == 0:
        return np.zeros(0, np.intp)
    order = np.argsort(-np.asarray(scores, np.float32), kind="stable")  # rank -> box
    classes = np.zeros(count, np.int64) if agnostic else np.asarray(classes).astype(np.int64, copy=False)
    grouped = order[np.argsort(classes[order], kind="stable")]  # by class, each class best first
    rank = np.empty(count, np.intp)
    rank[order] = np.arange(count)
    rank = rank[grouped]
    box = np.asarray(boxes, np.float32)[grouped]
    x1, y1, x2, y2 = (np.ascontiguousarray(box[:, i]) for i in range(4))
    area = (x2 - x1) * (y2 - y1)
    label = classes[grouped]
    kept: list[np.ndarray] = []
    kept_count, rounds, next_look = 0, 0, 0
    with np.errstate(divide="ignore", invalid="ignore"):
        while rank.size:
            first = np.empty(rank.size, bool)  # the best remaining box of each class: kept, whatever else happens
            first[0] = True
            np.not_equal(label[1:], label[:-1], out=first[1:])
            heads = np.flatnonzero(first)
            # Few classes for many boxes (a crowd of one class; agnostic NMS) make rounds slow: at rounds 0, 1, 3,
            # 7... see whether the boxes left meet few enough others to settle them from their pairs at once.
            if heads.size * ROUND_SHARE < rank.size and rounds >= next_look:
                next_look = 2 * rounds + 1
                pairs = _overlaps(x1, y1, x2, y2, area, label, iou, PAIR_BUDGET * rank.size)
                settled = None if pairs is None else _fixpoint(rank, pairs)
                if settled is not None:
                    kept.append(settled)
                    break
            rounds += 1
            head = heads[np.cumsum(first) - 1]  # each box's class head
            width = np.minimum(x2, x2[head]) - np.maximum(x1, x1[head])
            height = np.minimum(y2, y2[head]) - np.maximum(y1, y1[head])
            inter = np.maximum(width, 0) * np.maximum(height, 0)
            # torchvision's float32 arithmetic, in its order; 0/0 (two empty boxes) is NaN, which suppresses nothing
            alive = ~(inter / (area + area[head] - inter) > iou)
            alive[heads] = False
            kept.append(rank[heads])
            kept_count += heads.size
            if kept_count >= max_det:
                cut = np.partition(np.concatenate(kept), max_det - 1)[max_det - 1]
                alive &= rank < cut
            rank, x1, y1, x2, y2, area, label = (a[alive] for a in (rank, x1, y1, x2, y2, area, label))
    return order[np.sort(np.concatenate(kept))[:max_det]]


def postprocess(head, outputs, transforms: Sequence | None, options: NmsOptions = DEFAULT_OPTIONS) -> list[Detections]:
    """Detections per batch item, in the source images' pixels (``transforms`` from prepare/prepare_batch; None
    leaves them in model-input pixels), named by the head's class names."""
    candidates = decode(head, outputs, conf=options.conf)
    if transforms is not None:
        transforms = list(transforms)
        if len(transforms) != len(candidates):
            raise DetectInputError(f"{len(candidates)} images in the outputs but {len(transforms)} transforms",
                                   hint="pass the transforms prepare_batch returned with this batch")
    results = []
    for index, (boxes, scores, classes) in enumerate(candidates):
        if head.needs_nms:
            keep = nms(boxes, scores, classes, iou=options.iou, max_det=options.max_det, agnostic=options.agnostic)
        else:
            keep = np.argsort(-scores, kind="stable")[:options.max_det]
        boxes = boxes[keep]
        if transforms is not None:
            boxes = transforms[index].to_source(boxes)
        results.append(Detections(boxes, scores[keep], classes[keep], head.names))
    return results
