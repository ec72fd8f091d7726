"""Ground-truth lanes → LaneATT training targets, as the reference's ``transform_annotation`` makes them.

A target is a 77-vector like a proposal: ``[background, lane, start_y, start_x, length, x_0 .. x_71]``. The lane
is sampled on the 72 anchor rows (row 0 at the image bottom); below its lowest annotated point it is continued to
the image bottom by the straight line through its two lowest points; the rows before it enters the image count
as outside (``start_y`` = their number / 71), ``length`` is the number of rows inside, and rows it does not reach
hold :data:`INVALID`. numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from orinkit.lanes.errors import LaneError

INVALID = -1e5
N_OFFSETS = 72
N_STRIPS = N_OFFSETS - 1


def sample_rows(img_h: int) -> np.ndarray:
    """The anchor rows' y in pixels of an ``img_h``-high input, bottom row first (y = img_h .. 0)."""
    return (1.0 - np.arange(N_OFFSETS) / N_STRIPS) * img_h


def lane_target(lane: np.ndarray, img_w: int = 640, img_h: int = 360) -> np.ndarray | None:
    """One lane ([M, 2] (x, y) pixels of the network input) as a 77-vector target; None if it has no point
    inside the image on the anchor rows."""
    points = np.asarray(lane, dtype=np.float64)
    points = points[np.isfinite(points).all(axis=1)]
    if len(points) < 2:
        return None
    points = points[np.argsort(-points[:, 1], kind="stable")]  # bottom first
    _, first = np.unique(points[:, 1], return_index=True)
    points = points[np.sort(first)]
    if len(points) < 2:
        return None
    ys = sample_rows(img_h)
    low, high = points[:, 1].min(), points[:, 1].max()
    inside_domain = (ys >= low) & (ys <= high)
    # np.interp wants increasing x: interpolate in rising y.
    xs_domain = np.interp(ys[inside_domain], points[::-1, 1], points[::-1, 0])
    below = ys > high
    (x0, y0), (x1, y1) = points[0], points[1]
    xs_below = x0 + (ys[below] - y0) * (x1 - x0) / (y1 - y0)
    all_xs = np.concatenate([xs_below, xs_domain])
    inside = (all_xs >= 0) & (all_xs < img_w)
    if not inside.any():
        return None
    # Rows before the lane enters the image start it; it ends where it leaves (the reference moves rows outside
    # the image to the front instead, which misplaces lanes that leave through a side).
    outside = int(np.argmax(inside))
    length = int(np.argmin(np.append(inside[outside:], False)))
    target = np.full(5 + N_OFFSETS, INVALID)
    target[0], target[1] = 0.0, 1.0
    target[2] = outside / N_STRIPS
    target[3] = all_xs[outside]
    target[4] = length
    target[5:5 + outside + length] = all_xs[:outside + length]
    return target


def lane_targets(lanes: Sequence[np.ndarray], max_lanes: int = 4, img_w: int = 640, img_h: int = 360
                 ) -> np.ndarray:
    """``[max_lanes, 77]`` float32 targets (absent lanes: background with :data:`INVALID` rows)."""
    targets = np.full((max_lanes, 5 + N_OFFSETS), INVALID, dtype=np.float64)
    targets[:, 0], targets[:, 1] = 1.0, 0.0
    made = [t for t in (lane_target(lane, img_w, img_h) for lane in lanes) if t is not None]
    if len(made) > max_lanes:
        raise LaneError(f"{len(made)} lanes in one image, more than max_lanes={max_lanes}",
                        hint="raise max_lanes, or annotate at most that many lanes per image")
    for index, target in enumerate(made):
        targets[index] = target
    return targets.astype(np.float32)
