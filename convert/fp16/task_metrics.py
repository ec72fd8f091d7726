"""Task metrics for the FP16 gate: judge the answers a model gives, not the digits of its tensors.

``--metric`` takes:

- ``topk[:K][@OUTPUT]``: classification. A row (a sample, or each row of a batch) agrees when FP16's top-1
  class is among FP32's top K and FP32's top-1 among FP16's top K (K=1: the same top-1). Default output: the first.
- ``mask[:THR][@OUTPUT]``: a probability map (text detector, binary segmenter): the IoU of the thresholded maps,
  worst sample (:mod:`orinkit.convert.fp16.dense_maps`).
- ``argmax[:AXIS][@OUTPUT]``: a class map (semantic segmentation): the share of pixels whose top class along AXIS
  (default 1) agrees, worst sample.
- ``boxes[:CONF]``: object detectors (:mod:`orinkit.detect.gate_metric`). The boxes of FP32 and FP16 are decoded
  by orinkit.detect's post-processing (NMS, score threshold CONF, default 0.25) and FP16's are matched to FP32's
  per class at IoU >= 0.5: the agreement is the F1 of the matches; mAP50-95 against FP32 must reach 0.99 too
  (in the detail; a box-regression branch that moves every box fails there, at F1 0.98). Bound
  to the model when the gate loads it; ``--criterion auto`` chooses it for every model with a detection head.
- ``lanes``: LaneATT. The proposals of FP32 and FP16 are decoded by the real post-processing (CULane settings)
  and FP16's lanes are scored against FP32's with the CULane rule (lanes 30 px wide at 1640x590, IoU >= 0.5,
  Hungarian matching): the agreement is that F1.
- ``package.module:function``: the user's own check, called as ``function(reference, candidate)`` with one dict
  per sample (output name → array) for each; it returns a bool, an agreement in [0, 1], or a
  :class:`MetricResult`.

A metric passes when its agreement reaches ``min_agreement`` (default 0.99) and a :class:`MetricResult` it returns
does not fail on its own terms (``passed`` False).
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.convert.errors import MetricError
from orinkit.convert.fp16 import dense_maps
from orinkit.core.errors import OrinkitError

DEFAULT_MIN_AGREEMENT = 0.99
Outputs = Sequence[Mapping[str, np.ndarray]]  # one dict per sample


def kit_metric(spec: str) -> str:
    """``spec`` itself, or for a task kit's name (``lanes``, ``detect``: orinkit.core.kits) the metric that kit
    judges its answers by: metrics live with the task they judge, and convert imports no kit."""
    from orinkit.core.kits import kits

    for kit in kits():
        if kit.name == spec and kit.metric:
            return kit.metric
    return spec


@dataclass(frozen=True)
class MetricResult:
    name: str
    agreement: float  # in [0, 1]
    passed: bool
    detail: str = ""
    # A finer measure to compare two failing results by (the INT8 gate's choice between calibrations); None: the
    # agreement. The boxes metric gives F1 x mAP50-95, since a result fails on either.
    rank: float | None = None

    def describe(self) -> str:
        state = "ok" if self.passed else "FAIL"
        return f"{self.name}: agreement {self.agreement:.4f}{' (' + self.detail + ')' if self.detail else ''} " \
               f"[{state}]"


@dataclass(frozen=True)
class TaskMetric:
    spec: str
    function: Callable[[Outputs, Outputs], object] | None
    min_agreement: float = DEFAULT_MIN_AGREEMENT
    factory: Callable[[object], Callable[[Outputs, Outputs], object]] | None = None  # the model → function

    def bound(self, model) -> TaskMetric:
        """The metric for ``model`` (a path to the FP32 ONNX): metrics that read the model (the head a detector's
        boxes are decoded by) are made here; the others are returned as they are."""
        if self.factory is None:
            return self
        return TaskMetric(self.spec, self.factory(model), self.min_agreement)

    def evaluate(self, reference: Outputs, candidate: Outputs) -> MetricResult:
        if self.function is None:
            raise MetricError(f"--metric {self.spec} judges with the model, which it was not given",
                              hint="bind it first: metric.bound(path to the FP32 ONNX)")
        try:
            value = self.function(reference, candidate)
        except MetricError:
            raise
        except OrinkitError as exc:
            raise MetricError(f"--metric {self.spec}: {exc.message}", hint=exc.hint) from exc
        except Exception as exc:
            raise MetricError(f"--metric {self.spec} failed: {type(exc).__name__}: {exc}",
                              hint="fix the metric function, or check that it fits this model's outputs") from exc
        vetoed, rank = False, None  # a MetricResult that fails on its own terms (the boxes' mAP50-95 bound) fails
        if isinstance(value, MetricResult):
            agreement, detail, vetoed, rank = value.agreement, value.detail, not value.passed, value.rank
        elif isinstance(value, (bool, np.bool_)) or (
                isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(float(value))):
            agreement, detail = float(value), ""
        else:
            raise MetricError(f"--metric {self.spec} returned {value!r}",
                              hint="return a bool, a number in [0, 1], or a MetricResult")
        return MetricResult(self.spec, agreement, agreement >= self.min_agreement and not vetoed, detail, rank)


def _topk(k: int, output: str | None):
    def agreement(reference: Outputs, candidate: Outputs) -> MetricResult:
        agreeing = rows = 0
        for ref, got in zip(reference, candidate):
            name = output or next(iter(ref))
            if name not in ref:
                raise MetricError(f"topk: the model has no output '{name}'", hint=f"its outputs are {', '.join(ref)}")
            r = np.asarray(ref[name], np.float64)
            c = np.asarray(got[name], np.float64)
            if r.ndim == 0 or r.shape[-1] < 2:
                raise MetricError(f"topk: output '{name}' has shape {list(r.shape)}, not [..., classes]",
                                  hint="name the logits output: --metric topk:K@OUTPUT")
            r, c = r.reshape(-1, r.shape[-1]), c.reshape(-1, c.shape[-1])
            top = min(k, r.shape[1])
            ref_top = np.argsort(-r, axis=1, kind="stable")[:, :top]
            got_top = np.argsort(-np.nan_to_num(c, nan=-np.inf), axis=1, kind="stable")[:, :top]
            for a, b in zip(ref_top, got_top):
                rows += 1
                agreeing += int(b[0] in a and a[0] in b)
        return MetricResult("topk", agreeing / rows if rows else 1.0, True, f"{agreeing}/{rows} rows agree")

    return agreement


def load_function(spec: str, *, flag: str = "--metric", error: type[Exception] = MetricError):
    """``package.module:function`` → the function, imported from the current folder too (as ``python -m``
    would); ``flag`` names the option in the error."""
    from orinkit.core.optional import current_folder_importable

    module, _, name = spec.partition(":")
    try:
        with current_folder_importable():
            return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise error(f"{flag} {spec} cannot be loaded: {exc}",
                    hint="give a package.module:function importable from the current folder or PYTHONPATH") from exc


def parse_metric(spec: str | None, min_agreement: float | None = None) -> TaskMetric | None:
    """``--metric`` text → a :class:`TaskMetric` (None for no metric)."""
    if spec is None:
        if min_agreement is not None:
            raise MetricError("--min-agreement applies to a --metric only", hint="add --metric, or drop it")
        return None
    threshold = DEFAULT_MIN_AGREEMENT if min_agreement is None else min_agreement
    if not 0.0 <= threshold <= 1.0:
        raise MetricError(f"--min-agreement must lie in [0, 1], got {threshold}", hint="e.g. 0.99")
    given, spec = spec, kit_metric(spec)  # reports keep the name the user gave
    match = re.fullmatch(r"topk(?::(\d+))?(?:@(.+))?", spec)
    if match:
        k = int(match[1] or 1)
        if k < 1:
            raise MetricError(f"--metric {spec}: K must be 1 or more", hint="e.g. topk:5")
        return TaskMetric(given, _topk(k, match[2]), threshold)
    dense = _dense(spec)
    if dense is not None:
        return TaskMetric(given, dense, threshold)
    match = re.fullmatch(r"boxes(?::([^@]*))?", spec)
    if match:
        return TaskMetric(given, None, threshold, _boxes(match[1], spec))
    if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", spec):
        return TaskMetric(given, load_function(spec), threshold)
    raise MetricError(f"unknown --metric '{spec}'",
                      hint="use topk[:K][@OUTPUT], mask[:THR][@OUTPUT], argmax[:AXIS][@OUTPUT], boxes[:CONF], "
                           "a task kit's name (lanes, detect), or package.module:function")


def _boxes(text: str | None, spec: str):
    """The factory of the ``boxes`` metric: the detector's head is read from the model when the gate binds it."""
    conf = None
    if text is not None:
        try:
            conf = float(text)
        except ValueError:
            conf = math.nan
        if not 0.0 < conf < 1.0:
            raise MetricError(f"--metric {spec}: the score threshold '{text}' is not a number in (0, 1)",
                              hint="e.g. boxes:0.25")

    def factory(model):
        from orinkit.convert.detection import box_metric

        return box_metric(model, conf)

    return factory


def _dense(spec: str):
    match = re.fullmatch(r"mask(?::([^@]*))?(?:@(.+))?", spec)
    if match:
        threshold = None if match[1] is None else (dense_maps.parse_threshold(match[1], spec),)
        return dense_maps.mask_agreement(threshold, match[2])
    match = re.fullmatch(r"argmax(?::([^@]*))?(?:@(.+))?", spec)
    if match:
        if match[1] is not None and not re.fullmatch(r"-?\d+", match[1]):
            raise MetricError(f"--metric {spec}: the axis '{match[1]}' is not a whole number", hint="e.g. argmax:1")
        return dense_maps.argmax_agreement(int(match[1] or 1), match[2])
    return None
