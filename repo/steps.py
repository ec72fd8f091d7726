"""Reusable Python-backend steps for ensembles, copied into a repository with their configs.

* ``ImagePreprocess``: encoded image bytes → resized (stretched, or letterboxed for detectors), normalised CHW
  tensor, plus the original size (and, letterboxed, the transform that maps boxes back).
* ``TopK``: classification logits → top-k scores and class ids (and labels, given a labels file).

Their code is ``orinkit/repo/pymodels/<step>.py``, written as a self-contained ``model.py``
(orinkit.repo.python_model); options reach it through the config's ``parameters``. The stub's Python needs numpy,
and Pillow for images (``orinkit[server]`` has both; on the Orin install python3-pil or pack an environment with
``execution_env``), never orinkit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from orinkit.repo.add import PlacedModel
from orinkit.repo.errors import SignatureError
from orinkit.repo.options import ModelOptions
from orinkit.repo.python_model import PythonModelSpec, add_python_model
from orinkit.repo.signature import Signature, TensorSpec

INTERPOLATIONS = ("bilinear", "nearest", "bicubic")
RESIZES = ("stretch", "letterbox")


def _floats(values, count: int, what: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in values)
    if len(values) != count:
        raise SignatureError(f"{what} needs {count} values, got {len(values)}", hint=f"give {count}, one per channel")
    return values


@dataclass(frozen=True, kw_only=True)
class ImagePreprocess:
    """Decode (JPEG, PNG, ... via Pillow), resize, reorder channels, ``(x * scale - mean) / std``, HWC → CHW.

    ``resize="stretch"`` (the default) fills the model's size whatever the image's aspect; ``"letterbox"`` keeps
    the aspect and pads with ``pad`` (centred, or top-left with ``centre=False``) and adds the output TRANSFORM,
    FP32 [6]: scale_x, scale_y, pad_x, pad_y, source width, source height (``source = (model - pad) / scale``
    per axis; the scales are the rounded size's, new width / width and new height / height, as Ultralytics'
    scale_boxes divides)."""

    width: int = 224
    height: int = 224
    color_order: str = "RGB"  # channel order of the output; BGR is what cv2.imread gives; GRAY: one channel
    scale: float = 1 / 255
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    dtype: str = "FP32"
    interpolation: str = "bilinear"
    max_image_bytes: int = 16 << 20  # refused before decoding: see repo/pymodels/image_preprocess.py
    max_pixels: int = 25_000_000
    resize: str = "stretch"
    centre: bool = True
    pad: int = 114
    min_side: int = 1  # images with a shorter side are refused

    source = "image_preprocess"
    input_name = "IMAGE"
    output_name = "TENSOR"
    size_name = "ORIGINAL_SIZE"
    transform_name = "TRANSFORM"

    def __post_init__(self) -> None:
        if self.color_order not in ("RGB", "BGR", "GRAY"):
            raise SignatureError(f"color order '{self.color_order}' is unknown", hint="use RGB, BGR or GRAY")
        channels = self.channels
        if self.color_order == "GRAY" and len(tuple(self.mean)) == 3 and len(set(self.mean)) == 1:
            object.__setattr__(self, "mean", tuple(self.mean)[:1])  # the RGB default (0,0,0) means 0 here
        if self.color_order == "GRAY" and len(tuple(self.std)) == 3 and len(set(self.std)) == 1:
            object.__setattr__(self, "std", tuple(self.std)[:1])
        object.__setattr__(self, "mean", _floats(self.mean, channels, "mean"))
        object.__setattr__(self, "std", _floats(self.std, channels, "std"))
        if self.width < 1 or self.height < 1:
            raise SignatureError(f"size {self.width}x{self.height} is empty", hint="give a positive width and height")
        if 0.0 in self.std:
            raise SignatureError("std holds a zero", hint="divide by a non-zero std per channel")
        if self.dtype not in ("FP32", "FP16"):
            raise SignatureError(f"dtype '{self.dtype}' is not FP32 or FP16", hint="use FP32 or FP16")
        if self.interpolation not in INTERPOLATIONS:
            raise SignatureError(
                f"interpolation '{self.interpolation}' is unknown", hint=f"use one of {', '.join(INTERPOLATIONS)}"
            )
        if self.max_image_bytes < 1 or self.max_pixels < 1:
            raise SignatureError("max_image_bytes and max_pixels must be positive", hint="e.g. 16 MiB, 25e6")
        if self.resize not in RESIZES:
            raise SignatureError(f"resize '{self.resize}' is unknown", hint=f"use one of {', '.join(RESIZES)}")
        if isinstance(self.pad, bool) or not isinstance(self.pad, int) or not 0 <= self.pad <= 255:
            raise SignatureError(f"pad {self.pad!r} is not a pixel value", hint="use 0..255 (Ultralytics: 114)")
        if self.min_side < 1:
            raise SignatureError(f"min_side {self.min_side} is below 1", hint="use 1 to accept any size")

    @property
    def channels(self) -> int:
        return 1 if self.color_order == "GRAY" else 3

    def signature(self, max_batch_size: int) -> Signature:
        # Without batching (max_batch_size 0) the dims are full shapes: one image, its batch axis of 1 written out,
        # which is what a model exported with a fixed batch of 1 takes.
        one = () if max_batch_size > 0 else (1,)
        outputs = [TensorSpec(self.output_name, self.dtype, (*one, self.channels, self.height, self.width)),
                   TensorSpec(self.size_name, "INT32", (*one, 2))]
        if self.resize == "letterbox":
            outputs.append(TensorSpec(self.transform_name, "FP32", (*one, 6)))
        return Signature((TensorSpec(self.input_name, "BYTES", (*one, 1)),), tuple(outputs), max_batch_size)

    def parameters(self) -> dict[str, str]:
        return {
            "width": str(self.width),
            "height": str(self.height),
            "color_order": self.color_order,
            "scale": repr(self.scale),
            "mean": ",".join(map(repr, self.mean)),
            "std": ",".join(map(repr, self.std)),
            "dtype": self.dtype,
            "interpolation": self.interpolation,
            "max_image_bytes": str(self.max_image_bytes),
            "max_pixels": str(self.max_pixels),
            "resize": self.resize,
            "centre": "true" if self.centre else "false",
            "pad": str(self.pad),
            "min_side": str(self.min_side),
        }

    def files(self) -> dict[str, Path]:
        return {}


def label_lines(path: Path) -> list[str]:
    """A labels file's labels: one per line, trailing empty lines not counted (as topk's model reads it)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


@dataclass(frozen=True, kw_only=True)
class TopK:
    """Softmax (optional) and the k best classes, best first; ties go to the lower class id."""

    k: int = 5
    num_classes: int = -1  # -1: any
    softmax: bool = True
    labels: Path | None = None  # one label per line, copied as labels.txt; adds the LABELS output
    logits_dtype: str = "FP32"

    source = "topk"
    input_name = "LOGITS"

    def __post_init__(self) -> None:
        if self.k < 1:
            raise SignatureError(f"k {self.k} is below 1", hint="use k >= 1")
        if self.num_classes != -1 and not 1 <= self.k <= self.num_classes:
            raise SignatureError(f"k {self.k} exceeds {self.num_classes} classes", hint="lower k")
        if self.labels is not None and not Path(self.labels).is_file():
            raise SignatureError(f"labels file {self.labels} does not exist", hint="check the path")
        if self.labels is not None and self.num_classes != -1:
            count = len(label_lines(Path(self.labels)))
            if count != self.num_classes:
                raise SignatureError(f"{self.labels} has {count} labels for {self.num_classes} classes",
                                     hint="give one label per class, in class-id order")
        if self.logits_dtype not in ("FP32", "FP16"):
            raise SignatureError(f"logits dtype '{self.logits_dtype}' is not FP32 or FP16", hint="use FP32 or FP16")

    def signature(self, max_batch_size: int) -> Signature:
        outputs = [TensorSpec("SCORES", "FP32", (self.k,)), TensorSpec("CLASS_IDS", "INT32", (self.k,))]
        if self.labels is not None:
            outputs.append(TensorSpec("LABELS", "BYTES", (self.k,)))
        return Signature((TensorSpec(self.input_name, self.logits_dtype, (self.num_classes,)),), tuple(outputs),
                         max_batch_size)

    def parameters(self) -> dict[str, str]:
        return {"k": str(self.k), "softmax": "true" if self.softmax else "false"}

    def files(self) -> dict[str, Path]:
        return {"labels.txt": Path(self.labels)} if self.labels is not None else {}


Step = ImagePreprocess | TopK
STEPS = {"image-preprocess": ImagePreprocess, "topk": TopK}


def step_spec(step: Step, max_batch_size: int = 8) -> PythonModelSpec:
    """The Python-backend model ``step`` is: its source, tensors, parameters and files."""
    return PythonModelSpec(f"orinkit.repo.pymodels.{step.source}", step.signature(max_batch_size),
                           step.parameters(), step.files())


def add_step(
    repository: str | os.PathLike[str],
    step: Step,
    *,
    name: str,
    max_batch_size: int = 8,
    options: ModelOptions | None = None,
) -> PlacedModel:
    """Write ``step`` as the model ``<repository>/<name>``: a self-contained ``1/model.py`` and a config carrying
    its options."""
    options = replace(options or ModelOptions(), max_batch_size=max_batch_size)
    return add_python_model(repository, step_spec(step, max_batch_size), name=name, options=options,
                            hint="choose another --name")
