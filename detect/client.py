"""``RemoteDetector(url, name)(image) -> Detections``: detections from the served ensemble, built on orinkit's Client.

The ensemble (orinkit.detect.repository) takes encoded images and answers fixed-size outputs: ``boxes``
[max_det, 4] in the source image's pixels, ``scores``, ``classes`` and ``count``; its config carries the class
names. Imports numpy, Pillow and tritonclient only (no torch, no onnxruntime): it runs on any machine that talks to
the server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np

from orinkit.client import Client, InvalidInputError, images
from orinkit.client.images import (
    FRAME_FORMATS,
    JPEG_QUALITY,
    MAX_IMAGE_BYTES,
    MAX_PIXELS,
    encode_bgr,
    frame_format_name,
    is_jpeg_quality,
    read_encoded,
)
from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectError
from orinkit.detect.images import as_bgr8

# The server step's bounds (orinkit.client.images, and detect.repository's smallest side).
MIN_SIDE = 8


def encode(image, frame_format: str = "jpeg", *, quality: int = JPEG_QUALITY) -> bytes:
    """Encoded image bytes: bytes and file paths as they are; arrays (BGR uint8 as cv2 and orinkit.video give,
    or grayscale, BGRA, uint16: see orinkit.detect.images.as_bgr8) encoded as ``frame_format``."""
    data = read_encoded(image)
    if data is not None:
        return data
    if not isinstance(image, np.ndarray):
        raise InvalidInputError(f"an image must be a BGR uint8 array, encoded bytes or a path, got "
                                f"{type(image).__name__}", hint="pass cv2/orinkit.video frames, JPEG/PNG bytes or "
                                                                "a file path")
    try:
        array = as_bgr8(image)
    except DetectError as exc:
        raise InvalidInputError(exc.message, hint=exc.hint) from None
    return encode_bgr(array, frame_format, quality=quality, png_level=1)


def check_image(data: bytes, *, max_bytes: int = MAX_IMAGE_BYTES, max_pixels: int = MAX_PIXELS,
                min_side: int = MIN_SIDE) -> None:
    """InvalidInputError, before anything is sent, for bytes that are no image, or too many bytes or pixels, or a
    side under ``min_side`` (read from the header only). The server refuses the same, in the same words."""
    images.check_image(data, max_bytes=max_bytes, max_pixels=max_pixels, min_side=min_side,
                       size_hint="downscale it on the camera side (a detector sees 640x640 or less)")


def names_of(parameters: Mapping[str, str]) -> tuple[str, ...]:
    """The class names an ensemble's config carries (parameter ``names``, a JSON list); () when it has none."""
    text = parameters.get("names")
    if not text:
        return ()
    try:
        names = json.loads(text)
    except ValueError:
        return ()
    return tuple(str(n) for n in names) if isinstance(names, list) else ()


def detections_from(result: Mapping[str, np.ndarray], names: Sequence[str] = ()) -> list[Detections]:
    """The ensemble's outputs for a batch (``boxes`` [B, max_det, 4], ``scores``, ``classes``, ``count`` [B, 1]),
    or for one image (no batch axis), as one Detections per image."""
    boxes = np.asarray(result["boxes"], np.float32)
    scores, classes = np.asarray(result["scores"]), np.asarray(result["classes"])
    counts = np.asarray(result["count"]).reshape(-1)
    if boxes.ndim == 2:
        boxes, scores, classes = boxes[None], scores[None], classes[None]
    return [Detections(boxes[i, :n], scores[i, :n], classes[i, :n], tuple(names))
            for i, n in enumerate(int(c) for c in counts)]


class RemoteDetector:
    """Sends encoded images to the detection ensemble ``name`` at ``url``; returns their Detections, named with the
    class names the ensemble's config carries. Bytes and paths are sent as they are, arrays are encoded as
    ``frame_format`` ("jpeg" at ``jpeg_quality``, or lossless "png"). Images the server would refuse (over
    ``max_image_bytes`` or ``max_pixels``, a side under ``min_side``) are refused before they are sent. Extra
    keyword arguments go to Client (TLS, timeouts, retries)."""

    def __init__(self, url: str = "localhost:8001", name: str = "detection", *, frame_format: str = "jpeg",
                 jpeg_quality: int = JPEG_QUALITY, max_image_bytes: int = MAX_IMAGE_BYTES,
                 max_pixels: int = MAX_PIXELS, min_side: int = MIN_SIDE, **client_options) -> None:
        frame_format = frame_format_name(frame_format) or str(frame_format).lower()
        if frame_format not in FRAME_FORMATS:
            raise InvalidInputError(f"frame_format {frame_format!r} is not one the server's step decodes here",
                                    hint="use 'jpeg' (fast, for video) or 'png' (lossless)")
        if not is_jpeg_quality(jpeg_quality):
            raise InvalidInputError(f"JPEG quality {jpeg_quality!r} is outside 1..100", hint=f"e.g. {JPEG_QUALITY}")
        self.frame_format, self.jpeg_quality = frame_format, jpeg_quality
        self.limits = {"max_bytes": max_image_bytes, "max_pixels": max_pixels, "min_side": min_side}
        self.client = Client(url, name, **client_options)
        self._names: tuple[str, ...] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The class names, read once from the ensemble's config."""
        if self._names is None:
            self._names = names_of(self.client.info.parameters)
        return self._names

    def _encoded(self, image) -> bytes:
        data = encode(image, self.frame_format, quality=self.jpeg_quality)
        check_image(data, **self.limits)
        return data

    def __call__(self, image) -> Detections:
        return self._infer([self._encoded(image)])[0]

    def batch(self, images: Sequence) -> list[Detections]:
        """Several images, sent in requests of up to the ensemble's max_batch_size images each (one a request for
        an ensemble over a model with a fixed batch of 1)."""
        encoded = [self._encoded(image) for image in images]
        step = max(1, self.client.info.max_batch_size)
        found: list[Detections] = []
        for start in range(0, len(encoded), step):
            found += self._infer(encoded[start:start + step])
        return found

    def _infer(self, encoded: list[bytes]) -> list[Detections]:
        images = np.array([[data] for data in encoded], dtype=np.object_)
        # A batching ensemble takes [B, 1]; one without batching ([1, 1] as its full shape) takes the same array.
        batching = self.client.info.max_batch_size > 0
        result = self.client.infer_batch(images) if batching else self.client.infer_sample(images)
        return detections_from(result, self.names)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RemoteDetector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
