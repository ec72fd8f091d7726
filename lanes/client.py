"""``LaneDetector(url)(image)``: lanes from the ``lane_detection`` ensemble, built on orinkit's Client."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from orinkit.client import Client, InvalidInputError, images
from orinkit.client.images import JPEG_QUALITY, MAX_IMAGE_BYTES, MAX_PIXELS, encode_bgr, read_encoded
from orinkit.lanes.errors import LaneInputError


@dataclass(frozen=True)
class Lane:
    points: np.ndarray  # [M, 2] (x, y) in the image's pixels, bottom row first
    score: float


# Video frames go as JPEG (orinkit.client.images: PNG costs ten times more to encode). Quality 90 keeps lane
# markings' edges (the model was trained on JPEG 30..95 among others).
def check_frame_format(frame_format: str) -> str:
    """``frame_format`` in lower case, or LaneInputError when it is not one of :data:`FRAME_FORMATS`."""
    value = images.frame_format_name(frame_format)
    if value is None:
        raise LaneInputError(f"frame_format {frame_format!r} is not one Pillow's server step decodes here",
                             hint="use 'jpeg' (fast, for video) or 'png' (lossless)")
    return value


def check_quality(quality) -> int:
    if not images.is_jpeg_quality(quality):
        raise LaneInputError(f"JPEG quality {quality!r} is outside 1..100", hint=f"e.g. {JPEG_QUALITY}")
    return int(quality)


def encode(image, frame_format: str = "jpeg", *, quality: int = JPEG_QUALITY) -> bytes:
    """Encoded image bytes from bytes or a file path (sent as they are), or from an HxWx3 uint8 array in BGR order
    (as cv2 and orinkit.video give), encoded as ``frame_format``: "jpeg" (at ``quality``) or "png"."""
    data = read_encoded(image)
    if data is not None:
        return data
    frame_format, quality = check_frame_format(frame_format), check_quality(quality)
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise InvalidInputError(f"an image array must be HxWx3 uint8 (BGR), got {array.shape} {array.dtype}",
                                hint="pass encoded bytes, a file path, or a BGR uint8 array")
    return encode_bgr(array, frame_format, quality=quality)


def lanes_from(points: np.ndarray, scores: np.ndarray, count) -> list[Lane]:
    """The ensemble's fixed-size outputs (NaN-padded points, scores, count) as a list of lanes."""
    count = int(np.asarray(count).reshape(-1)[0])
    return [Lane(p[~np.isnan(p).any(axis=1)], float(s)) for p, s in zip(points[:count], scores[:count])]




def check_image(data: bytes, *, max_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_PIXELS) -> None:
    """InvalidInputError for bytes that are no image, or too many bytes or pixels (read from the header only)."""
    images.check_image(data, max_bytes=max_bytes, max_pixels=max_pixels,
                       size_hint="downscale it on the camera side; a lane model sees 640x360")


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
