"""A folder of images as a video: its images in name order, decoded with Pillow."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from orinkit.core.optional import require
from orinkit.video.errors import NotAVideoError, SourceLostError
from orinkit.video.frames import Frame
from orinkit.video.uri import IMAGE_SUFFIXES, SourceSpec


class FolderSource:
    live = False

    def __init__(self, spec: SourceSpec, size: tuple[int, int] | None = None, fps: float | None = None) -> None:
        self.spec, self.size, self.uri, self.fps = spec, size, spec.uri, fps
        self._paths: list[Path] = []
        self._index = 0

    def open(self) -> None:
        self._paths = sorted(p for p in Path(self.spec.target).iterdir()
                             if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
        if not self._paths:
            raise NotAVideoError(f"the folder {self.spec.target} holds no images",
                                 hint=f"put {', '.join(IMAGE_SUFFIXES)} files there, or give a video file")
        self._index = 0

    def read(self) -> Frame | None:
        if self._index >= len(self._paths):
            return None
        image_module = require("PIL.Image")
        path = self._paths[self._index]
        try:
            with image_module.open(path) as image:
                source_size = image.size
                rgb = image.convert("RGB")
                if self.size and self.size != source_size:
                    rgb = rgb.resize(self.size, image_module.BILINEAR)
        except (OSError, image_module.DecompressionBombError) as exc:
            raise SourceLostError(f"{path} is not an image Pillow can read: {exc}",
                                  hint="remove it from the folder or replace it") from None
        pixels = np.ascontiguousarray(np.asarray(rgb)[:, :, ::-1])
        pts = self._index / self.fps if self.fps else None
        frame = Frame(self._index, pixels, time.time(), pts, source_size)
        self._index += 1
        return frame

    def close(self) -> None:
        self._paths = []
