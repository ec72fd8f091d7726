"""Photographs as scenery and texture: the two sample images scikit-learn ships (``china.jpg``, a pagoda over a
lake among trees, and ``flower.jpg``, a dahlia before dark foliage; read from the installed package, never
downloaded).

Crops of them stand behind the horizon (trees, buildings, water, sky), cover the verges (foliage) and, as their fine
detail alone, texture the ground. The files are located without importing scikit-learn, which would cost every
data-loading worker a second and a hundred megabytes.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from orinkit.lanes.errors import LaneError

PHOTOS = ("china.jpg", "flower.jpg")
# Regions (photo, left, top, right, bottom) of the 640x427 photographs.
# The dahlia itself is left out: an orange ball on the horizon is no road's scenery.
_BACKDROPS = (("china.jpg", 0, 0, 640, 330), ("china.jpg", 300, 90, 640, 427), ("china.jpg", 0, 120, 360, 427),
              ("china.jpg", 0, 150, 640, 300), ("flower.jpg", 0, 0, 170, 427))
_FOLIAGE = (("china.jpg", 0, 300, 640, 427), ("china.jpg", 450, 140, 640, 427), ("flower.jpg", 0, 0, 165, 427),
            ("flower.jpg", 460, 0, 640, 300), ("china.jpg", 0, 140, 90, 427))
# Square regions whose fine detail textures the ground: foliage, more foliage, petals, roof tiles seen from afar.
_DETAIL = (("china.jpg", 470, 180, 598, 308), ("china.jpg", 60, 299, 188, 427), ("flower.jpg", 230, 140, 358, 268),
           ("china.jpg", 380, 300, 508, 427))
DETAIL_TILES = len(_DETAIL)


@functools.lru_cache(maxsize=1)
def photo_folder() -> Path:
    """Where the installed scikit-learn keeps its sample images."""
    spec = importlib.util.find_spec("sklearn")
    folder = None if spec is None or spec.origin is None else Path(spec.origin).parent / "datasets" / "images"
    if folder is None or not all((folder / name).is_file() for name in PHOTOS):
        raise LaneError("the wide road data cuts scenery from scikit-learn's sample photographs, and scikit-learn "
                        "is not installed", hint="pip install scikit-learn (its images are read, nothing downloads)")
    return folder


@functools.lru_cache(maxsize=2)
def _photo(name: str) -> Image.Image:
    with Image.open(photo_folder() / name) as picture:
        return picture.convert("RGB")


def _region(table: tuple, pick: int, corner: np.ndarray, mirror: bool, aspect: float) -> Image.Image:
    """A crop of ``aspect`` (width / height) from region ``pick`` of ``table``, placed by ``corner`` (two numbers in
    [0, 1)) within it."""
    name, left, top, right, bottom = table[pick % len(table)]
    width, height = right - left, bottom - top
    crop_w = min(width, max(32, round(height * aspect)))
    crop_h = min(height, max(24, round(crop_w / aspect)))
    x = left + int(corner[0] * (width - crop_w + 1))
    y = top + int(corner[1] * (height - crop_h + 1))
    picture = _photo(name).crop((x, y, x + crop_w, y + crop_h))
    return picture.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if mirror else picture


def backdrop(pick: int, width: int, height: int, corner: np.ndarray, mirror: bool) -> Image.Image:
    """A ``width`` x ``height`` picture to stand behind the horizon."""
    return _region(_BACKDROPS, pick, corner, mirror, width / height).resize((width, height),
                                                                             Image.Resampling.BILINEAR)


def foliage(pick: int, width: int, height: int, corner: np.ndarray, mirror: bool) -> Image.Image:
    """A ``width`` x ``height`` picture of plants (flattened by scaling) to lie on the verges."""
    return _region(_FOLIAGE, pick // 7, corner, mirror, width / height).resize((width, height),
                                                                                Image.Resampling.BILINEAR)


def detail_tile(index: int, size: int) -> np.ndarray:
    """[size, size] uint8 around 128: the fine detail (the photo less its blur) of region ``index``, mirrored into a
    tile that repeats without seams."""
    name, left, top, right, bottom = _DETAIL[index % len(_DETAIL)]
    grey = _photo(name).crop((left, top, right, bottom)).convert("L").resize((size // 2, size // 2),
                                                                            Image.Resampling.BILINEAR)
    values = np.asarray(grey, dtype=np.float32)
    detail = values - np.asarray(grey.filter(ImageFilter.BoxBlur(4)), dtype=np.float32)
    detail *= 6.0 / max(float(detail.std()), 1e-3)
    tile = np.block([[detail, detail[:, ::-1]], [detail[::-1], detail[::-1, ::-1]]])
    return np.clip(np.rint(128.0 + tile), 0, 255).astype(np.uint8)
