"""Images as detectors take them: any array or file turned into one HxWx3 uint8 BGR array, or refused in one line.

Decisions, so that no real image crashes the pipeline:

- grayscale (HxW or HxWx1) is accepted and repeated into 3 channels, as ``cv2.imread`` does;
- a 4th channel (BGRA, RGBA files) is dropped, not composited, as ``cv2.imread(IMREAD_COLOR)`` does;
- 16-bit images keep their top 8 bits (``>> 8``), as ``cv2.imread`` does; 16-bit PNGs decoded by Pillow
  (mode ``I;16``/``I``) are scaled the same way instead of being clipped at 255 by ``convert("RGB")``;
- EXIF orientation is applied to files, as ``cv2.imread`` does;
- float arrays, empty images, other channel counts: :class:`DetectInputError`.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from orinkit.detect.errors import DetectInputError

MAX_PIXELS = 100_000_000  # above 8K (33 MP) with room; a decompression bomb is far beyond


def as_bgr8(image) -> np.ndarray:
    """An HxWx3 uint8 array in BGR order from an array of uint8/uint16, HxW, HxWx1, HxWx3 or HxWx4 (BGRA)."""
    array = np.asarray(image)
    if array.dtype == np.uint16:
        array = (array >> 8).astype(np.uint8)
    elif array.dtype != np.uint8:
        raise DetectInputError(f"an image array must be uint8 (or uint16), got {array.dtype}",
                               hint="pass 0..255 uint8 pixels in BGR order, as cv2 and orinkit.video give")
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    elif array.ndim == 3 and array.shape[2] == 4:
        array = array[:, :, :3]
    if array.ndim != 3 or array.shape[2] != 3:
        raise DetectInputError(f"an image array must be HxWx3 (BGR), HxWx4 or HxW, got shape {array.shape}",
                               hint="pass one image, height x width x channels")
    if array.shape[0] < 1 or array.shape[1] < 1:
        raise DetectInputError(f"the image is empty ({array.shape[1]}x{array.shape[0]} px)",
                               hint="pass an image of at least 1x1 pixels")
    return array


def _pillow_to_bgr(picture) -> np.ndarray:
    mode = picture.mode
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I"):  # 16-bit grayscale PNG: keep the top 8 bits
        pixels = np.asarray(picture)
        return as_bgr8((np.clip(pixels, 0, 65535).astype(np.uint16) >> 8).astype(np.uint8))
    if mode == "L":
        return as_bgr8(np.asarray(picture))
    rgb = np.asarray(picture if mode == "RGB" else picture.convert("RGB"))
    return np.ascontiguousarray(rgb[:, :, ::-1])


def decode_image(data: bytes, *, max_pixels: int = MAX_PIXELS) -> np.ndarray:
    """Encoded image bytes (JPEG, PNG, BMP, WebP, TIFF...) as an HxWx3 uint8 BGR array."""
    try:
        import cv2
    except ImportError:
        cv2 = None
    if cv2 is not None:
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
        if pixels is None:
            raise DetectInputError(f"the bytes are not an image OpenCV can decode ({len(data)} bytes)",
                                   hint="pass JPEG or PNG bytes, a path to such a file, or a BGR uint8 array")
        if pixels.shape[0] * pixels.shape[1] > max_pixels:
            raise DetectInputError(f"the image is {pixels.shape[1]}x{pixels.shape[0]}, above "
                                   f"{max_pixels / 1e6:g} megapixels", hint="downscale it first")
        return pixels
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as picture:
            if picture.width * picture.height > max_pixels:
                raise DetectInputError(f"the image is {picture.width}x{picture.height}, above "
                                       f"{max_pixels / 1e6:g} megapixels", hint="downscale it first")
            picture = ImageOps.exif_transpose(picture)
            return _pillow_to_bgr(picture)
    except DetectInputError:
        raise
    except Image.DecompressionBombError:
        raise DetectInputError(f"the image has far more than {max_pixels / 1e6:g} megapixels",
                               hint="downscale it first") from None
    except UnidentifiedImageError:
        raise DetectInputError(f"the bytes are not an image Pillow can decode ({len(data)} bytes)",
                               hint="pass JPEG or PNG bytes, a path to such a file, or a BGR uint8 array") from None
    except Exception as exc:  # noqa: BLE001 - Pillow reports truncated or corrupt data with many types
        raise DetectInputError(f"the image cannot be decoded: {exc}", hint="check the file is complete") from None


def load_image(image) -> np.ndarray:
    """A BGR uint8 array from an array (see :func:`as_bgr8`), encoded bytes, or a path to an image file."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return decode_image(bytes(image))
    if isinstance(image, (str, os.PathLike)):
        path = Path(image)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise DetectInputError(f"no image file at {path}", hint="check the path") from None
        except OSError as exc:
            raise DetectInputError(f"cannot read the image file {path}: {exc.strerror}",
                                   hint="check the path and its permissions") from None
        return decode_image(data)
    if isinstance(image, np.ndarray):
        return as_bgr8(image)
    raise DetectInputError(f"an image must be a BGR uint8 array, encoded bytes or a path, got {type(image).__name__}",
                           hint="pass cv2/orinkit.video frames, JPEG/PNG bytes or a file path")
