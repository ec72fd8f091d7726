"""The gates' bridge to object detectors: whether a model is one, its box metric, and real pictures as samples.

The detection code lives in ``orinkit.detect`` (:mod:`orinkit.detect.gate_metric` for the gates); convert reaches
it by module name when a model is judged, and turns its answers and errors into the gate's own here, so neither
package's import statements point at the other for this (tests/test_layers.py reads them). Without orinkit.detect
every model is judged as before.

What a detector changes:

* ``--criterion auto`` judges it by its boxes (``--metric boxes``: :mod:`orinkit.detect.gate_metric`): the range
  criterion lets a graph whose scores are all zero pass, since the pixel coordinates set the range.
* Its samples are real photos letterboxed as the model was trained (scale, channel order, padding of its family),
  never random values: random inputs make a detector find nothing, and a gate that sees no box judges nothing.
* A folder of pictures (``--data DIR``, ``--calib DIR``) is prepared the same way.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.core.errors import OrinkitError

GATE_METRIC = "orinkit.detect.gate_metric"
HEADS = "orinkit.detect.heads"


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def recognize(model):
    """The detection head of ``model`` (an onnx.ModelProto or a path), or None for a model that is no detector
    (or where orinkit.detect is not installed)."""
    heads = _module(HEADS)
    if heads is None or model is None:
        return None
    try:
        return heads.recognize(model if not isinstance(model, os.PathLike) else str(model))
    except OrinkitError:
        return None


@dataclass(frozen=True)
class DetectorSpec:
    """``--task detect`` (with ``--head KIND`` where the graph cannot tell, ``--labels FILE`` for the class names):
    the model is a detector, judged and served as one; one that fits no head is refused, never judged by numbers."""

    head: str | None = None
    labels: Path | None = None


def mark(model, spec: DetectorSpec) -> None:
    """Recognize ``model`` (an onnx.ModelProto, before it is simplified and saved) as ``spec`` says and write the
    head and names into its metadata, so the gates, the engine's NMS and edge-repo add-detector all read them."""
    from orinkit.convert.errors import DetectorSpecError

    heads = _module(HEADS)
    if heads is None:
        raise DetectorSpecError("--task detect needs orinkit.detect, which does not import here",
                                hint="reinstall orinkit")
    try:
        heads.mark(model, head=spec.head, labels=spec.labels)
    except OrinkitError as exc:
        raise DetectorSpecError(exc.message, hint=exc.hint) from None


def describe(head) -> str:
    """One line on a recognized head, for the report."""
    return (f"a {head.kind} detection head ({', '.join(head.outputs)}; {head.num_classes} classes, input "
            f"{head.input_size[0]}x{head.input_size[1]})")


def gate_metric():
    """orinkit.detect.gate_metric, which holds the box metric and the detector's samples."""
    module = _module(GATE_METRIC)
    if module is None:
        from orinkit.convert.errors import MetricError

        raise MetricError("the boxes metric needs orinkit.detect, which does not import here",
                          hint="reinstall orinkit, or judge with another --metric")
    return module


def box_metric(model, conf: float | None = None):
    """The ``boxes`` metric bound to ``model``: ``function(reference, candidate)`` → a MetricResult; FP32 finding
    no box raises NothingToJudgeError."""
    from orinkit.convert.errors import NothingToJudgeError
    from orinkit.convert.fp16.task_metrics import MetricResult

    module = gate_metric()
    measure = module.box_metric(model, conf=conf)

    def agreement(reference, candidate) -> MetricResult:
        try:
            result = measure(reference, candidate)
        except module.NoBoxesError as exc:
            raise NothingToJudgeError(exc.message, hint=exc.hint) from None
        return MetricResult("boxes", result.agreement, result.map_met, result.detail,
                            rank=result.agreement * result.map50_95)

    return agreement


def samples(head, inputs: Mapping[str, tuple[np.dtype, tuple[int, ...]]], count: int | None, folder=None
            ) -> tuple[list[dict], str]:
    """The gate's samples for a detector: pictures of ``folder`` (or the photos scikit-learn ships) prepared as
    its family was trained; (samples, what they are)."""
    from orinkit.convert.errors import SampleDataError

    module = gate_metric()
    try:
        return module.detector_samples(head, inputs, count, folder)
    except module.PicturesError as exc:
        raise SampleDataError(exc.message, hint=exc.hint) from None


def describe_preparation(head, shape) -> str:
    """How a picture becomes the detector's input, in words: "letterboxed to 320x320 (centred, pad 114), RGB, ..."."""
    return gate_metric().describe_preparation(head, shape)


def picture_preprocess(head) -> Callable:
    """``function(picture, shape)`` turning a --calib picture into the detector's input."""
    return gate_metric().picture_preprocess(head)
