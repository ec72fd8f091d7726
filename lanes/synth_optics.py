"""A wide lens's barrel distortion and vignetting, for the renderer's camera (numpy and Pillow).

Distortion maps each point of the distorted image, at radius ``r`` from the centre (in pixels of the image, 1 at
the corners), to the pinhole image at radius ``r (1 + k r^2) / (1 + k)``: the corners stay where they
are, the middle is magnified, and straight lines bow outwards. The image is resampled through a cached map
(Pillow's MESH transform would cost five times as much at the accuracy needed); the lanes are moved through the
map's exact inverse.
"""

from __future__ import annotations

import functools

import numpy as np
from PIL import Image


def source_points(x, y, width: int, height: int, k: float, inverse: bool = False):
    """Pinhole-image points seen at distorted-image points ``(x, y)`` (pixel centres at integers), or with
    ``inverse`` the distorted-image points of pinhole points."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
    dx, dy = x - cx, y - cy
    corner = np.hypot(cx, cy)
    r = np.hypot(dx, dy) / corner
    if inverse:
        # Solve q (1 + k q^2) / (1 + k) = r for q: increasing in q, Newton from q = r converges in a few steps.
        q = r.copy()
        for _ in range(8):
            q -= (q * (1.0 + k * q * q) - r * (1.0 + k)) / (1.0 + 3.0 * k * q * q)
        gain = np.where(r > 1e-12, q / np.maximum(r, 1e-12), 1.0 + k)
    else:
        gain = (1.0 + k * r * r) / (1.0 + k)
    return cx + dx * gain, cy + dy * gain


def distort_image(image: Image.Image, k: float) -> Image.Image:
    """``image`` as the distorting lens shows it (``k`` in steps keeps the cached maps few: each costs a megabyte).

    Each pixel takes the pixel nearest to where it comes from (within half a pixel: the magnification is at most
    1 + k, so a marking's anti-aliased edges survive): a tenth of the cost of a bilinear lookup in numpy."""
    width, height = image.size
    packed = np.asarray(image.convert("RGBA")).reshape(-1).view(np.uint32)
    pixels = np.take(packed, _remap(width, height, k)).view(np.uint8).reshape(height, width, 4)
    return Image.fromarray(np.ascontiguousarray(pixels[..., :3]))


@functools.lru_cache(maxsize=10)
def _remap(width: int, height: int, k: float) -> np.ndarray:
    """For each output pixel, the flat index of the source pixel nearest to where it comes from."""
    gy, gx = np.mgrid[0:height, 0:width].astype(np.float64)
    sx, sy_ = source_points(gx.ravel(), gy.ravel(), width, height, k)
    col = np.clip(np.rint(sx), 0, width - 1).astype(np.int64)
    row = np.clip(np.rint(sy_), 0, height - 1).astype(np.int64)
    return (row * width + col).astype(np.int32)


@functools.lru_cache(maxsize=64)
def _radial(width: int, height: int, level: int, ox: int, oy: int) -> Image.Image:
    small_w, small_h = 64, max(8, round(64 * height / width))
    x = (np.arange(small_w) + 0.5) / small_w - 0.5 - ox / 20.0
    y = (np.arange(small_h) + 0.5) / small_h - 0.5 - oy / 20.0
    r2 = (x[None, :] ** 2 + (y[:, None] * height / width) ** 2) / (0.25 + 0.25 * (height / width) ** 2)
    gain = 1.0 - (level / 16.0) * np.clip(r2, 0.0, 2.0) ** 1.5
    small = Image.fromarray(np.clip(np.rint(gain * 255.0), 0, 255).astype(np.uint8))
    return small.resize((width, height), Image.Resampling.BILINEAR)


def vignette_mask(width: int, height: int, strength: float, ox: float, oy: float) -> Image.Image:
    """An "L" gain image: 255 in the middle, darker by ``strength`` at the corners (centre moved by ``ox``, ``oy``
    of the image size). Strengths and offsets come in steps, so that a few cached masks serve every image."""
    return _radial(width, height, min(16, max(0, round(strength * 16))), round(ox * 20), round(oy * 20))
