"""CULane's format: labelled frames in a folder of your own, and the CULane dataset with its list files.

A frame is an image (``.jpg`` or ``.png``) with an annotation beside it of the same stem, ``NAME.lines.txt``: one
line per lane, ``x1 y1 x2 y2 …`` in the image's pixels (CULane lists each lane from the bottom of the image up;
any order is accepted). Frames of any size are resized to the network input and their lanes scaled with them.

The CULane dataset lists its images in ``list/*.txt`` (paths from its root, ``/driver_…/00000.jpg``; the
``_gt`` lists add a segmentation label and lane flags after each path, which are not needed here) and its test
split's categories in ``list/test_split/test0_normal.txt`` … ``test8_night.txt``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.lanes.datasets import CULANE_CATEGORIES, LaneDataset, check_files, relative
from orinkit.lanes.errors import DatasetError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
ANNOTATION_HINT = "each line is one lane: x1 y1 x2 y2 … in pixels"
# The list each split is read from, the first that exists (the _gt lists are the ones CULane's tools train on).
CULANE_LISTS = {"train": ("train_gt.txt", "train.txt"), "val": ("val_gt.txt", "val.txt"), "test": ("test.txt",)}


def read_annotation(path: str | os.PathLike[str]) -> list[np.ndarray]:
    """The lanes of a ``.lines.txt`` file, each [M, 2] (x, y)."""
    lanes = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read annotation {path}: {exc}", hint=ANNOTATION_HINT) from None
    for number, line in enumerate(text.splitlines(), 1):
        values = line.split()
        if not values:
            continue
        try:
            numbers = np.array([float(v) for v in values])
        except ValueError:
            raise DatasetError(f"{path}:{number} holds something other than numbers", hint=ANNOTATION_HINT) from None
        if numbers.size % 2:
            raise DatasetError(f"{path}:{number} has an odd count of numbers ({numbers.size})", hint=ANNOTATION_HINT)
        lanes.append(numbers.reshape(-1, 2))
    return lanes


def write_annotation(path: str | os.PathLike[str], lanes) -> None:
    text = "".join(" ".join(f"{v:.2f}" for v in np.asarray(lane, float).ravel()) + "\n" for lane in lanes)
    Path(path).write_text(text, encoding="utf-8")


def annotation_of(image: Path) -> Path:
    return image.with_name(image.stem + ".lines.txt")


@dataclass(frozen=True)
class CulaneFrames(LaneDataset):
    """Images with their ``.lines.txt`` beside them: a folder of your frames (:meth:`find`) or a split of the
    CULane dataset (:func:`open_culane`)."""

    reader: object = read_annotation

    @classmethod
    def find(cls, folder: str | os.PathLike[str], split: str = "train") -> CulaneFrames:
        """The labelled frames found below ``folder`` (recursively); images without an annotation are skipped."""
        folder = Path(folder)
        if not folder.is_dir():
            raise DatasetError(f"{folder} is not a folder",
                               hint="give the folder holding the images and .lines.txt files")
        images = [p for p in sorted(folder.rglob("*")) if p.suffix.lower() in IMAGE_SUFFIXES
                  and annotation_of(p).is_file()]
        if not images:
            raise DatasetError(f"{folder} holds no image with a .lines.txt annotation beside it",
                               hint="name each annotation like its image: 00000.jpg and 00000.lines.txt")
        return cls("frames", folder, split, tuple(images), tuple(annotation_of(p) for p in images))

    @property
    def folder(self) -> Path:
        return self.root

    @property
    def frames(self) -> tuple[tuple[Path, Path], ...]:
        return tuple(zip(self.images, self.labels))


def _read_list(path: Path) -> list[str]:
    """The image paths of a CULane list file (the first word of each line)."""
    paths = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        words = line.split()
        if not words:
            continue
        if Path(words[0]).suffix.lower() not in IMAGE_SUFFIXES:
            raise DatasetError(f"{path}:{number} is not a CULane list line ({line.strip()[:60]!r})",
                               hint="each line starts with an image path from the dataset's root, "
                                    "/driver_…/00000.jpg (train_gt.txt adds a label path and 4 lane flags)")
        paths.append(relative(words[0]))
    return paths


def _categories(root: Path, names: list[str]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The test categories whose lists exist, as indices into the test list ``names``."""
    folder = root / "list" / "test_split"
    position = {name: index for index, name in enumerate(names)}
    categories = []
    for number, category in enumerate(CULANE_CATEGORIES):
        listing = folder / f"test{number}_{category}.txt"
        if not listing.is_file():
            continue
        indices = []
        for name in _read_list(listing):
            if name not in position:
                raise DatasetError(f"{listing} names {name}, which list/test.txt does not",
                                   hint="use the test_split lists that came with this list/test.txt")
            indices.append(position[name])
        categories.append((category, tuple(indices)))
    return tuple(categories)


def open_culane(root: str | os.PathLike[str], split: str = "train") -> CulaneFrames:
    """The ``split`` of the CULane dataset unpacked at ``root``, every image and annotation checked."""
    root = Path(root)
    candidates = [root / "list" / name for name in CULANE_LISTS[split]]
    listing = next((path for path in candidates if path.is_file()), None)
    if listing is None:
        raise DatasetError(f"CULane list {candidates[0]} is missing",
                           hint="give culane:PATH with the folder holding list/ as CULane unpacks it, or "
                                "frames:PATH for a folder of images with their .lines.txt beside them")
    names = _read_list(listing)
    if not names:
        raise DatasetError(f"{listing} lists no image", hint="give the list CULane ships, one image per line")
    images = tuple(root / name for name in names)
    labels = tuple(annotation_of(image) for image in images)
    check_files(images, "CULane image", f"unpack every driver_* folder that {listing.name} names into {root}")
    check_files(labels, "CULane annotation", "each image needs its NAME.lines.txt beside it, as CULane ships them")
    categories = _categories(root, names) if split == "test" else ()
    return CulaneFrames("culane", root, split, images, labels, categories=categories)
