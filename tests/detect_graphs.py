"""Small ONNX graphs whose outputs have each detection head's exact layout, exported by torch.onnx.export, and
realistic raw detector outputs for NMS tests and benchmarks/detect.py.

The graphs are tiny untrained conv nets (random weights, so scores sit near 0.5 and many boxes pass conf 0.25:
a hard case for NMS), but their heads are built as the real ones are: the YOLOv8 head decodes a DFL distribution
against anchors computed from the feature maps' shapes (so a dynamic height and width export as Ultralytics'
does), YOLOv5 rows are anchors x cells with objectness, YOLOX rows are raw grid offsets, the NMS-free head takes a
top-k. Ultralytics-style ``metadata_props`` (``names``, ``stride``, ``imgsz``, ``task``...) are written as its
exporter writes them: ``str()`` of each value.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

STRIDES = (8, 16, 32)
NAMES = ("person", "car", "dog")


class _Backbone(nn.Module):
    """Feature maps at strides 8, 16 and 32."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1), nn.SiLU(), nn.Conv2d(width, width, 3, 2, 1), nn.SiLU(),
                                  nn.Conv2d(width, width, 3, 2, 1), nn.SiLU())
        self.down16 = nn.Sequential(nn.Conv2d(width, width, 3, 2, 1), nn.SiLU())
        self.down32 = nn.Sequential(nn.Conv2d(width, width, 3, 2, 1), nn.SiLU())

    def forward(self, x):
        p8 = self.stem(x)
        p16 = self.down16(p8)
        return [p8, p16, self.down32(p16)]


def _anchors(features):
    """Cell centres (grid units) and strides for every cell, from the maps' shapes (Range nodes, as Ultralytics')."""
    points, strides = [], []
    for feature, stride in zip(features, STRIDES):
        h, w = feature.shape[2], feature.shape[3]
        ys = torch.arange(h, dtype=torch.float32) + 0.5
        xs = torch.arange(w, dtype=torch.float32) + 0.5
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        points.append(torch.stack((gx, gy), -1).view(-1, 2))
        strides.append(torch.full((h * w, 1), float(stride)))
    return torch.cat(points).transpose(0, 1), torch.cat(strides).transpose(0, 1)


class YoloV8Head(nn.Module):
    """Ultralytics' Detect head in small: [B, 4 + nc (+ extra), N], cx cy w h in pixels, sigmoid scores."""

    def __init__(self, nc: int = 3, reg_max: int = 16, extra: int = 0) -> None:
        super().__init__()
        self.nc, self.reg_max, self.extra = nc, reg_max, extra
        self.backbone = _Backbone()
        self.box = nn.ModuleList(nn.Conv2d(8, 4 * reg_max, 1) for _ in STRIDES)
        self.cls = nn.ModuleList(nn.Conv2d(8, nc + extra, 1) for _ in STRIDES)
        self.register_buffer("bins", torch.arange(reg_max, dtype=torch.float32).view(1, reg_max, 1, 1))

    def distances_and_scores(self, x):
        features = self.backbone(x)
        box = torch.cat([conv(f).flatten(2) for conv, f in zip(self.box, features)], 2)
        cls = torch.cat([conv(f).flatten(2) for conv, f in zip(self.cls, features)], 2)
        # DFL: a softmax over reg_max bins per side, its expectation is the distance in cells
        dist = box.unflatten(1, (4, self.reg_max)).transpose(1, 2).softmax(1)
        ltrb = (dist * self.bins).sum(1)
        anchors, strides = _anchors(features)
        return ltrb, anchors, strides, cls

    def forward(self, x):
        ltrb, anchors, strides, cls = self.distances_and_scores(x)
        lt, rb = ltrb[:, :2], ltrb[:, 2:]
        x1y1, x2y2 = anchors - lt, anchors + rb
        boxes = torch.cat(((x1y1 + x2y2) / 2, x2y2 - x1y1), 1) * strides
        if not self.extra:
            return torch.cat((boxes, cls.sigmoid()), 1)
        scores, extra = cls.split((self.nc, self.extra), 1)
        return torch.cat((boxes, scores.sigmoid(), extra), 1)


class End2EndHead(YoloV8Head):
    """An NMS-free head: the top K boxes as [B, K, 6] (x1 y1 x2 y2 score class), as YOLOv10/YOLO26 export."""

    def __init__(self, nc: int = 3, k: int = 100, efficient_nms: bool = False) -> None:
        super().__init__(nc)
        self.k, self.efficient_nms = k, efficient_nms

    def forward(self, x):
        out = super().forward(x)
        cxcy, wh, scores = out[:, :2], out[:, 2:4], out[:, 4:]
        boxes = torch.cat((cxcy - wh / 2, cxcy + wh / 2), 1).transpose(1, 2)
        best, label = scores.max(1)
        top, index = best.topk(self.k, dim=1)
        picked = boxes.gather(1, index.unsqueeze(-1).expand(-1, -1, 4))
        classes = label.gather(1, index)
        if self.efficient_nms:  # EfficientNMS_TRT's outputs: counts, boxes, scores, int32 classes
            count = (top > 0.25).sum(1, keepdim=True).to(torch.int32)
            return count, picked, top, classes.to(torch.int32)
        return torch.cat((picked, top.unsqueeze(-1), classes.unsqueeze(-1).float()), -1)


class YoloV5Head(nn.Module):
    """YOLOv5's Detect: three anchors a cell, rows (anchor, y, x) per level, cx cy w h obj cls after decode."""

    ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119), (116, 90, 156, 198, 373, 326))

    def __init__(self, nc: int = 3) -> None:
        super().__init__()
        self.no = nc + 5
        self.backbone = _Backbone()
        self.heads = nn.ModuleList(nn.Conv2d(8, 3 * self.no, 1) for _ in STRIDES)
        self.register_buffer("anchors", torch.tensor(self.ANCHORS, dtype=torch.float32).view(3, 1, 3, 1, 1, 2))

    def forward(self, x):
        rows = []
        for conv, feature, stride, anchor in zip(self.heads, self.backbone(x), STRIDES, self.anchors):
            b, _, h, w = feature.shape
            y = conv(feature).view(b, 3, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
            gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                                    indexing="ij")
            grid = torch.stack((gx, gy), -1).view(1, 1, h, w, 2)
            xy = (y[..., :2] * 2 - 0.5 + grid) * stride
            wh = (y[..., 2:4] * 2) ** 2 * anchor
            rows.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.no))
        return torch.cat(rows, 1)


class YoloXHead(nn.Module):
    """YOLOX exported without its decode: [B, N, 5 + nc] raw xy/log-wh offsets in cells, sigmoid obj and cls."""

    def __init__(self, nc: int = 3) -> None:
        super().__init__()
        self.heads = nn.ModuleList(nn.Conv2d(8, 5 + nc, 1) for _ in STRIDES)
        self.backbone = _Backbone()

    def forward(self, x):
        levels = []
        for conv, feature in zip(self.heads, self.backbone(x)):
            out = conv(feature)
            levels.append(torch.cat((out[:, :4], out[:, 4:].sigmoid()), 1).flatten(2))
        return torch.cat(levels, 2).transpose(1, 2)


class DetrHead(nn.Module):
    """DETR-style queries: boxes [B, Q, 4] (sigmoid cx cy w h, fractions of the input) and class logits
    [B, Q, nc]; ``single`` gives Ultralytics' RT-DETR layout [B, Q, 4 + nc] with sigmoid scores."""

    def __init__(self, nc: int = 3, queries: int = 32, single: bool = False) -> None:
        super().__init__()
        self.backbone = _Backbone()
        self.pool = nn.AdaptiveAvgPool2d((4, 8))
        self.boxes = nn.Linear(8, 4)
        self.logits = nn.Linear(8, nc)
        self.queries, self.single = queries, single

    def forward(self, x):
        tokens = self.pool(self.backbone(x)[0]).flatten(2).transpose(1, 2)[:, :self.queries]
        boxes, logits = self.boxes(tokens).sigmoid(), self.logits(tokens)
        if self.single:
            return torch.cat((boxes, logits.sigmoid()), -1)
        return logits, boxes  # transformers' order: logits first


class SegmentHead(YoloV8Head):
    """Ultralytics' Segment: [B, 4 + nc + 32, N] and mask prototypes [B, 32, H/4, W/4]."""

    def __init__(self, nc: int = 3) -> None:
        super().__init__(nc, extra=32)
        self.proto = nn.Conv2d(3, 32, 4, 4)

    def forward(self, x):
        return super().forward(x), self.proto(x)


class Classifier(nn.Module):
    def __init__(self, nc: int = 10) -> None:
        super().__init__()
        self.backbone = _Backbone()
        self.fc = nn.Linear(8, nc)

    def forward(self, x):
        return self.fc(self.backbone(x)[2].mean((2, 3)))


class Rows(nn.Module):
    """Not a detector: an image in, [B, rows, columns] out (a lane model's proposals, say)."""

    def __init__(self, rows: int = 70, columns: int = 77) -> None:
        super().__init__()
        self.backbone = _Backbone()
        self.fc = nn.Linear(8, rows * columns)
        self.rows, self.columns = rows, columns

    def forward(self, x):
        return self.fc(self.backbone(x)[2].mean((2, 3))).view(-1, self.rows, self.columns)


def ultralytics_metadata(task: str = "detect", size=(128, 128), names=NAMES, **extra) -> dict:
    return {"description": "Ultralytics YOLOv8n model (orinkit test graph)", "author": "Ultralytics",
            "version": "8.3.0", "stride": 32, "task": task, "batch": 1, "imgsz": list(size),
            "names": dict(enumerate(names)), "args": {"batch": 1, "half": False, **extra.pop("args", {})}, **extra}


def write_metadata(path: Path, metadata: dict) -> None:
    import onnx

    model = onnx.load(str(path))
    for key, value in metadata.items():
        prop = model.metadata_props.add()
        prop.key, prop.value = key, str(value)
    onnx.save(model, str(path))


def export(module: nn.Module, path: Path, *, size=(128, 128), outputs=("output0",), dynamic: bool = False,
           metadata: dict | None = None, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    for parameter in module.parameters():  # deterministic weights whatever the construction order
        nn.init.normal_(parameter, 0.0, 0.3)
    module.eval()
    axes = {}
    if dynamic:
        axes = {"images": {0: "batch", 2: "height", 3: "width"}}
        for name in outputs:
            axes[name] = {0: "batch", 2: "anchors"}
    sample = torch.rand(1, 3, *size)
    with torch.no_grad():
        torch.onnx.export(module, (sample,), str(path), input_names=["images"],
                          output_names=list(outputs), dynamic_axes=axes, opset_version=17, dynamo=False)
        answers = module(sample)
    if dynamic:
        _declare_static_dims(path, [answers] if isinstance(answers, torch.Tensor) else answers, axes)
    if metadata:
        write_metadata(path, metadata)
    return path


def _declare_static_dims(path: Path, answers, axes: dict) -> None:
    """torch's exporter leaves every output dim after a shape-computed Reshape unknown; Ultralytics' (simplified)
    dynamic exports declare the channel dim: [batch, 4 + nc, anchors]. Declared the same way here."""
    import onnx

    model = onnx.load(str(path))
    for output, answer in zip(model.graph.output, answers):
        for index, dim in enumerate(output.type.tensor_type.shape.dim):
            if index not in axes.get(output.name, {}):
                dim.Clear()
                dim.dim_value = int(answer.shape[index])
    onnx.save(model, str(path))


# name: (module factory, export keyword arguments) for every graph the tests recognize
GRAPHS = {
    "yolov8": (lambda: YoloV8Head(), {"metadata": ultralytics_metadata()}),
    "yolov8_plain": (lambda: YoloV8Head(), {}),
    "yolov8_dynamic": (lambda: YoloV8Head(), {"dynamic": True, "metadata": ultralytics_metadata(size=(160, 160))}),
    "yolov5": (lambda: YoloV5Head(), {"outputs": ("output",), "metadata": {"stride": 32, "names": dict(
        enumerate(NAMES))}}),
    "yolov5_plain": (lambda: YoloV5Head(), {"outputs": ("output",)}),
    "yolox": (lambda: YoloXHead(), {"outputs": ("output",)}),
    "end2end": (lambda: End2EndHead(), {"metadata": ultralytics_metadata(args={"nms": True})}),
    "end2end_plain": (lambda: End2EndHead(), {}),
    "efficient_nms": (lambda: End2EndHead(efficient_nms=True),
                      {"outputs": ("num_dets", "det_boxes", "det_scores", "det_classes")}),
    "detr": (lambda: DetrHead(), {"outputs": ("logits", "pred_boxes")}),
    "rtdetr": (lambda: DetrHead(single=True), {"metadata": ultralytics_metadata()}),
    "segment": (lambda: SegmentHead(), {"outputs": ("output0", "output1"),
                                        "metadata": ultralytics_metadata(task="segment")}),
    "segment_plain": (lambda: SegmentHead(), {"outputs": ("output0", "output1")}),
    "pose": (lambda: YoloV8Head(nc=1, extra=51), {"metadata": ultralytics_metadata(
        task="pose", names=("person",), kpt_shape=[17, 3])}),
    "classify": (lambda: Classifier(), {"metadata": ultralytics_metadata(task="classify")}),
    "classify_plain": (lambda: Classifier(), {}),
    "rows": (lambda: Rows(), {}),
}


def export_graph(name: str, folder: Path) -> Path:
    factory, options = GRAPHS[name]
    return export(factory(), Path(folder) / f"{name}.onnx", **options)


def anchor_grid(size=(640, 640), strides=STRIDES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cell centres x, y (pixels) and strides of every YOLOv8 anchor, level by level."""
    height, width = size
    xs, ys, ss = [], [], []
    for stride in strides:
        gy, gx = np.meshgrid(np.arange(-(-height // stride)), np.arange(-(-width // stride)), indexing="ij")
        xs.append((gx.ravel() + 0.5) * stride)
        ys.append((gy.ravel() + 0.5) * stride)
        ss.append(np.full(gx.size, stride))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(ss)


def realistic_yolov8_output(rng: np.random.Generator, size=(640, 640), nc: int = 80, objects: int = 8,
                            sizes: tuple[float, float] = (24, 400)) -> np.ndarray:
    """One image's ``[4 + nc, N]`` as a trained YOLOv8 gives it: background class scores far below any threshold
    (log10 ~ N(-5, 0.8): about half the anchors pass conf 0.001, none pass 0.25), and per object a cluster of
    anchors around its centre, at the levels that fit its size, with jittered boxes of its size and scores that
    fall off away from its centre (about ten above 0.25, hundreds above 0.001), plus a weaker second class.
    Object sides are drawn log-uniformly from ``sizes`` pixels."""
    cx, cy, stride = anchor_grid(size)
    n = cx.size
    out = np.empty((4 + nc, n), np.float32)
    out[0] = cx + rng.normal(0, 0.3, n) * stride
    out[1] = cy + rng.normal(0, 0.3, n) * stride
    out[2] = stride * np.exp(rng.normal(1.0, 0.5, n))
    out[3] = stride * np.exp(rng.normal(1.0, 0.5, n))
    out[4:] = 10.0 ** rng.normal(-5.0, 0.8, (nc, n))
    for _ in range(objects):
        bw, bh = np.exp(rng.uniform(np.log(sizes[0]), np.log(sizes[1]), 2))
        x1, y1 = rng.uniform(0, size[1] - bw), rng.uniform(0, size[0] - bh)
        ocx, ocy = x1 + bw / 2, y1 + bh / 2
        label, peak = int(rng.integers(nc)), rng.uniform(0.4, 0.95)
        distance = ((cx - ocx) / (bw / 2)) ** 2 + ((cy - ocy) / (bh / 2)) ** 2
        level_fit = np.exp(-np.log2(stride / np.clip(min(bw, bh) / 4, 8, 32)) ** 2)
        score = peak * np.exp(-distance / 0.3) * level_fit
        inside = score > 1e-3
        jitter = 1 + rng.normal(0, 0.06, (4, int(inside.sum())))
        out[0, inside] = ocx * jitter[0] ** 0.1
        out[1, inside] = ocy * jitter[1] ** 0.1
        out[2, inside] = bw * jitter[2]
        out[3, inside] = bh * jitter[3]
        out[4 + label, inside] = np.maximum(out[4 + label, inside], score[inside])
        other = int(rng.integers(nc))
        out[4 + other, inside] = np.maximum(out[4 + other, inside], 0.35 * score[inside])
    return out
