"""``LaneDetector(url)(image)``: lanes from the ``lane_detection`` ensemble, built on orinkit's Client."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.client import Client, InvalidInputError


@dataclass(frozen=True)
class Lane:
    points: np.ndarray  # [M, 2] (x, y) in the image's pixels, bottom row first
    score: float


def encode(image) -> bytes:
    """Encoded image bytes from bytes, a file path, or an HxWx3 uint8 array in BGR order (as cv2 gives)."""
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
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise InvalidInputError(f"an image array must be HxWx3 uint8 (BGR), got {array.shape} {array.dtype}",
                                hint="pass encoded bytes, a file path, or a BGR uint8 array")
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array[:, :, ::-1])).save(buffer, "PNG")
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
    """Sends one encoded image per call; returns its lanes, best first. Images over ``max_image_bytes`` or
    ``max_pixels`` (the server step's defaults) are refused before they are sent. Extra keyword arguments go to
    Client (TLS, timeouts, retries, shared memory)."""

    def __init__(self, url: str = "localhost:8001", model: str = "lane_detection", *,
                 max_image_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_PIXELS, **client_options) -> None:
        self.max_image_bytes, self.max_pixels = max_image_bytes, max_pixels
        self.client = Client(url, model, **client_options)

    def __call__(self, image) -> list[Lane]:
        data = encode(image)
        check_image(data, max_bytes=self.max_image_bytes, max_pixels=self.max_pixels)
        result = self.client(np.array([data], dtype=np.object_))
        return lanes_from(result["lanes"], result["scores"], result["count"])

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> LaneDetector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
