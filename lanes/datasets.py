"""Lane datasets on disk, opened from one spec ``KIND:PATH``: CULane, TuSimple, CurveLanes, or a folder of frames.

========================  ====================================================================================
spec                      what PATH holds (split ``train`` / ``val`` / ``test``)
========================  ====================================================================================
``culane:PATH``           CULane: ``list/train_gt.txt`` / ``list/val_gt.txt`` / ``list/test.txt`` (or
                          ``train.txt``, ``val.txt``), each image with its ``.lines.txt``; the test split's
                          categories from ``list/test_split/test0_normal.txt`` … ``test8_night.txt``
``tusimple:PATH``         TuSimple: ``label_data_*.json`` (train: all of them, as TuSimple results are trained;
                          val: ``label_data_0531.json``) and ``test_label.json``, in PATH, ``PATH/train_set`` or
                          ``PATH/test_set``; ``raw_file`` paths are relative to the JSON's folder
``curvelanes:PATH``       CurveLanes: ``train/train.txt`` and ``valid/valid.txt`` (``images/NAME.jpg``), labels
                          in ``labels/NAME.lines.json``; its test labels are not published, so val and test are
                          the valid split
``frames:PATH``           a folder of your own frames, each image beside its CULane ``.lines.txt`` (every split)
========================  ====================================================================================

Every listed image and annotation file is checked when a dataset opens, so a missing one stops a run before it
starts; an annotation's contents are read when its image is, and one that is malformed raises
:class:`~orinkit.lanes.errors.DatasetError` naming the file and line. Images of any size come out resized to the
network input, their lanes scaled with them. numpy and Pillow only: the data-loader workers stay light.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.lanes.errors import DatasetError

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Kind:
    """What a dataset kind is called and how it is judged: its lanes per image and LaneATT's settings for it."""

    title: str
    max_lanes: int  # the most lanes an image of it is annotated with (training targets per image)
    conf_threshold: float = 0.5
    nms_threshold: float = 50.0
    top_k: int = 4


KINDS = {
    "culane": Kind("CULane", 4),
    "tusimple": Kind("TuSimple", 5, conf_threshold=0.2, nms_threshold=45.0, top_k=5),
    "curvelanes": Kind("CurveLanes", 10, top_k=8),
    "frames": Kind("frames", 8),
}
# CULane's test categories, in its own order (list/test_split/test{i}_{name}.txt). "cross" holds crossroads with
# no lane at all: CULane reports its false positives only.
CULANE_CATEGORIES = ("normal", "crowd", "hlight", "shadow", "noline", "arrow", "curve", "cross", "night")
NO_LANE_CATEGORIES = ("cross",)


def parse_spec(spec: str) -> tuple[str, Path]:
    """``"culane:/data/CULane"`` → ``("culane", Path("/data/CULane"))``; refuses unknown kinds."""
    kind, colon, path = str(spec).partition(":")
    kind = kind.strip().lower()
    if not colon or kind not in KINDS:
        raise DatasetError(f"unknown dataset {spec!r}: the kind before ':' must be one of {', '.join(KINDS)}",
                           hint="give --dataset KIND:PATH, e.g. culane:/data/CULane or tusimple:/data/TuSimple")
    if not path.strip():
        raise DatasetError(f"dataset {spec!r} names no folder", hint=f"give {kind}:PATH with the dataset's folder")
    return kind, Path(path).expanduser()


def read_image(path: Path, width: int, height: int) -> tuple[np.ndarray, tuple[int, int]]:
    """The image at ``path`` as BGR uint8 [height, width, 3] (bilinear, as the serving ensemble resizes) and its
    original (width, height)."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            original = image.size
            pixels = np.asarray(image.convert("RGB").resize((width, height), Image.BILINEAR))
    except OSError as exc:
        raise DatasetError(f"cannot read image {path}: {exc}", hint="pass JPEG or PNG images that open") from None
    return pixels[:, :, ::-1], original


@dataclass(frozen=True)
class LaneDataset:
    """The images of one split of a lane dataset and their lanes. ``labels[i]`` is the annotation file of
    ``images[i]`` (read by ``reader`` when the image is), or its lanes themselves where the list holds them."""

    kind: str
    root: Path
    split: str
    images: tuple[Path, ...]
    labels: tuple
    reader: Callable[[Path], list[np.ndarray]] | None = None
    categories: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (name, indices into images), the dataset's order

    def __len__(self) -> int:
        return len(self.images)

    @property
    def max_lanes(self) -> int:
        return KINDS[self.kind].max_lanes

    def describe(self) -> str:
        categories = f", {len(self.categories)} categories" if self.categories else ""
        images = f"{len(self):,} image{'' if len(self) == 1 else 's'}"
        return f"{KINDS[self.kind].title} {self.split} split ({images}{categories}) in {self.root}"

    def lanes(self, index: int) -> list[np.ndarray]:
        """Image ``index``'s lanes, each [M, 2] (x, y) in its own pixels."""
        label = self.labels[index]
        if isinstance(label, Path):
            return self.reader(label)
        return [np.array(lane, dtype=np.float64) for lane in label]

    def load(self, index: int, width: int = 640, height: int = 360) -> tuple[np.ndarray, list[np.ndarray]]:
        """Image ``index`` as a BGR uint8 [height, width, 3] array and its lanes in those pixels."""
        pixels, original = read_image(self.images[index], width, height)
        scale = np.array([width / original[0], height / original[1]])
        return pixels, [lane * scale for lane in self.lanes(index)]


def check_files(paths, what: str, hint: str) -> None:
    """Every path exists, else the first missing one is named (checked up front: a run must not die hours in)."""
    for path in paths:
        if not path.is_file():
            raise DatasetError(f"{what} {path} is missing", hint=hint)


def open_dataset(spec: str, split: str = "train") -> LaneDataset:
    """The ``split`` of the dataset ``spec`` (``KIND:PATH``), every listed file checked."""
    kind, root = parse_spec(spec)
    if split not in SPLITS:
        raise DatasetError(f"unknown split {split!r}", hint=f"use one of {', '.join(SPLITS)}")
    if not root.is_dir():
        raise DatasetError(f"{root} is not a folder", hint=f"give {kind}:PATH with the folder the dataset unpacked to")
    if kind == "culane":
        from orinkit.lanes.culane import open_culane

        return open_culane(root, split)
    if kind == "frames":
        from orinkit.lanes.culane import CulaneFrames

        return CulaneFrames.find(root, split=split)
    if kind == "tusimple":
        return _open_tusimple(root, split)
    return _open_curvelanes(root, split)


# --- TuSimple ---------------------------------------------------------------------------------------------------

TUSIMPLE_HINT = ("each line of a TuSimple label file is one JSON object with lanes (x per h_sample, -2 where "
                 "absent), h_samples and raw_file")


def _tusimple_files(root: Path, split: str) -> list[Path]:
    if split == "test":
        folders, pattern = (root, root / "test_set"), "test_label.json"
    else:
        folders, pattern = (root, root / "train_set"), "label_data_0531.json" if split == "val" else "label_data_*.json"
    for folder in folders:
        found = sorted(folder.glob(pattern))
        if found:
            return found
    where = " or ".join(str(f) for f in folders)
    hint = ("put TuSimple's test_label.json (published apart from the test images) beside test_tasks_0627.json"
            if split == "test" else "give tusimple:PATH with the folder holding train_set's label_data_*.json")
    raise DatasetError(f"no {pattern} in {where}", hint=hint)


def _tusimple_lanes(entry: dict, where: str) -> list[np.ndarray]:
    try:
        ys = [float(y) for y in entry["h_samples"]]
        lanes = []
        for xs in entry["lanes"]:
            if len(xs) != len(ys):
                raise DatasetError(f"{where}: a lane has {len(xs)} x values for {len(ys)} h_samples",
                                   hint=TUSIMPLE_HINT)
            points = [(float(x), y) for x, y in zip(xs, ys) if float(x) >= 0]  # -2: no lane on that row
            if len(points) >= 2:
                lanes.append(np.array(points))
        return lanes
    except (KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{where} is not a TuSimple label ({type(exc).__name__}: {exc})",
                           hint=TUSIMPLE_HINT) from None


def _image_root(label_file: Path, root: Path, raw_file: str) -> Path:
    """Where ``raw_file`` paths of ``label_file`` start: its own folder, or the dataset's train/test folders."""
    for base in (label_file.parent, root, root / "train_set", root / "test_set"):
        if (base / raw_file).is_file():
            return base
    return label_file.parent  # the check of every image names the missing one


def _open_tusimple(root: Path, split: str) -> LaneDataset:
    images, labels = [], []
    for label_file in _tusimple_files(root, split):
        base = None
        for number, line in enumerate(label_file.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{label_file}:{number}"
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{where} is not JSON ({exc.msg})", hint=TUSIMPLE_HINT) from None
            if not isinstance(entry, dict) or not isinstance(entry.get("raw_file"), str):
                raise DatasetError(f"{where} has no raw_file", hint=TUSIMPLE_HINT)
            base = base or _image_root(label_file, root, entry["raw_file"])
            images.append(base / entry["raw_file"])
            labels.append(tuple(lane.tolist() for lane in _tusimple_lanes(entry, where)))
    check_files(images, "TuSimple image", "unpack the clips/ folder beside the label files that name it")
    return LaneDataset("tusimple", root, split, tuple(images), tuple(labels))


# --- CurveLanes -------------------------------------------------------------------------------------------------

CURVELANES_HINT = 'a CurveLanes label is {"Lines": [[{"x": "..", "y": ".."}, ...], ...]}, one list per lane'


def read_curvelanes_label(path: Path) -> list[np.ndarray]:
    """The lanes of a CurveLanes ``.lines.json``, each [M, 2] (x, y) in its image's pixels."""
    try:
        content = json.loads(Path(path).read_text(encoding="utf-8"))
        lanes = [np.array([(float(p["x"]), float(p["y"])) for p in line], dtype=np.float64).reshape(-1, 2)
                 for line in content["Lines"]]
    except OSError as exc:
        raise DatasetError(f"cannot read {path}: {exc}", hint=CURVELANES_HINT) from None
    except (KeyError, TypeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise DatasetError(f"{path} is not a CurveLanes label ({type(exc).__name__}: {exc})",
                           hint=CURVELANES_HINT) from None
    return [lane for lane in lanes if len(lane) >= 2]


def _open_curvelanes(root: Path, split: str) -> LaneDataset:
    folder = root / ("train" if split == "train" else "valid")
    listing = folder / f"{folder.name}.txt"
    if not listing.is_file():
        raise DatasetError(f"CurveLanes list {listing} is missing",
                           hint="give curvelanes:PATH with the folder holding train/ and valid/ as unpacked")
    images, labels = [], []
    for number, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), 1):
        name = line.strip()
        if not name:
            continue
        if len(name.split()) != 1 or Path(name).suffix.lower() not in (".jpg", ".jpeg", ".png"):
            raise DatasetError(f"{listing}:{number} is not one image path ({name[:60]!r})",
                               hint="each line names an image as images/NAME.jpg")
        image = folder / name.lstrip("/")
        images.append(image)
        labels.append(folder / "labels" / f"{image.stem}.lines.json")
    check_files(images, "CurveLanes image", f"unpack the images {listing} lists into {folder / 'images'}")
    check_files(labels, "CurveLanes label", f"unpack the labels into {folder / 'labels'}")
    return LaneDataset("curvelanes", root, split, tuple(images), tuple(labels), reader=read_curvelanes_label)


def problem_of(error: DatasetError) -> str:
    """``error`` as a string that crosses from a data-loader worker (see :func:`raise_problem`)."""
    return f"{error.message}\n{error.hint or ''}"


def raise_problem(problems) -> None:
    """Re-raise the first problem a data-loader worker met as the error it was: an exception raised in a worker
    reaches the main process as a traceback inside a message, which is no one-line error."""
    for problem in problems:
        if problem:
            message, _, hint = problem.partition("\n")
            raise DatasetError(message, hint=hint or None)


def relative(path: str) -> str:
    """A list file's image path as a key: CULane writes them with and without a leading slash."""
    return os.path.normpath(path.strip().lstrip("/"))
