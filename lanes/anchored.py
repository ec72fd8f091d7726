"""What every lane model shares: its anchors as buffers, and the features pooled along each anchor."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from orinkit.lanes.anchors import HEADER, anchor_cut_columns, make_anchors
from orinkit.lanes.errors import LaneInputError

STRIDE = 32


class AnchoredModel(nn.Module):
    """A model whose output rows are its anchors: ``[B, N, 5 + n_offsets]`` for a ``[B, 3, img_h, img_w]`` image,
    pooling ``C x fmap_h`` features per anchor from a stride-32 map."""

    def _set_anchors(self, anchors, img_w: int, img_h: int) -> np.ndarray:
        anchors = make_anchors(img_w, img_h) if anchors is None else np.asarray(anchors, dtype=np.float32)
        if anchors.ndim != 2 or anchors.shape[0] < 2 or anchors.shape[1] <= HEADER + 1:
            raise LaneInputError(f"anchors must be [N >= 2, 5 + n_offsets], got {list(anchors.shape)}")
        self.img_w, self.img_h = img_w, img_h
        self.fmap_w, self.fmap_h = img_w // STRIDE, img_h // STRIDE
        self.n_anchors, self.n_offsets = anchors.shape[0], anchors.shape[1] - HEADER
        columns, valid = anchor_cut_columns(anchors, self.fmap_w, self.fmap_h, STRIDE, img_w, img_h)
        flat_index = np.arange(self.fmap_h)[None, :] * self.fmap_w + columns
        # Not persistent: reference checkpoints carry no anchors, and these must stay the ones given here.
        self.register_buffer("anchors", torch.from_numpy(anchors.copy()), persistent=False)
        self.register_buffer("cut_index", torch.from_numpy(flat_index.reshape(-1)), persistent=False)
        self.register_buffer("cut_valid", torch.from_numpy(valid.astype(np.float32)), persistent=False)
        self.weights_are_random = True
        return anchors

    def pool_anchor_features(self, features: torch.Tensor) -> torch.Tensor:
        """``[B, C, H, W]`` map → ``[B, N, C * fmap_h]``, channel-major like the reference's flattening."""
        c = features.shape[1]
        grid = features[:, :, :self.fmap_h, :self.fmap_w].reshape(-1, c, self.fmap_h * self.fmap_w)
        cells = grid.index_select(2, self.cut_index).reshape(-1, c, self.n_anchors, self.fmap_h) * self.cut_valid
        return cells.permute(0, 2, 1, 3).reshape(-1, self.n_anchors, c * self.fmap_h)

    def proposals(self, logits: torch.Tensor, regression: torch.Tensor) -> torch.Tensor:
        """Columns 0..1 the logits alone; 2.. the anchor plus [0, 0, length, offsets]."""
        shifts = torch.cat([torch.zeros_like(logits), regression], dim=-1)
        return torch.cat([logits, self.anchors[:, 2:] + shifts], dim=-1)
