"""The LaneATT network (Tabelini et al., CVPR 2021), written to export to ONNX that TensorRT 8.5 builds.

Output per image: ``[N, 5 + n_offsets]`` raw proposals (see :class:`LaneATT`); scores, NMS and decoding are
post-processing outside the graph. Submodule names match the reference code so its checkpoints load as they are.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np
import torch
import torchvision
from torch import nn

from orinkit.lanes.anchored import AnchoredModel
from orinkit.lanes.anchors import make_anchors, select_topk_anchors
from orinkit.lanes.errors import CheckpointMismatchError, LaneError, LaneInputError, MissingWeightsError

BACKBONE_CHANNELS = 512
BACKBONES = ("resnet18", "resnet34")
CHECKPOINT_PREFIXES = ("feature_extractor.", "conv1.", "cls_layer.", "reg_layer.", "attention_layer.")


def spread_attention(att: torch.Tensor) -> torch.Tensor:
    """``[B, N, N-1]`` attention → ``[B, N, N]`` with a zero diagonal: ``A[n, m] = att[n, m - (m > n)]``.

    Built from reshapes and concatenations only (no ScatterND/NonZero, no Pad whose pads TensorRT 8.5 wants
    as initializers): the row-major off-diagonal entries of an N x N matrix, regrouped N at a time, are exactly
    its flat form past the first element cut into ``N + 1``-long rows whose last slot is the next diagonal entry.
    """
    n = att.shape[1]
    rows = att.reshape(-1, n - 1, n)
    rows = torch.cat([rows, torch.zeros_like(rows[:, :, :1])], dim=2).reshape(-1, (n - 1) * (n + 1))
    return torch.cat([torch.zeros_like(rows[:, :1]), rows], dim=1).reshape(-1, n, n)


class LaneATT(AnchoredModel):
    """LaneATT on a ``[B, 3, img_h, img_w]`` BGR image in 0..1 → ``[B, N, 5 + n_offsets]`` proposals.

    Columns per anchor: 0, 1 class logits (background, lane); 2 anchor start_y; 3 anchor start_x;
    4 anchor length slot (0) + predicted length in rows; 5.. anchor x + predicted offset, in input pixels.
    """

    def __init__(self, backbone: str = "resnet18", anchors: np.ndarray | None = None, img_w: int = 640,
                 img_h: int = 360, anchor_feat_channels: int = 64):
        super().__init__()
        if backbone not in BACKBONES:
            raise LaneInputError(f"backbone must be one of {', '.join(BACKBONES)}, got {backbone!r}")
        self._set_anchors(anchors, img_w, img_h)
        self.backbone = backbone
        self.anchor_feat_channels = anchor_feat_channels

        resnet = getattr(torchvision.models, backbone)(weights=None)
        self.feature_extractor = nn.Sequential(*list(resnet.children())[:-2])
        self.conv1 = nn.Conv2d(BACKBONE_CHANNELS, anchor_feat_channels, kernel_size=1)
        pooled = anchor_feat_channels * self.fmap_h
        self.cls_layer = nn.Linear(2 * pooled, 2)
        self.reg_layer = nn.Linear(2 * pooled, self.n_offsets + 1)
        self.attention_layer = nn.Linear(pooled, self.n_anchors - 1)
        for layer in (self.attention_layer, self.conv1, self.cls_layer, self.reg_layer):
            nn.init.normal_(layer.weight, mean=0.0, std=0.001)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.pool_anchor_features(self.conv1(self.feature_extractor(x)))
        attention = spread_attention(torch.softmax(self.attention_layer(features), dim=-1))
        head_input = torch.cat([torch.matmul(attention, features), features], dim=-1)
        return self.proposals(self.cls_layer(head_input), self.reg_layer(head_input))

    def load_reference_checkpoint(self, path_or_state_dict) -> None:
        """Load weights saved by the reference code (``{'model': state_dict, ...}``) or a bare state_dict."""
        state = _read_state_dict(path_or_state_dict)
        own = self.state_dict()
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        wrong_shape = sorted(k for k in set(own) & set(state) if tuple(state[k].shape) != tuple(own[k].shape))
        if missing or unexpected or wrong_shape:
            raise CheckpointMismatchError(self._mismatch_message(state, missing, unexpected, wrong_shape))
        self.load_state_dict(state, strict=True)
        self.weights_are_random = False

    def _mismatch_message(self, state, missing, unexpected, wrong_shape) -> str:
        lines = [f"the checkpoint does not fit LaneATT({self.backbone}, {self.n_anchors} anchors); "
                 f"expected keys under {', '.join(CHECKPOINT_PREFIXES)}"]
        for label, keys in (("missing", missing), ("unexpected", unexpected)):
            if keys:
                lines.append(f"{label} keys ({len(keys)}): {_listing(keys)}")
        if wrong_shape:
            own = self.state_dict()
            lines.append("wrong shapes: " + _listing(
                [f"{k} {list(state[k].shape)} (model {list(own[k].shape)})" for k in wrong_shape]))
        weight = state.get("attention_layer.weight")
        if weight is not None and weight.shape[0] + 1 != self.n_anchors:
            lines.append(f"the checkpoint was trained with {weight.shape[0] + 1} anchors: build the model with "
                         f"topk_anchors={weight.shape[0] + 1} and that dataset's anchor frequency file")
        return "; ".join(lines)


def _listing(keys, limit: int = 12) -> str:
    shown = ", ".join(keys[:limit])
    return shown if len(keys) <= limit else f"{shown}, ... ({len(keys) - limit} more)"


def _read_state_dict(source) -> dict:
    if isinstance(source, (str, os.PathLike)):
        try:
            # weights_only: a checkpoint is untrusted input; the reference's own holds only tensors and numbers.
            source = torch.load(os.fspath(source), map_location="cpu", weights_only=True)
        except Exception as exc:
            raise CheckpointMismatchError(f"cannot read checkpoint {os.fspath(source)}: "
                                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(source, Mapping):
        raise CheckpointMismatchError(f"a checkpoint must be a state_dict or {{'model': state_dict}}, "
                                      f"got {type(source).__name__}")
    state = source.get("model", source)
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointMismatchError("the checkpoint's 'model' entry is not a state_dict of tensors")
    if state and all(k.startswith("module.") for k in state):  # saved from a DataParallel wrapper
        state = {k[len("module."):]: v for k, v in state.items()}
    return dict(state)


def _read_frequencies(frequencies) -> np.ndarray:
    if isinstance(frequencies, (str, os.PathLike)):
        path = os.fspath(frequencies)
        if path.endswith(".npy"):
            return np.load(path)
        # The reference ships these as torch.save'd tensors.
        frequencies = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(frequencies, torch.Tensor):
        frequencies = frequencies.detach().cpu().numpy()
    return np.asarray(frequencies)


LEGACY_BACKBONES = {"resnet18": "r18"}
DEFAULT_ARCH = "lite"


def build_lane_model(arch: str | None = None, checkpoint=None, topk_anchors: int | None = None, frequencies=None,
                     *, random_weights: bool = False):
    """A lane model in eval mode: all 2784 anchors, or the ``topk_anchors`` most frequent ones per ``frequencies``.

    ``arch`` names an architecture of :mod:`orinkit.lanes.architectures` (``"resnet18"``/``"resnet34"`` name
    LaneATT's backbones as before). Weights: ``checkpoint`` (an orinkit weights card ``.json`` written by
    ``python -m orinkit.lanes.train``, whose architecture it records; or a reference LaneATT checkpoint path or
    state_dict, see :meth:`LaneATT.load_reference_checkpoint`); else, unless ``random_weights``, the weights that
    ship with orinkit (:mod:`orinkit.lanes.weights`; the best by held-out F1, of ``arch`` when given). Random
    weights are of ``arch``, by default :data:`DEFAULT_ARCH`. ``frequencies`` is an array, a tensor, or a path
    to a ``.npy`` or torch-saved tensor.
    """
    from orinkit.lanes import weights
    from orinkit.lanes.architectures import ARCHITECTURES, make_lane_model

    if (topk_anchors is None) != (frequencies is None):
        raise LaneError("topk_anchors and frequencies go together", hint="give both or neither")
    if random_weights and checkpoint is not None:
        raise LaneError("random_weights and a checkpoint exclude each other", hint="drop one of them")
    arch = LEGACY_BACKBONES.get(arch, arch)
    if arch is not None and arch not in ARCHITECTURES and arch not in BACKBONES:
        raise LaneInputError(f"unknown lane architecture {arch!r}",
                             hint=f"use one of {', '.join([*ARCHITECTURES, *BACKBONES[1:]])}")
    if checkpoint is None and not random_weights:
        checkpoint = weights.shipped_card(arch)
        if checkpoint is None or topk_anchors is not None:
            raise MissingWeightsError(
                f"no trained weights ship with this orinkit for {arch or 'any lane architecture'}"
                f"{'' if topk_anchors is None else f' with {topk_anchors} anchors'}",
                hint="pass a checkpoint, train them (python -m orinkit.lanes.train), or use random_weights=True "
                     "for plumbing tests")
    card = isinstance(checkpoint, (str, os.PathLike)) and (str(checkpoint).endswith(".json") or
                                                          os.path.isdir(checkpoint))
    state = info = None
    if card:
        state, info = weights.load_weights(checkpoint)
        if arch is not None and arch != weights.card_arch(info):
            raise CheckpointMismatchError(f"{checkpoint} holds {weights.card_arch(info)} weights, not {arch}",
                                          hint=f"build it as {weights.card_arch(info)!r}, or leave arch out")
        arch = weights.card_arch(info)
    elif checkpoint is not None:
        arch = arch or "r18"  # reference checkpoints are LaneATT's
    anchors = make_anchors()
    if topk_anchors is not None:
        anchors = select_topk_anchors(anchors, _read_frequencies(frequencies), topk_anchors)
    if arch in BACKBONES[1:]:
        model = LaneATT(arch, anchors=anchors)
    else:
        model = make_lane_model(arch or DEFAULT_ARCH, anchors=anchors)
    if state is not None:
        _load_state(model, state, checkpoint)
    elif checkpoint is not None:
        if not isinstance(model, LaneATT):
            raise CheckpointMismatchError(f"{arch} takes orinkit weight cards (.json), not reference checkpoints",
                                          hint="build arch 'r18' for a reference LaneATT checkpoint")
        model.load_reference_checkpoint(checkpoint)
    model.card = info
    return model.eval()


def _load_state(model, state: dict, source) -> None:
    if isinstance(model, LaneATT):
        model.load_reference_checkpoint(state)
        return
    own = model.state_dict()
    bad = sorted(set(own) ^ set(state)) + sorted(k for k in set(own) & set(state)
                                                 if tuple(own[k].shape) != tuple(state[k].shape))
    if bad:
        raise CheckpointMismatchError(f"the weights in {source} do not fit {type(model).__name__}: "
                                      f"{_listing(bad)}", hint="pass the card written with these weights")
    model.load_state_dict(state, strict=True)
    model.weights_are_random = False


def show_random_lanes(model: LaneATT, rows: float = 48.0) -> LaneATT:
    """Make an untrained model's lanes drawable: a random length head gives lanes of 0-2 rows, which decoding
    drops, so the length bias is set to ``rows``. For demos and tests of the pipeline; it changes no trained
    model (it refuses one that loaded a checkpoint)."""
    if not model.weights_are_random:
        raise LaneError("show_random_lanes is for untrained models; this one loaded a checkpoint",
                        hint="call it only on a model built with random_weights=True")
    with torch.no_grad():
        model.reg_layer.bias[0] = rows
    return model
