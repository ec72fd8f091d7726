"""LaneATT-Lite: the LaneATT interface at a cost a 2-core CPU can train.

Same input (``[B, 3, 360, 640]`` BGR in 0..1), same anchors (all 2784 by default), same output
(``[B, N, 5 + 72]`` proposals that :mod:`orinkit.lanes.postprocess`, the ``lane_detection`` ensemble and
``LaneDetector`` decode unchanged). What changes is where LaneATT-R18 spends its time when it trains:

- the backbone: a ResNet-18-shaped stack of basic blocks (2, 2, 2, 2) at ``width`` channels in its first stage
  (64 is ResNet-18; 16 is a quarter); its overall stride stays 32, so the anchor features come from the same
  11 x 20 cells as LaneATT's;
- the attention: LaneATT's ``Linear(704 → N-1)`` plus ``A @ features`` costs ``2 · N² · 704`` multiply-adds per
  image (≈ 11 GMAC at N = 2784, more than ResNet-18 itself) and as much again backwards. Here each anchor asks
  with a ``key_dim`` query and gathers ``value_dim`` channels, from one of two kinds of keys:

  - ``attention="cells"`` (the default): the 11 x 20 cells of the feature map, each with a learned position key.
    The anchors' own features are pooled from those cells, so the context is of the same kind as LaneATT's,
    at ``N · 220 · (key_dim + value_dim)`` multiply-adds;
  - ``attention="anchors"``: the other anchors' features plus a learned per-anchor key (the position that
    LaneATT's per-anchor output columns encode), ``N² · (key_dim + value_dim)``. Self-attention is allowed: the
    anchor's own features are concatenated beside the context anyway, and a mask would be an N x N constant in
    the ONNX.

Exports to plain MatMul/Softmax/Gather ONNX (no ScatterND, NonZero, loops or Pad).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from orinkit.lanes.anchored import AnchoredModel
from orinkit.lanes.errors import LaneInputError

ATTENTIONS = ("cells", "anchors")
# How the image is normalised inside the model: "none" (the network sees 0..1 as the ensemble scales it) or
# "image" (each image's channels to mean 0, standard deviation 1 first: an exposure, contrast or colour cast a
# camera adds is gone before the first convolution). Inside the model, so the ensemble's pre-processing is one.
INPUT_NORMS = ("none", "image")


class _Block(nn.Module):
    """torchvision's BasicBlock, written out so that any width works (torchvision's ResNet fixes 64..512)."""

    def __init__(self, inp: int, out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + identity)


def resnet18_like(width: int) -> tuple[nn.Sequential, int]:
    """A ResNet-18 layout (stem stride 4, stages of two basic blocks at width x 1, 2, 4, 8) → (module, channels)."""
    stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                         nn.MaxPool2d(3, 2, 1))
    layers, inp = [stem], width
    for index, out in enumerate((width, 2 * width, 4 * width, 8 * width)):
        stride = 1 if index == 0 else 2
        layers.append(nn.Sequential(_Block(inp, out, stride), _Block(out, out, 1)))
        inp = out
    return nn.Sequential(*layers), inp


class LaneATTLite(AnchoredModel):
    """See the module docstring. ``anchor_feat_channels`` per cell x 11 rows make an anchor's features."""

    kind = "lite"

    def __init__(self, anchors: np.ndarray | None = None, *, width: int = 16, anchor_feat_channels: int = 32,
                 key_dim: int = 32, value_dim: int = 64, attention: str = "cells", input_norm: str = "none",
                 img_w: int = 640, img_h: int = 360) -> None:
        super().__init__()
        for name, value in (("width", width), ("anchor_feat_channels", anchor_feat_channels),
                            ("key_dim", key_dim), ("value_dim", value_dim)):
            if not isinstance(value, int) or value < 1:
                raise LaneInputError(f"{name} must be a positive whole number, got {value!r}")
        if attention not in ATTENTIONS:
            raise LaneInputError(f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}")
        if input_norm not in INPUT_NORMS:
            raise LaneInputError(f"input_norm must be one of {', '.join(INPUT_NORMS)}, got {input_norm!r}")
        self._set_anchors(anchors, img_w, img_h)
        self.config = {"width": width, "anchor_feat_channels": anchor_feat_channels, "key_dim": key_dim,
                       "value_dim": value_dim, "attention": attention, "input_norm": input_norm}
        self.attention = attention
        self.input_norm = input_norm
        self.feature_extractor, channels = resnet18_like(width)
        self.conv1 = nn.Conv2d(channels, anchor_feat_channels, kernel_size=1)
        pooled = anchor_feat_channels * self.fmap_h
        self.query = nn.Linear(pooled, key_dim)
        source = anchor_feat_channels if attention == "cells" else pooled
        self.key = nn.Linear(source, key_dim)
        self.value = nn.Linear(source, value_dim)
        places = self.fmap_h * self.fmap_w if attention == "cells" else self.n_anchors
        self.position_key = nn.Parameter(torch.zeros(places, key_dim))
        self.cls_layer = nn.Linear(pooled + value_dim, 2)
        self.reg_layer = nn.Linear(pooled + value_dim, self.n_offsets + 1)
        self.scale = 1.0 / math.sqrt(key_dim)
        for layer in (self.cls_layer, self.reg_layer):
            nn.init.normal_(layer.weight, mean=0.0, std=0.001)
            nn.init.zeros_(layer.bias)
        nn.init.normal_(self.position_key, std=0.02)

    def normalise(self, x: torch.Tensor) -> torch.Tensor:
        """What the backbone sees (``input_norm``)."""
        if self.input_norm == "none":
            return x
        # Written as mean and mean of squares (ReduceMean, Sub, Mul, Sqrt in ONNX); the floor keeps a flat grey
        # frame (a covered lens) finite instead of dividing by zero.
        centred = x - x.mean(dim=(2, 3), keepdim=True)
        return centred / torch.sqrt((centred * centred).mean(dim=(2, 3), keepdim=True) + 1e-4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fmap = self.conv1(self.feature_extractor(self.normalise(x)))
        features = self.pool_anchor_features(fmap)
        if self.attention == "cells":
            c = fmap.shape[1]
            source = fmap[:, :, :self.fmap_h, :self.fmap_w].reshape(-1, c, self.fmap_h * self.fmap_w).transpose(1, 2)
        else:
            source = features
        query = self.query(features) * self.scale
        key = self.key(source) + self.position_key
        attention = torch.softmax(torch.matmul(query, key.transpose(1, 2)), dim=-1)
        head_input = torch.cat([torch.matmul(attention, self.value(source)), features], dim=-1)
        return self.proposals(self.cls_layer(head_input), self.reg_layer(head_input))
