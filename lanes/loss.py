"""LaneATT's training loss (Tabelini et al., CVPR 2021), vectorised over the batch.

Anchors are matched to ground-truth lanes by their average horizontal distance over the rows both cover: an
anchor closer than ``t_pos`` pixels to a lane is a positive for its nearest lane, one farther than ``t_neg`` from
every lane a negative, anything between is ignored. Classification: focal loss (alpha 0.25, gamma 2) over
positives and negatives, divided by the number of positives. Regression: smooth L1 on the positives' length
(shifted by the gap between the anchor's and the lane's start) and x at every row the lane covers from the
anchor's start; rows it does not cover carry no loss. ``loss = cls_weight * cls + reg``.

The reference runs an NMS over the proposals before matching; here every anchor is matched (denser positives,
no NMS in the training step), and the whole batch is one set of tensor operations instead of a loop per image.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

N_OFFSETS = 72
N_STRIPS = N_OFFSETS - 1
INFINITY = 987654.0


@dataclass(frozen=True)
class LossParts:
    total: torch.Tensor
    cls: torch.Tensor
    reg: torch.Tensor
    positives: int


def match(anchors: torch.Tensor, targets: torch.Tensor, t_pos: float = 15.0, t_neg: float = 20.0):
    """``anchors`` [N, 77], ``targets`` [B, T, 77] (absent lanes have ``targets[..., 1] == 0``) →
    positives [B, N] bool, negatives [B, N] bool, nearest lane [B, N] long."""
    present = targets[..., 1] > 0.5  # [B, T]
    t_start = targets[..., 2] * N_STRIPS  # [B, T]
    a_start = anchors[:, 2] * N_STRIPS  # [N]
    starts = torch.maximum(t_start[:, None, :], a_start[None, :, None]).round()  # [B, N, T]
    ends = (t_start + targets[..., 4] - 1).round()[:, None, :]  # [B, 1, T]
    lengths = (ends - starts + 1).clamp(min=0)
    rows = torch.arange(N_OFFSETS, device=anchors.device, dtype=anchors.dtype)
    covered = (rows >= starts[..., None]) & (rows <= ends[..., None])  # [B, N, T, 72]
    gaps = (targets[:, None, :, 5:] - anchors[None, :, None, 5:]).abs()
    distance = torch.where(covered, gaps, torch.zeros_like(gaps)).sum(-1) / (lengths + 1e-9)
    distance = torch.where((lengths > 0) & present[:, None, :], distance, torch.full_like(distance, INFINITY))
    nearest_distance, nearest = distance.min(dim=2)
    return nearest_distance < t_pos, nearest_distance > t_neg, nearest


def focal_loss(logits: torch.Tensor, labels: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0) -> torch.Tensor:
    """Per-element focal loss of 2-class ``logits`` [..., 2] against 0/1 ``labels`` (the reference's form: the
    softmax probability of the true class, weighted by ``alpha`` for every class)."""
    log_p = torch.log_softmax(logits.float(), dim=-1)
    log_pt = log_p.gather(-1, labels[..., None].long())[..., 0]
    return -alpha * (1 - log_pt.exp()).pow(gamma) * log_pt


def laneatt_loss(proposals: torch.Tensor, anchors: torch.Tensor, targets: torch.Tensor, *, cls_weight: float = 10.0,
                 t_pos: float = 15.0, t_neg: float = 20.0) -> LossParts:
    """The loss of ``proposals`` [B, N, 77] (the model's raw output) against ``targets`` [B, T, 77]."""
    proposals = proposals.float()
    with torch.no_grad():
        positives, negatives, nearest = match(anchors.float(), targets.float(), t_pos, t_neg)
    per_image_positives = positives.sum(dim=1)  # [B]
    labels = positives.long()
    cls_each = focal_loss(proposals[..., :2], labels) * (positives | negatives)
    # An image with no positive sums its loss as it is; the others divide by their positives.
    cls = (cls_each.sum(dim=1) / per_image_positives.clamp(min=1)).mean()

    if not positives.any():
        reg = proposals.sum() * 0.0
        return LossParts(cls_weight * cls + reg, cls.detach(), reg.detach(), 0)
    image_index, anchor_index = positives.nonzero(as_tuple=True)
    predicted = proposals[image_index, anchor_index, 4:]  # [K, 73]: length, x_0..x_71
    with torch.no_grad():
        target = targets[image_index, nearest[image_index, anchor_index]].float()  # [K, 77]
        anchor_start = (anchors[anchor_index, 2] * N_STRIPS).round()
        target_start = (target[:, 2] * N_STRIPS).round()
        length = target[:, 4] - (anchor_start - target_start)
        end = (anchor_start + length - 1).round()
        rows = torch.arange(N_OFFSETS, device=proposals.device, dtype=proposals.dtype)
        valid = (rows >= anchor_start[:, None]) & (rows <= end[:, None])
        wanted = torch.cat([length[:, None], target[:, 5:]], dim=1)
        keep = torch.cat([torch.ones_like(valid[:, :1]), valid], dim=1)
        wanted = torch.where(keep, wanted, predicted.detach())
    per_element = torch.nn.functional.smooth_l1_loss(predicted, wanted, reduction="none").mean(dim=1)  # [K]
    # The mean over each image's positives, then over the images that have positives.
    sums = torch.zeros(len(proposals), device=proposals.device).index_add(0, image_index, per_element)
    with_positives = per_image_positives > 0
    reg = (sums[with_positives] / per_image_positives[with_positives]).mean()
    return LossParts(cls_weight * cls + reg, cls.detach(), reg.detach(), int(positives.sum()))
