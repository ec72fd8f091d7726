"""``LaneDetector(url)(image)``: lanes from the ``lane_detection`` ensemble, built on orinkit's Client."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.client import Client, InvalidInputError
from orinkit.lanes.errors import LaneInputError


@dataclass(frozen=True)
class Lane:
    points: np.ndarray  # [M, 2] (x, y) in the image's pixels, bottom row first
    score: float


# Pillow's PNG costs 41 ms a 640x360 frame and 94 ms at 1280x720 here, JPEG at quality 90 3 ms and 10 ms: video
# frames go as JPEG. Quality 90 keeps lane markings' edges (the model was trained on JPEG 30..95 among others).
FRAME_FORMATS = ("jpeg", "png")
JPEG_QUALITY = 90


def check_frame_format(frame_format: str) -> str:
    """``frame_format`` in lower case, or LaneInputError when it is not one of :data:`FRAME_FORMATS`."""
    value = str(frame_format).lower()
    value = "jpeg" if value == "jpg" else value
    if value not in FRAME_FORMATS:
        raise LaneInputError(f"frame_format {frame_format!r} is not one Pillow's server step decodes here",
                             hint="use 'jpeg' (fast, for video) or 'png' (lossless)")
    return value


def check_quality(quality) -> int:
    if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or not 1 <= quality <= 100:
        raise LaneInputError(f"JPEG quality {quality!r} is outside 1..100", hint=f"e.g. {JPEG_QUALITY}")
    return int(quality)


def encode(image, frame_format: str = "jpeg", *, quality: int = JPEG_QUALITY) -> bytes:
    """Encoded image bytes from bytes or a file path (sent as they are), or from an HxWx3 uint8 array in BGR order
    (as cv2 and orinkit.video give), encoded as ``frame_format``: "jpeg" (at ``quality``) or "png"."""
    if isinstance(image, (bytes, bytearray)):
        return bytes(image)
    if isinstance(image, (str, os.PathLike)):
        try:
            return Path(image).read_bytes()
        except FileNotFoundError:
            raise InvalidInputError(f"no image file at {os.fspath(image)}", hint="check the path") from None
        except OSError as exc:
            raise InvalidInputError(f"cannot read the image file {os.fspath(image)}: {exc.strerror}",
                                    hint="check the path and its permissions") from None
    frame_format, quality = check_frame_format(frame_format), check_quality(quality)
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise InvalidInputError(f"an image array must be HxWx3 uint8 (BGR), got {array.shape} {array.dtype}",
                                hint="pass encoded bytes, a file path, or a BGR uint8 array")
    from PIL import Image

    height, width = array.shape[:2]
    # Pillow reads BGR rows itself: no reversed copy of the frame first.
    picture = Image.frombuffer("RGB", (width, height), np.ascontiguousarray(array), "raw", "BGR", 0, 1)
    buffer = io.BytesIO()
    if frame_format == "jpeg":
        picture.save(buffer, "JPEG", quality=quality)
    else:
        picture.save(buffer, "PNG")
    return buffer.getvalue()


def lanes_from(points: np.ndarray, scores: np.ndarray, count) -> list[Lane]:
    """The ensemble's fixed-size outputs (NaN-padded points, scores, count) as a list of lanes."""
    count = int(np.asarray(count).reshape(-1)[0])
    return [Lane(p[~np.isnan(p).any(axis=1)], float(s)) for p, s in zip(points[:count], scores[:count])]


# The same bounds as the server's image step (orinkit.repo.steps.ImagePreprocess): checked here first, so that an
# image the server would refuse is never uploaded.
MAX_IMAGE_BYTES = 16 << 20
MAX_PIXELS = 25_000_000


def check_image(data: bytes, *, max_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_PIXELS) -> None:
    """InvalidInputError for bytes that are no image, or too many bytes or pixels (read from the header only)."""
    from PIL import Image, UnidentifiedImageError

    if len(data) > max_bytes:
        raise InvalidInputError(f"the image is {len(data) / 2**20:.1f} MiB, above the limit of "
                                f"{max_bytes / 2**20:.0f} MiB", hint="send a JPEG, or raise max_image_bytes")
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
    except (UnidentifiedImageError, OSError) as exc:
        raise InvalidInputError(f"the bytes are not an image Pillow can read ({len(data)} bytes: {exc})",
                                hint="send JPEG or PNG bytes, a path to such a file, or a BGR uint8 array") from None
    except Image.DecompressionBombError:
        width, height = max_pixels, 2  # Pillow refused it as a bomb: far over any sane limit
    if width * height > max_pixels:
        raise InvalidInputError(f"the image is {width}x{height}, above the limit of {max_pixels / 1e6:g} megapixels",
                                hint="downscale it on the camera side; a lane model sees 640x360")


class LaneDetector:
    """Sends one encoded image per call; returns its lanes, best first. Bytes and paths are sent as they are;
    arrays (video frames) are encoded as ``frame_format`` ("jpeg" at ``jpeg_quality``, or lossless "png"). Images
    over ``max_image_bytes`` or ``max_pixels`` (the server step's defaults) are refused before they are sent. Extra
    keyword arguments go to Client (TLS, timeouts, retries, shared memory)."""

    def __init__(self, url: str = "localhost:8001", model: str = "lane_detection", *, frame_format: str = "jpeg",
                 jpeg_quality: int = JPEG_QUALITY, max_image_bytes: int = MAX_IMAGE_BYTES,
                 max_pixels: int = MAX_PIXELS, **client_options) -> None:
        self.frame_format, self.jpeg_quality = check_frame_format(frame_format), check_quality(jpeg_quality)
        self.max_image_bytes, self.max_pixels = max_image_bytes, max_pixels
        self.client = Client(url, model, **client_options)

    def __call__(self, image) -> list[Lane]:
        data = encode(image, self.frame_format, quality=self.jpeg_quality)
        check_image(data, max_bytes=self.max_image_bytes, max_pixels=self.max_pixels)
        result = self.client(np.array([data], dtype=np.object_))
        return lanes_from(result["lanes"], result["scores"], result["count"])

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> LaneDetector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
