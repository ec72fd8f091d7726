"""A tiny YOLOv8-style detector for the drawn scenes of :mod:`orinkit.detect.scenes`, and its ONNX export.

Anchor-free like YOLOv8: one prediction per grid cell at strides 8, 16 and 32, each the distances from the cell's
centre to the box's four sides (in strides, through a softplus instead of YOLOv8's DFL distribution) and a score per
class. Its ONNX output is Ultralytics' raw v8 layout ``[B, 4 + nc, N]`` (cx cy w h in input pixels, sigmoid
scores) with the metadata Ultralytics writes (``names`` as a dict literal, ``stride``, ``imgsz``, ``task``), so
:func:`orinkit.detect.recognize` reads it as ``yolov8`` and :class:`~orinkit.detect.Detector` prepares its input as
Ultralytics' (RGB, /255, letterboxed centred with 114).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from orinkit.core.optional import require

STRIDES = (8, 16, 32)
IMGSZ = (320, 320)  # (height, width) of the exported input
WIDTHS = (24, 32, 64, 96)  # channels at strides 4, 8, 16, 32
NECK = (32, 48, 64)  # channels of the head's inputs at strides 8, 16, 32


def build(num_classes: int = 3):
    """The detector as a torch module: NCHW RGB 0..1 in, (distances [B, 4, N], class logits [B, nc, N]) out in
    training mode, the v8 layout in eval mode (see :meth:`forward`)."""
    torch = require("torch")
    nn = torch.nn
    functional = torch.nn.functional

    def conv(cin: int, cout: int, kernel: int = 3, stride: int = 1):
        padding = kernel // 2 if kernel % 2 else 0  # an even kernel is a patch: no overlap, no padding
        return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, padding, bias=False), nn.BatchNorm2d(cout),
                             nn.ReLU(inplace=True))

    class Residual(nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.conv = conv(channels, channels)

        def forward(self, x):
            return x + self.conv(x)

    class Head(nn.Module):
        """One level's box and class branches (separate, as YOLOv8's decoupled head)."""

        def __init__(self, channels: int) -> None:
            super().__init__()
            self.box = nn.Sequential(conv(channels, channels), nn.Conv2d(channels, 4, 1))
            self.cls = nn.Sequential(conv(channels, channels), nn.Conv2d(channels, num_classes, 1))

        def forward(self, x):
            return self.box(x).flatten(2), self.cls(x).flatten(2)

    class SceneYolo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            w4, w8, w16, w32 = WIDTHS
            n8, n16, n32 = NECK
            self.num_classes = num_classes
            # a 4x4 patch to stride 4 at once: no layer at stride 2, where a CPU step spends most of its time in
            # memory-bound BatchNorm and ReLU
            self.stem = nn.Sequential(conv(3, w4, 4, 4), conv(w4, w4))
            self.down8 = nn.Sequential(conv(w4, w8, stride=2), Residual(w8), Residual(w8))
            self.down16 = nn.Sequential(conv(w8, w16, stride=2), Residual(w16), Residual(w16))
            self.down32 = nn.Sequential(conv(w16, w32, stride=2), Residual(w32))
            self.lateral32 = conv(w32, n32, 1)
            self.merge16 = nn.Sequential(conv(w16 + n32, n16, 1), conv(n16, n16))
            self.merge8 = nn.Sequential(conv(w8 + n16, n8, 1), conv(n8, n8))
            self.heads = nn.ModuleList(Head(c) for c in NECK)
            for head in self.heads:  # scores start near 0.01 (as YOLOv8's bias init): the loss starts calm
                nn.init.constant_(head.cls[-1].bias, -4.6)
                nn.init.constant_(head.box[-1].bias, 1.0)  # softplus(1) = 1.3 strides to each side
            self.register_buffer("anchors", torch.zeros(2, 0), persistent=False)
            self.register_buffer("scales", torch.zeros(1, 0), persistent=False)

        def levels(self, x):
            p8 = self.down8(self.stem(x))
            p16 = self.down16(p8)
            n32 = self.lateral32(self.down32(p16))
            n16 = self.merge16(torch.cat((p16, functional.interpolate(n32, scale_factor=2.0)), 1))
            n8 = self.merge8(torch.cat((p8, functional.interpolate(n16, scale_factor=2.0)), 1))
            return [n8, n16, n32]

        def raw(self, x):
            """(distances in strides [B, 4, N] l t r b, class logits [B, nc, N]), anchors level by level."""
            parts = [head(level) for head, level in zip(self.heads, self.levels(x))]
            distances = functional.softplus(torch.cat([p[0] for p in parts], 2))
            return distances, torch.cat([p[1] for p in parts], 2)

        def grid(self, height: int, width: int):
            """Cell centres [2, N] in input pixels and strides [1, N] for an input of that size."""
            if getattr(self, "_grid_size", None) != (height, width):
                centres, strides = anchor_grid(height, width)
                self.anchors = torch.from_numpy(centres).to(self.scales.device)
                self.scales = torch.from_numpy(strides).to(self.scales.device)
                self._grid_size = (height, width)
            return self.anchors, self.scales

        def boxes(self, distances, height: int, width: int):
            """xyxy [B, 4, N] in input pixels from the distances."""
            centres, strides = self.grid(height, width)
            lt, rb = distances[:, :2] * strides, distances[:, 2:] * strides
            return torch.cat((centres - lt, centres + rb), 1)

        def forward(self, x):
            distances, logits = self.raw(x)
            xyxy = self.boxes(distances, x.shape[2], x.shape[3])
            cxcy = (xyxy[:, :2] + xyxy[:, 2:]) / 2
            wh = xyxy[:, 2:] - xyxy[:, :2]
            return torch.cat((cxcy, wh, logits.sigmoid()), 1)

    return SceneYolo()


def anchor_grid(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Cell centres [2, N] (x, y in input pixels) and strides [1, N], level by level, row-major within a level
    (the order of the model's outputs and of Ultralytics')."""
    xs, ys, ss = [], [], []
    for stride in STRIDES:
        gy, gx = np.meshgrid(np.arange(-(-height // stride)), np.arange(-(-width // stride)), indexing="ij")
        xs.append((gx.ravel() + 0.5) * stride)
        ys.append((gy.ravel() + 0.5) * stride)
        ss.append(np.full(gx.size, stride))
    return np.stack([np.concatenate(xs), np.concatenate(ys)]).astype(np.float32), \
        np.concatenate(ss)[None].astype(np.float32)


def ultralytics_metadata(names, *, description: str = "orinkit drawn-scenes detector (YOLOv8-style)") -> dict:
    """Metadata as Ultralytics' exporter writes it (``str()`` of each value)."""
    from orinkit.core.version import __version__

    return {"description": description, "author": "orinkit", "version": __version__, "license": "Apache-2.0",
            "stride": str(max(STRIDES)), "task": "detect", "batch": "1", "imgsz": str(list(IMGSZ)),
            "names": str(dict(enumerate(names))), "args": str({"batch": 1, "half": False, "dynamic": False,
                                                                  "nms": False})}


def export_onnx(model, path: str | os.PathLike, names, *, opset: int = 17) -> Path:
    """``model`` (from :func:`build`) as ONNX at :data:`IMGSZ`, FP32, batch dynamic, output ``output0``
    ``[batch, 4 + nc, 2100]``, with Ultralytics' metadata; written atomically."""
    torch = require("torch")
    onnx = require("onnx")
    from orinkit.core.files import atomic_write_bytes

    model = model.eval()
    sample = torch.zeros(1, 3, *IMGSZ)
    target = Path(path)
    scratch = target.with_name(f".{target.name}.export")
    with torch.no_grad():
        model.grid(*IMGSZ)
        torch.onnx.export(model, (sample,), str(scratch), input_names=["images"], output_names=["output0"],
                          dynamic_axes={"images": {0: "batch"}, "output0": {0: "batch"}}, opset_version=opset,
                          dynamo=False, do_constant_folding=True)
    try:
        proto = onnx.load(str(scratch))
    finally:
        scratch.unlink(missing_ok=True)
    # torch's exporter leaves the output's dims after the concatenations unknown; Ultralytics' exports declare them
    with torch.no_grad():
        shape = model(sample).shape
    for index, dim in enumerate(proto.graph.output[0].type.tensor_type.shape.dim):
        if index:
            dim.Clear()
            dim.dim_value = int(shape[index])
    del proto.metadata_props[:]
    for key, value in ultralytics_metadata(names).items():
        prop = proto.metadata_props.add()
        prop.key, prop.value = key, value
    onnx.checker.check_model(proto)
    return atomic_write_bytes(target, proto.SerializeToString())
