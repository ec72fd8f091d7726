"""LaneATT → ONNX (input ``image``, output ``proposals``) plus the anchors that decode its output."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from orinkit.convert.torch_export import DEFAULT_OPSET, export_torch
from orinkit.core.optional import require

INPUT_NAME = "image"
OUTPUT_NAME = "proposals"


def anchors_path(onnx_path: str | os.PathLike[str]) -> Path:
    """Where :func:`export_lane_onnx` puts the anchors for ``onnx_path``: ``<stem>.anchors.npy`` beside it."""
    onnx_path = Path(onnx_path)
    return onnx_path.with_name(f"{onnx_path.stem}.anchors.npy")


def export_lane_onnx(model, path: str | os.PathLike[str], *, dynamic_batch: bool = False,
                     fp16_io: bool = False) -> Path:
    """Export ``model`` (a :class:`~orinkit.lanes.model.LaneATT`) to ``path``, checked against onnxruntime.

    ``fp16_io``: the graph takes and returns FP16 (as clients that send half-precision frames expect; the
    ensemble then pre-processes to FP16 and post-processes FP16 proposals); inside it computes as exported, and
    edge-convert's FP16 gate decides what runs in FP16. The anchors written beside it are the model's own
    buffer: top-k selection can break frequency ties differently elsewhere, so recomputing them would not be safe.
    """
    torch = require("torch")
    path = Path(path)
    device = model.anchors.device
    # Values in 0..1 like a real input; fixed so that an export is reproducible.
    sample = torch.rand(1, 3, model.img_h, model.img_w, generator=torch.Generator().manual_seed(0)).to(device)
    module = model
    if fp16_io:
        module, sample = _HalfIO(model).eval(), sample.half()
    export_torch(module, [sample], path, input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                 dynamic_batch=dynamic_batch, opset=DEFAULT_OPSET)
    np.save(anchors_path(path), model.anchors.detach().cpu().numpy())
    return path


def _half_io_class():
    torch = require("torch")

    class HalfIO(torch.nn.Module):
        """FP16 in and out around a model that computes in FP32."""

        def __init__(self, model) -> None:
            super().__init__()
            self.model = model

        def forward(self, x):
            return self.model(x.float()).half()

    return HalfIO


def _HalfIO(model):  # noqa: N802 - reads as the class it makes
    return _half_io_class()(model)
