"""A road scene drawn for the demo (no images are downloaded) and lanes drawn over a picture."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np


def road_image(width: int = 1280, height: int = 720, *, seed: int = 0) -> bytes:
    """A PNG of a straight road seen from a car: sky, asphalt narrowing to the horizon, dashed lane markings."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    image = Image.new("RGB", (width, height), (135, 170, 215))
    draw = ImageDraw.Draw(image)
    horizon = int(height * 0.45)
    draw.rectangle([0, horizon, width, height], fill=(70, 110, 60))
    vanishing = (width * 0.5, horizon)
    draw.polygon([(width * 0.05, height), (width * 0.95, height), (width * 0.53, horizon), (width * 0.47, horizon)],
                 fill=(60, 60, 64))
    for base in (0.18, 0.5, 0.82):
        bottom = (width * base, height)
        for t0 in np.arange(0.0, 0.92, 0.08):
            points = [tuple(np.add(bottom, np.multiply(t, np.subtract(vanishing, bottom)))) for t in (t0, t0 + 0.05)]
            draw.line(points, fill=(240, 200, 40) if base == 0.5 else (235, 235, 235), width=max(1, int(10 * (1 - t0))))
    noise = rng.integers(-6, 7, size=(height, width, 3))
    pixels = np.clip(np.asarray(image, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


FOUND, TRUE = (255, 40, 40), (40, 220, 90)


def draw_lanes(picture, lanes: Sequence, *, colour=FOUND, width: int = 3, scale=(1.0, 1.0)) -> None:
    """Draw ``lanes`` (objects with ``.points``, or [M, 2] arrays) as lines on a PIL image, in place. ``scale`` is
    the lanes' pixels per pixel of the picture, (x, y): (2, 2) for lanes of a source twice the picture's size."""
    from PIL import ImageDraw

    draw = ImageDraw.Draw(picture)
    sx, sy = (float(v) for v in scale)
    for lane in lanes:
        points = [(float(x) / sx, float(y) / sy) for x, y in getattr(lane, "points", lane)]
        if len(points) > 1:
            draw.line(points, fill=colour, width=width, joint="curve")


def overlay(image: bytes, lanes: Sequence, path, *, truth: Sequence | None = None) -> None:
    """Write ``image`` as a PNG to ``path`` with the found lanes (objects with ``.points``, or [M, 2] arrays, in its
    pixels) drawn in red over the true lanes in green, when ``truth`` is given."""
    from PIL import Image

    from orinkit.core.files import atomic_write_bytes

    picture = Image.open(io.BytesIO(image)).convert("RGB")
    for colour, width, group in ((TRUE, 7, truth or ()), (FOUND, 3, lanes)):
        draw_lanes(picture, group, colour=colour, width=width)
    buffer = io.BytesIO()
    picture.save(buffer, "PNG")
    atomic_write_bytes(path, buffer.getvalue())
