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
        return Path(image).read_bytes()
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


class LaneDetector:
    """Sends one encoded image per call; returns its lanes, best first. Extra keyword arguments go to Client
    (TLS, timeouts, retries, shared memory)."""

    def __init__(self, url: str = "localhost:8001", model: str = "lane_detection", **client_options) -> None:
        self.client = Client(url, model, **client_options)

    def __call__(self, image) -> list[Lane]:
        result = self.client(np.array([encode(image)], dtype=np.object_))
        return lanes_from(result["lanes"], result["scores"], result["count"])

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> LaneDetector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
