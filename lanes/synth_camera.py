"""The renderer's camera over flat ground, its small drawing helpers, and the noise tiles it cuts textures from.

A ground point ``(X lateral, Z forward)`` relative to the camera projects to::

    u = cx + fx * X / Z        v = horizon + fy * h / Z

(``fy = fx * sy``: a camera of another aspect scaled to the image has non-square pixels). Roll turns ``(u, v)``
about the image centre in the camera's own (square-pixel) frame. A road line follows ``X(Z) = X0 + yaw * Z +
curvature * Z**2 / 2 + curvature_change * Z**3 / 6``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageFilter

_TILE = 256          # noise tiles; repeats of fine noise at this period are invisible
_TEXTURES = ((3.5, 2.0), (3.5, 4.5), (7.0, 2.0), (7.0, 4.5))   # ground: (grain sigma, blotch amplitude)
_NOISE_LEVELS = 4    # sensor noise strengths per range of sigmas: each costs a cached tile


@dataclass(frozen=True)
class _Camera:
    """Pinhole camera over flat ground. ``u, v`` are the unrolled image (pixel centres at integers, horizon on row
    ``hz``); roll turns them about the image centre ``(cx, cy)`` into image coordinates ``x, y``."""

    f: float            # focal length, pixels (horizontal)
    h: float            # height above the ground, metres
    hz: float           # horizon row of the unrolled image
    cx: float
    cy: float
    yaw: float          # heading of the road against the camera, radians (small)
    curvature: float    # 1/m
    roll: float         # radians; positive: the horizon rises to the right
    sy: float = 1.0     # vertical focal length / horizontal (pixel aspect)
    curvature_change: float = 0.0   # 1/m^2

    @property
    def cos(self) -> float:
        return math.cos(self.roll)

    @property
    def sin(self) -> float:
        return math.sin(self.roll)

    @property
    def fy(self) -> float:
        return self.f * self.sy

    def lateral(self, x0, z):
        """Lateral position at distance ``z`` of the road line that is ``x0`` from the camera at z = 0."""
        if self.curvature_change:
            return x0 + self.yaw * z + 0.5 * self.curvature * z * z + self.curvature_change * z * z * z / 6.0
        return x0 + self.yaw * z + 0.5 * self.curvature * z * z

    def heading(self, z):
        """dX/dZ of the road lines at distance ``z``."""
        return self.yaw + self.curvature * z + 0.5 * self.curvature_change * z * z

    def unrolled(self, x, z, up=0.0):
        z = np.asarray(z, dtype=np.float64)
        return self.cx + self.f * np.asarray(x) / z, self.hz + self.fy * (self.h - up) / z

    def to_image(self, u, v):
        u, v = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
        if self.roll == 0.0:
            return u, v
        du, dv = u - self.cx, v - self.cy
        if self.sy != 1.0:
            dv = dv / self.sy
            return self.cx + self.cos * du + self.sin * dv, self.cy + self.sy * (-self.sin * du + self.cos * dv)
        return self.cx + self.cos * du + self.sin * dv, self.cy - self.sin * du + self.cos * dv

    def point(self, x, z, up=0.0):
        """Image coordinates of the point ``x`` metres lateral, ``z`` ahead, ``up`` above the ground."""
        return self.to_image(*self.unrolled(x, z, up))

    def z_of_v(self, v):
        return self.fy * self.h / (np.asarray(v, dtype=np.float64) - self.hz)

    def horizon_y(self, x):
        """The image row of the horizon at column ``x``."""
        x = np.asarray(x, dtype=np.float64)
        return self.cy + (self.hz - self.cy - self.sy * self.sin * (x - self.cx)) / self.cos


def _flat(x, y, scale: float = 1.0) -> list[float]:
    """Polygon vertices as Pillow takes them (far-off points clipped: they only matter as directions)."""
    return np.clip(np.stack([np.ravel(x), np.ravel(y)], axis=1) * scale, -1e5, 1e5).ravel().tolist()


def _mix(a, b, t):
    return np.asarray(a, dtype=np.float64) * (1.0 - t) + np.asarray(b, dtype=np.float64) * t


def _rgb(colour) -> tuple[int, ...]:
    return tuple(round(float(c)) for c in np.clip(colour, 0, 255))


def _chance(rng: np.random.Generator, probability: float) -> bool:
    # Drawn whatever the probability, so that an option never shifts the numbers that follow in its stream.
    return bool(rng.random() < float(probability))


def _blur_kernel(sigma: float) -> ImageFilter.Kernel:
    taps = np.exp(-0.5 * (np.arange(-1, 2) / sigma) ** 2)
    weights = np.outer(taps, taps)
    return ImageFilter.Kernel((3, 3), (weights / weights.sum()).ravel().tolist(), scale=1.0)


# ---------------------------------------------------------------------------------------------------------------
# Noise tiles: made once per process from fixed seeds and cut at random offsets. Drawing fresh noise for every pixel
# of every image would cost more than the rest of the image; a fixed tile keeps render_road a pure function.


@functools.lru_cache(maxsize=1)
def _gaussian_tile() -> np.ndarray:
    """[T, T, 3] float32 standard Gaussian noise."""
    return np.random.default_rng(0x5EED).standard_normal((_TILE, _TILE, 3)).astype(np.float32)


def _centred(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(128.0 + values), 0, 255).astype(np.uint8)


@functools.lru_cache(maxsize=16)
def _tile(kind: str, variant: float) -> np.ndarray:
    """Noise around 128 (uint8): ``texture`` [T, T] (variant: index into _TEXTURES), fine grain and soft blotches of
    worn and repaired asphalt; ``noise`` [T, T, 3] (variant: sigma), sensor noise; ``photo`` [T, T] (variant:
    index into the photographs' detail tiles). Strengths are baked in, so that adding noise to an image is one
    Pillow operation."""
    if kind == "noise":
        return _centred(_gaussian_tile() * variant)
    if kind == "photo":
        from orinkit.lanes.synth_photo import detail_tile

        return detail_tile(int(variant), _TILE)
    sigma, blotch = _TEXTURES[int(variant)]
    coarse = np.random.default_rng(0x5EEE).integers(0, 256, size=(_TILE // 8, _TILE // 8), dtype=np.uint8)
    soft = np.asarray(Image.fromarray(coarse).resize((_TILE, _TILE), Image.Resampling.BICUBIC), dtype=np.float32)
    return _centred(_gaussian_tile()[..., 0] * sigma + (soft - 127.5) / 80.0 * blotch)


@functools.lru_cache(maxsize=32)
def _tiled(kind: str, variant: float, rows: int, cols: int) -> Image.Image:
    tile = _tile(kind, variant)
    return Image.fromarray(np.tile(tile, (rows, cols) + (1,) * (tile.ndim - 2)))


def _noise_crop(kind: str, variant: float, rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A width x height cut of a noise tile at a random offset."""
    big = _tiled(kind, variant, -(-(height + _TILE) // _TILE), -(-(width + _TILE) // _TILE))
    oy, ox = (int(v) for v in rng.integers(0, _TILE, size=2))
    return big.crop((ox, oy, ox + width, oy + height))
