"""Labelled frames in CULane's format, to fine-tune on one's own roads.

A frame is an image (``.jpg`` or ``.png``) with an annotation beside it of the same stem, ``NAME.lines.txt``: one
line per lane, ``x1 y1 x2 y2 …`` in the image's pixels (CULane lists each lane from the bottom of the image up;
any order is accepted). Frames of any size are resized to the network input and their lanes scaled with them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.lanes.errors import LaneError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def read_annotation(path: str | os.PathLike[str]) -> list[np.ndarray]:
    """The lanes of a ``.lines.txt`` file, each [M, 2] (x, y)."""
    lanes = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        values = line.split()
        if not values:
            continue
        try:
            numbers = np.array([float(v) for v in values])
        except ValueError:
            raise LaneError(f"{path}:{number} holds something other than numbers",
                            hint="each line is one lane: x1 y1 x2 y2 … in pixels") from None
        if numbers.size % 2:
            raise LaneError(f"{path}:{number} has an odd count of numbers ({numbers.size})",
                            hint="each line is one lane: x1 y1 x2 y2 … in pixels")
        lanes.append(numbers.reshape(-1, 2))
    return lanes


def write_annotation(path: str | os.PathLike[str], lanes) -> None:
    text = "".join(" ".join(f"{v:.2f}" for v in np.asarray(lane, float).ravel()) + "\n" for lane in lanes)
    Path(path).write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class CulaneFrames:
    """The labelled frames found below ``folder`` (recursively)."""

    folder: Path
    frames: tuple[tuple[Path, Path], ...]

    @classmethod
    def find(cls, folder: str | os.PathLike[str]) -> CulaneFrames:
        folder = Path(folder)
        if not folder.is_dir():
            raise LaneError(f"{folder} is not a folder", hint="give the folder holding the images and .lines.txt files")
        frames = []
        for image in sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES):
            annotation = image.with_name(image.stem + ".lines.txt")
            if annotation.is_file():
                frames.append((image, annotation))
        if not frames:
            raise LaneError(f"{folder} holds no image with a .lines.txt annotation beside it",
                            hint="name each annotation like its image: 00000.jpg and 00000.lines.txt")
        return cls(folder, tuple(frames))

    def __len__(self) -> int:
        return len(self.frames)

    def load(self, index: int, width: int = 640, height: int = 360) -> tuple[np.ndarray, list[np.ndarray]]:
        """Frame ``index`` as a BGR uint8 [height, width, 3] array and its lanes in those pixels."""
        from PIL import Image

        image_path, annotation = self.frames[index]
        try:
            with Image.open(image_path) as image:
                original = image.size
                pixels = np.asarray(image.convert("RGB").resize((width, height), Image.BILINEAR))
        except OSError as exc:
            raise LaneError(f"cannot read {image_path}: {exc}", hint="pass JPEG or PNG frames") from None
        scale = np.array([width / original[0], height / original[1]])
        return pixels[:, :, ::-1], [lane * scale for lane in read_annotation(annotation)]
