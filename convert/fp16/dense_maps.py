"""Dense maps: outputs that answer per pixel, judged by those answers instead of their digits.

A probability map (a text detector's, a binary segmenter's: a Sigmoid over an NCHW map) is read through a
threshold, and a class map (a Softmax over the channel axis, or ArgMax's labels) through each pixel's top class.
FP16 error at a pixel far from the threshold, or smaller than the gap between its two best classes, changes no
answer; yet the range criterion weighs the largest error of the whole map, which sits on the few pixels where a
sharp map crosses 0.5. A trained DBNet text detector whose masks FP16 keeps at IoU 0.9994 kept 47 % of its nodes
in FP32 under it.

- ``mask[:THR][@OUTPUT]``: per sample (and per row of a batch), the IoU of FP32's and FP16's maps thresholded
  at ``> THR``; without THR at each of 0.3, 0.5 and 0.7, whose worst decides (the user's threshold is unknown,
  and a sharp map agrees at all three). The agreement is the worst sample's IoU; a sample empty on both sides
  agrees. Default output: the first.
- ``argmax[:AXIS][@OUTPUT]``: per sample, the share of pixels whose top class along AXIS (default 1, NCHW's
  channel) is the same; integer outputs are labels already and are compared as they are.

:func:`producers` and :func:`default_maps` are what the ``auto`` criterion uses to find such outputs unasked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.convert.errors import MetricError

DEFAULT_THRESHOLDS = (0.3, 0.5, 0.7)
# Smallest height and width that make an output a map rather than a table of scores (boxes x classes).
MIN_SIDE = 8
# Ops that move a map's values without changing them: a Sigmoid or ArgMax behind them still makes the output.
SHAPE_ONLY = {"Identity", "Reshape", "Squeeze", "Unsqueeze"}
Outputs = Sequence[Mapping[str, np.ndarray]]


def _output(name: str | None, sample: Mapping[str, np.ndarray], metric: str) -> str:
    chosen = name or next(iter(sample))
    if chosen not in sample:
        raise MetricError(f"{metric}: the model has no output '{chosen}'",
                          hint=f"its outputs are {', '.join(sample)}")
    return chosen


def _rows(array: np.ndarray) -> np.ndarray:
    """One row per sample of a batch (axis 0), the map flattened."""
    return array.reshape(array.shape[0], -1) if array.ndim >= 2 else array.reshape(1, -1)


# How far past [0, 1] a probability map may stray by rounding (FP16's spacing just above 1 is 2**-10).
PROBABILITY_SLACK = 2.0 ** -10


def mask_agreement(thresholds: Sequence[float] | None, output: str | None):
    """The ``mask`` metric: IoU of the thresholded maps (see the module's text)."""
    def agreement(reference: Outputs, candidate: Outputs):
        from orinkit.convert.fp16.task_metrics import MetricResult  # that module imports this one

        name = _output(output, reference[0], "mask")
        refs = [np.asarray(r[name], np.float64) for r in reference]
        gots = [np.asarray(c[name], np.float64) for c in candidate]
        levels = tuple(thresholds or DEFAULT_THRESHOLDS)
        if thresholds is None:
            low, high = min(float(np.nanmin(r)) for r in refs), max(float(np.nanmax(r)) for r in refs)
            # A Sigmoid's output may sit a rounding step past 1 (or below 0): still a probability map. PP-OCRv4's
            # DBNet on real pages was refused with "values in [0, 1], not probabilities in [0, 1]".
            if low < -PROBABILITY_SLACK or high > 1.0 + PROBABILITY_SLACK:
                raise MetricError(f"mask: output '{name}' holds values in [{low:.6g}, {high:.6g}], not "
                                  "probabilities in [0, 1]",
                                  hint=f"give the threshold on its scale, e.g. --metric mask:0@{name} for logits")
        worst, where, informative = 1.0, None, []
        pooled: dict[float, list[int]] = {t: [0, 0] for t in levels}
        for level in levels:
            for index, (ref, got) in enumerate(zip(refs, gots)):
                a, b = _rows(ref) > level, _rows(got) > level
                inter, union = (a & b).sum(axis=1), (a | b).sum(axis=1)
                pooled[level][0] += int(inter.sum())
                pooled[level][1] += int(union.sum())
                if a.any() and not a.all():
                    informative.append(level)
                ious = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
                if ious.min() < worst:
                    worst, where = float(ious.min()), (index, level)
        if not informative:
            raise MetricError(f"mask: the FP32 map '{name}' is empty (or full) at {_levels(levels)} on every sample, "
                              "so its masks cannot tell FP16 from FP32",
                              hint="give --data with real inputs (pages, scenes), or a threshold inside the map's "
                                   "values (mask:THR)")
        iou = {t: (i / u if u else 1.0) for t, (i, u) in pooled.items()}
        detail = f"all samples' masks > {_levels(levels)} at IoU " + ", ".join(f"{v:.4f}" for v in iou.values())
        if where is not None:
            detail += f"; worst sample {where[0]} at {where[1]:g}"
        return MetricResult("mask", worst, True, detail)

    return agreement


def argmax_agreement(axis: int, output: str | None):
    """The ``argmax`` metric: share of pixels whose top class agrees, the worst sample's (see the module's text)."""
    def agreement(reference: Outputs, candidate: Outputs):
        from orinkit.convert.fp16.task_metrics import MetricResult

        name = _output(output, reference[0], "argmax")
        worst, where, same, total = 1.0, None, 0, 0
        for index, (ref, got) in enumerate(zip(reference, candidate)):
            a, b = _labels(np.asarray(ref[name]), axis, name), _labels(np.asarray(got[name]), axis, name)
            equal = _rows(a) == _rows(b)
            same, total = same + int(equal.sum()), total + equal.size
            share = float(equal.mean(axis=1).min()) if equal.size else 1.0
            if share < worst:
                worst, where = share, index
        detail = f"{same}/{total} pixels keep their class"
        if where is not None:
            detail += f"; worst sample {where}"
        return MetricResult("argmax", worst, True, detail)

    return agreement


def _labels(array: np.ndarray, axis: int, name: str) -> np.ndarray:
    if np.issubdtype(array.dtype, np.integer):
        return array
    if not -array.ndim <= axis < array.ndim:
        raise MetricError(f"argmax: output '{name}' has shape {list(array.shape)}, no axis {axis}",
                          hint=f"name its class axis: --metric argmax:AXIS@{name}")
    if array.shape[axis] < 2:
        raise MetricError(f"argmax: output '{name}' has {array.shape[axis]} entry on axis {axis}, not classes",
                          hint=f"name its class axis (--metric argmax:AXIS@{name}), or use mask for one channel")
    return np.argmax(np.nan_to_num(array.astype(np.float64), nan=-np.inf), axis=axis)


def _levels(levels: Sequence[float]) -> str:
    return ", ".join(f"{t:g}" for t in levels)


# -- recognising dense maps unasked (the auto criterion) --------------------------------------------------------

@dataclass(frozen=True)
class DenseMap:
    """An output judged by its task under the ``auto`` criterion: ``spec`` is the --metric that judges it."""

    output: str
    spec: str
    why: str


def producers(model) -> dict[str, dict]:
    """Per graph output whose values a Sigmoid, Softmax, LogSoftmax or ArgMax gives (through shape-only ops for
    Sigmoid and ArgMax, whose answers do not depend on the layout): that op, its node and axis."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    made_by = {name: node for node in model.graph.node for name in node.output}
    found = {}
    for output in model.graph.output:
        node, reshaped = made_by.get(output.name), False
        while node is not None and node.op_type in SHAPE_ONLY and node.input:
            node, reshaped = made_by.get(node.input[0]), True
        if node is None or node.op_type not in ("Sigmoid", "Softmax", "LogSoftmax", "ArgMax"):
            continue
        if reshaped and node.op_type in ("Softmax", "LogSoftmax"):
            continue  # the class axis may have moved
        axis = next((a.i for a in node.attribute if a.name == "axis"), None)
        if axis is None:
            axis = 0 if node.op_type == "ArgMax" else (-1 if opset >= 13 else 1)
        # Before opset 13 Softmax normalises over every axis from ``axis`` on: per pixel only when that is the last.
        found[output.name] = {"op": node.op_type, "node": node.name, "axis": axis, "flattening": opset < 13,
                              "reshaped": reshaped}
    return found


def _spatial(shape: Sequence[int], skip: int | None = None) -> bool:
    """Whether ``shape`` (batch first) has two other axes of at least MIN_SIDE: a map, not a list of scores."""
    sides = [d for i, d in enumerate(shape[1:], start=1) if i != skip and d >= MIN_SIDE]
    return len(sides) >= 2


def default_maps(found: Mapping[str, dict], names: Sequence[str], reference) -> tuple[list[DenseMap], list[str]]:
    """The outputs the ``auto`` criterion judges by their task, from :func:`producers` and the FP32 outputs
    (``reference[sample][output]``); and notes on maps it leaves to the range criterion, saying why."""
    maps, notes = [], []
    for index, name in enumerate(names):
        if name not in found:
            continue
        info = found[name]
        first = np.asarray(reference[0][index])
        shape = "x".join(str(d) for d in first.shape)
        # Three axes only after a Squeeze or Reshape of the map: a Sigmoid's [N, boxes, classes] scores are no map.
        if info["op"] == "Sigmoid" and (first.ndim == 4 or first.ndim == 3 and info["reshaped"]) \
                and _spatial(first.shape):
            if not any(_informative(np.asarray(s[index]), t) for s in reference for t in DEFAULT_THRESHOLDS):
                notes.append(f"{name} is a probability map but the FP32 one is empty (or full) at "
                             f"{_levels(DEFAULT_THRESHOLDS)} on every sample, so its masks cannot judge FP16: the "
                             "range criterion judges it (give --data with real inputs)")
                continue
            maps.append(DenseMap(name, f"mask@{name}", f"a probability map: {info['op']} {info['node']} gives "
                                                        f"{shape}"))
        elif info["op"] in ("Softmax", "LogSoftmax") and first.ndim == 4:
            axis = info["axis"] % first.ndim
            if info["flattening"] and axis != first.ndim - 1:
                continue
            if axis != 0 and first.shape[axis] >= 2 and _spatial(first.shape, skip=axis):
                maps.append(DenseMap(name, f"argmax:{axis}@{name}",
                                     f"a class map: {info['op']} {info['node']} over axis {axis} "
                                     f"({first.shape[axis]} classes) of {shape}"))
        elif info["op"] == "ArgMax" and np.issubdtype(first.dtype, np.integer) and first.ndim in (3, 4) \
                and _spatial(first.shape):
            maps.append(DenseMap(name, f"argmax@{name}", f"a label map: ArgMax {info['node']} gives {shape}"))
    return maps, notes


def _informative(array: np.ndarray, level: float) -> bool:
    above = array > level
    return bool(above.any() and not above.all())


def parse_threshold(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise MetricError(f"--metric {spec}: the threshold '{text}' is not a number", hint="e.g. mask:0.3")
    return value
