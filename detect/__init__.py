"""Object detectors: heads recognized from the graph, images prepared as trained, decode + NMS, one Detections type.

>>> from orinkit.detect import Detector
>>> detect = Detector("yolov8n.onnx")  # doctest: +SKIP
>>> detect("street.jpg").to_records()  # doctest: +SKIP

Names load on first use; ``orinkit.detect.preprocess`` and ``orinkit.detect.postprocess`` import numpy only
(they run inside Triton's Python backend), the Detector needs onnxruntime and recognize() needs onnx.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "DetectError": "errors", "DetectInputError": "errors", "UnrecognizedHeadError": "errors",
    "UnsupportedTaskError": "errors", "LabelsError": "errors",
    "Detections": "detections",
    "HEAD_KINDS": "heads", "Head": "heads", "recognize": "heads", "is_detector": "heads",
    "Preprocess": "preprocess", "Transform": "preprocess", "preprocess_for": "preprocess", "prepare": "preprocess",
    "prepare_batch": "preprocess",
    "load_image": "images",
    # postprocess() itself stays in orinkit.detect.postprocess: a package attribute of that name is the module
    "NmsOptions": "postprocess", "decode": "postprocess", "nms": "postprocess",
    "Detector": "detector",
    "match": "metrics", "detection_f1": "metrics", "map50_95": "metrics",
    "load_labels": "labels",
    "RemoteDetector": "client",
    "build_detection_repository": "repository",
    "Tracker": "track", "TrackerOptions": "track", "id_switches": "track_metrics",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'orinkit.detect' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"orinkit.detect.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
