"""LaneATT lane detection: the model, its anchors, export, post-processing, the repository and the client.

>>> from orinkit.lanes import LaneDetector
>>> with LaneDetector("localhost:8001") as detect:  # doctest: +SKIP
...     lanes = detect("road.jpg")

Names load on first use: the model needs torch, the client and post-processing do not.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "LaneATT": "model", "build_lane_model": "model", "show_random_lanes": "model",
    "export_lane_onnx": "export",
    "PostprocessOptions": "postprocess", "LaneResult": "postprocess",
    "postprocess_batch": "postprocess",
    "build_lane_repository": "repository",
    "Lane": "client", "LaneDetector": "client",
    "culane_score": "metrics", "lane_agreement": "metrics",
    "render_road": "synth",
    "calibrate_card": "calibrate", "card_threshold": "calibrate",
    "LaneError": "errors", "LaneInputError": "errors", "CheckpointMismatchError": "errors",
    "MissingWeightsError": "errors",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'orinkit.lanes' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"orinkit.lanes.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
