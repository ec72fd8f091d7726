"""The marking rasteriser: each marking's exact share of every pixel it covers.

Markings are rasterised here rather than by ``ImageDraw``: Pillow truncates polygon vertices to whole pixels, which
would move a marking's centre by up to half a pixel off its ground truth; the coverage below is exact (area of each
pixel under the marking), so the painted centre is the ground truth to a small fraction of a pixel.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

# Pieces per pixel row when rasterising markings: the coverage of a row is exact for a straight piece of marking,
# dash ends within a row are counted by the share of paint, and a curve is straight over one row.
_SUBROWS = 1

def _ramp2(t: np.ndarray) -> np.ndarray:
    t = np.maximum(t, 0.0)
    return 0.5 * t * t


def _coverage(cols: np.ndarray, xa: np.ndarray, xb: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """Mean over a sub-row of how much of pixel column ``cols`` a band of half-width ``hw`` covers, its centre
    moving linearly from ``xa`` to ``xb`` over the sub-row.

    The overlap of pixel [i-1/2, i+1/2] with [x-hw, x+hw] is a trapezoid in d = x - i (two boxes convolved); its
    mean over x in [xa, xb] is a difference of the trapezoid's antiderivative, sums of max(t, 0)^2 / 2."""
    knots = (hw + 0.5, hw - 0.5, -hw + 0.5, -hw - 0.5)
    signs = (1.0, -1.0, -1.0, 1.0)
    da, db = xa - cols, xb - cols
    span = db - da
    steep = np.abs(span) < 1e-3
    total = sum(sign * (_ramp2(db + knot) - _ramp2(da + knot)) for knot, sign in zip(knots, signs))
    mean = total / np.where(steep, 1.0, span)
    if steep.any():
        mid = 0.5 * (da + db)
        trapezoid = sum(sign * np.maximum(mid + knot, 0.0) for knot, sign in zip(knots, signs))
        mean = np.where(steep, trapezoid, mean)
    return np.clip(mean, 0.0, 1.0)


@dataclass
class _Marking:
    x0: float                   # lateral offset from the camera at z = 0, metres
    width: float
    colour: np.ndarray          # RGB as painted (worn ones faded towards the asphalt)
    yellow: bool
    dashed: bool
    dash: float
    gap: float
    phase: float
    worn: bool
    wear: tuple                 # (amplitudes, wavenumbers, phases, bias) of the broken patches
    fade: float                 # how far a worn marking's colour has gone towards the asphalt
    z_lo: float = 0.0           # drawn from z_lo to z_hi (metres ahead); not drawn when equal
    z_hi: float = 0.0
    track: tuple | None = None  # dense (x, y, z, u, v), near to far, of its centre line where drawn
    lane_index: int | None = None
    # The wide data's kinds of marking.
    double: float = 0.0         # a double line: half the distance between its two lines' centres (0: single)
    dots: bool = False          # raised dots (short "dashes") instead of paint
    merge: tuple | None = None  # (z0, rate, limit, direction): beyond z0 it moves sideways by up to `limit` metres
    z_min: float = 0.0          # exists only between z_min and z_max (metres ahead)
    z_max: float = math.inf
    bands: list = field(default_factory=list)   # a double line's two tracks (painted instead of `track`)

    def shift(self, z: np.ndarray) -> np.ndarray | float:
        """Sideways movement (metres) of a merging marking at distance ``z``."""
        if self.merge is None:
            return 0.0
        z0, rate, limit, direction = self.merge
        return direction * np.clip(rate * (np.asarray(z) - z0), 0.0, limit)

    def painted_tracks(self) -> list:
        if self.bands:
            return list(self.bands)
        return [] if self.track is None else [self.track]

    def painted(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """Metres of paint between ``near`` and ``far`` (>= near) along the marking."""
        if not self.dashed:
            return far - near
        period = self.dash + self.gap

        def cumulative(z):
            shifted = z - self.phase
            whole = np.floor(shifted / period)
            return whole * self.dash + np.minimum(shifted - whole * period, self.dash)

        return cumulative(far) - cumulative(near)

    def wear_factor(self, z: np.ndarray) -> np.ndarray | float:
        if not self.worn:
            return 1.0
        amplitudes, waves, phases, bias = self.wear
        wave = sum(a * np.sin(k * z + p) for a, k, p in zip(amplitudes, waves, phases))
        return np.clip(0.5 + bias + 2.0 * wave, 0.0, 1.0)

    def gt_far_end(self) -> float:
        """Where the annotation of the marking ends: the far end of its last dash."""
        if not self.dashed:
            return self.z_hi
        period = self.dash + self.gap
        start = self.phase + math.floor((self.z_hi - self.phase) / period) * period
        return min(start + self.dash, self.z_hi)


def _blocks(spans: np.ndarray, budget: int = 32768) -> Iterator[tuple[slice, int]]:
    """Runs of rows whose windows, padded to the widest, hold at most ``budget`` pixels: one numpy pass per run,
    without padding the thin far rows to the width of the near ones."""
    start, widest = 0, 0
    for index, span in enumerate(spans.tolist()):
        widest_with = max(widest, span)
        if index > start and widest_with * (index + 1 - start) > budget:
            yield slice(start, index), widest
            start, widest_with = index, span
        widest = widest_with
    if start < spans.size:
        yield slice(start, spans.size), widest


def _paint_marking(canvas: np.ndarray, marking: _Marking, focal: float, track: tuple | None = None,
                   skew: tuple[float, float] | None = None) -> None:
    """Blend ``marking`` (along ``track``, by default its own) into ``canvas`` ([H, W, 3] uint8) with the exact share
    of every pixel it covers. ``skew`` is ``(cos roll, pixel aspect * sin roll)`` for non-square pixels."""
    height, width = canvas.shape[:2]
    x, y, z, u, v = marking.track if track is None else track
    first = max(math.floor(y[-1] - 0.5), 0)
    last = min(math.ceil(y[0] + 0.5), height - 1)
    if last < first:
        return
    rows = np.arange(first, last + 1, dtype=np.float64)
    edges = rows[:, None] - 0.5 + np.arange(_SUBROWS + 1)[None, :] / _SUBROWS       # [R, S+1], downwards
    flat_edges, rising = edges.ravel(), y[::-1]

    def along(values):
        return np.interp(flat_edges, rising, values[::-1]).reshape(edges.shape)

    xe, ue, ve = along(x), along(u), along(v)
    ze = 1.0 / along(1.0 / z)                 # 1/z is linear in the row; z is not
    far, near = ze[:, :-1], ze[:, 1:]
    extent = far - near
    share = np.where(extent > 1e-9, marking.painted(near, far) / np.maximum(extent, 1e-9), 0.0)
    middle = 0.5 * (far + near)
    xa, xb = xe[:, :-1], xe[:, 1:]
    # f*w/z is the marking's width along an unrolled row; along an image row (turned by the roll) it is cut at
    # another slant: scale by the ratio of the two cuts of the same band.
    du, dv = ue[:, 1:] - ue[:, :-1], ve[:, 1:] - ve[:, :-1]
    slope_image = (xb - xa) * _SUBROWS
    slope_unrolled = du / np.where(np.abs(dv) > 1e-12, dv, 1.0)
    if skew is None:
        cut = np.where(np.abs(dv) > 1e-12, np.sqrt((1.0 + slope_image ** 2) / (1.0 + slope_unrolled ** 2)), 1.0)
    else:
        # The affine map from the unrolled image moves the band's edge, (hw, 0) off its centre, to (cos, -sy sin) hw;
        # along an image row that edge is hw (cos + slope sy sin) from the centre line.
        cut = np.abs(skew[0] + slope_image * skew[1])
    true_hw = 0.5 * focal * marking.width / middle * cut
    hw = np.maximum(true_hw, 0.5)
    # Thinner than a pixel: draw one pixel wide, as faint as the paint it stands for (but still visible).
    weight = share * np.clip(true_hw / hw, 0.4, 1.0) * marking.wear_factor(middle)
    left = np.floor(np.minimum(xa, xb) - hw - 1.0).min(axis=1)
    right = np.ceil(np.maximum(xa, xb) + hw + 1.0).max(axis=1)
    keep = (weight.max(axis=1) > 0) & (right >= 0) & (left <= width - 1)
    if not keep.any():
        return
    rows, xa, xb, hw, weight, left, right = (a[keep] for a in (rows, xa, xb, hw, weight, left, right))
    flat = canvas.reshape(-1, 3)
    colour = np.asarray(marking.colour, dtype=np.float32)
    for block, span in _blocks((right - left + 1).astype(int)):
        cols = left[block][:, None] + np.arange(span)[None, :]                              # [r, w]
        cover = _coverage(cols[:, None, :], xa[block][..., None], xb[block][..., None], hw[block][..., None])
        alpha = (cover * weight[block][..., None]).sum(axis=1) / _SUBROWS                   # [r, w]
        inside = (cols >= 0) & (cols <= width - 1) & (alpha > 2e-3)
        if not inside.any():
            continue
        index = (rows[block][:, None].astype(np.int64) * width + cols.astype(np.int64))[inside]
        a = alpha[inside].astype(np.float32)[:, None]
        pixels = flat[index].astype(np.float32)
        flat[index] = np.rint(pixels + (colour - pixels) * a).astype(np.uint8)
