"""LaneATT anchors: straight lines leaving the left, bottom and right image borders (numpy only).

An anchor is a 77-vector ``[0, 0, start_y, start_x, 0, x_0 .. x_71]``: two score slots, the origin (``start_y`` is
``1 - y0``, counted up from the image bottom), a length slot, and the line's x in pixels at the 72 sample rows
``ys_i = 1 - i/71`` (row 0 is the bottom of the image). The model adds its regression onto exactly these vectors,
so a deployment must carry the anchors the model was built with, not a recomputation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from orinkit.lanes.errors import LaneInputError

LEFT_ANGLES = (72., 60., 49., 39., 30., 22.)
BOTTOM_ANGLES = (165., 150., 141., 131., 120., 108., 100., 90., 80., 72., 60., 49., 39., 30., 15.)
RIGHT_ANGLES = (108., 120., 131., 141., 150., 158.)
HEADER = 5  # score 0, score 1, start_y, start_x, length


def _lines(x0: np.ndarray, y0: np.ndarray, angles: Sequence[float], ys: np.ndarray, img_w: int) -> np.ndarray:
    """x in pixels of every (origin, angle) line at normalised heights ``ys``; origin-major, then angle."""
    inv_tan = 1.0 / np.tan(np.radians(np.asarray(angles, dtype=np.float64)))
    xs = (x0[:, None, None] + (y0[:, None, None] - ys[None, None, :]) * inv_tan[None, :, None]) * img_w
    return xs.reshape(-1, ys.size)


def make_anchors(
    img_w: int = 640,
    img_h: int = 360,
    n_offsets: int = 72,
    left_angles: Sequence[float] = LEFT_ANGLES,
    bottom_angles: Sequence[float] = BOTTOM_ANGLES,
    right_angles: Sequence[float] = RIGHT_ANGLES,
    lateral_n: int = 72,
    bottom_n: int = 128,
) -> np.ndarray:
    """All LaneATT anchors, ``[lateral_n*len(left) + bottom_n*len(bottom) + lateral_n*len(right), 5 + n_offsets]``.

    The defaults give the reference 2784 x 77. Heights are normalised, so ``img_h`` does not enter the geometry;
    it is accepted so that callers can pass the input size as one pair.
    """
    del img_h
    ys = np.linspace(1.0, 0.0, n_offsets)
    lateral = np.linspace(1.0, 0.0, lateral_n)
    bottom = np.linspace(1.0, 0.0, bottom_n)
    groups = [  # (x0, y0, angles) in the reference order: left, bottom, right
        (np.zeros(lateral_n), lateral, left_angles),
        (bottom, np.ones(bottom_n), bottom_angles),
        (np.ones(lateral_n), lateral, right_angles),
    ]
    blocks = []
    for x0, y0, angles in groups:
        block = np.zeros((x0.size * len(angles), HEADER + n_offsets), dtype=np.float64)
        block[:, 2] = np.repeat(1.0 - y0, len(angles))
        block[:, 3] = np.repeat(x0, len(angles))
        block[:, HEADER:] = _lines(x0, y0, angles, ys, img_w)
        blocks.append(block)
    return np.concatenate(blocks).astype(np.float32)


def anchor_cut_columns(
    anchors: np.ndarray,
    fmap_w: int | None = None,
    fmap_h: int | None = None,
    stride: int = 32,
    img_w: int = 640,
    img_h: int = 360,
) -> tuple[np.ndarray, np.ndarray]:
    """Feature-map column each anchor crosses on each used feature row, and whether that cell counts.

    Returns ``(columns, valid)``, both ``[N, fmap_h]``: row j (0 = top) is normalised height ``j / (fmap_h - 1)``;
    ``columns`` is ``round(x / stride)`` clamped into ``0 .. fmap_w - 1``; ``valid`` is false where the unclamped
    column is < 0 or > fmap_w. The reference tests ``> fmap_w``, not ``>= fmap_w``, so a column of exactly
    ``fmap_w`` still pools (from the clamped last column); kept for checkpoint compatibility.
    ``fmap_w``/``fmap_h`` default to ``img_w // stride`` and ``img_h // stride`` (20 x 11 for 640 x 360).
    """
    anchors = np.asarray(anchors)
    if anchors.ndim != 2 or anchors.shape[1] <= HEADER + 1:
        raise LaneInputError(f"anchors must be [N, 5 + n_offsets] with n_offsets >= 2, got {list(anchors.shape)}")
    fmap_w = img_w // stride if fmap_w is None else fmap_w
    fmap_h = img_h // stride if fmap_h is None else fmap_h
    # Anchors are straight lines, so the 72 samples pin the line down: x at height y is
    # x_start + (y0 - y) * (x_last - x_first), with ys running from 1 (first sample) to 0 (last sample).
    a = anchors.astype(np.float64)
    y0 = 1.0 - a[:, 2:3]
    per_unit_height = a[:, -1:] - a[:, HEADER:HEADER + 1]
    cut_ys = np.linspace(0.0, 1.0, fmap_h)[None, :]
    xs = a[:, 3:4] * img_w + (y0 - cut_ys) * per_unit_height
    unclamped = np.round(xs / stride).astype(np.int64)
    valid = (unclamped >= 0) & (unclamped <= fmap_w)
    return np.clip(unclamped, 0, fmap_w - 1), valid


def select_topk_anchors(anchors: np.ndarray, frequencies, k: int) -> np.ndarray:
    """The ``k`` most frequent anchors, most frequent first (ties keep index order).

    The order matters: a checkpoint's attention layer has one output per anchor in this order.
    """
    anchors = np.asarray(anchors)
    freq = np.asarray(frequencies, dtype=np.float64).reshape(-1)
    if freq.size != len(anchors):
        raise LaneInputError(f"{freq.size} frequencies for {len(anchors)} anchors")
    if not 2 <= k <= len(anchors):
        raise LaneInputError(f"topk must be in 2..{len(anchors)}, got {k}")
    order = np.argsort(-freq, kind="stable")[:k]
    return anchors[order]
