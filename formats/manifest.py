"""The sidecar manifest written beside every TensorRT plan (``model.plan`` → ``model.plan.manifest.json``).

A plan only loads on the TensorRT version and GPU it was built for, and Triton rejects plan files with anything
prepended, so what orinkit knows about a plan lives here: its I/O and optimisation profiles (read by
``orinkit.repo`` to write the config) and the facts of its build (read by the stale-engine guard).
Standard library only: it is read on the device.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orinkit.core.files import atomic_write_text
from orinkit.formats.errors import ManifestError
from orinkit.formats.tensors import TensorSpec

FORMAT_VERSION = 1
SUFFIX = ".manifest.json"


@dataclass(frozen=True)
class ProfileShape:
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]


@dataclass(frozen=True)
class NmsRecord:
    """NMS built into the engine (``edge-convert --nms``): the plan answers boxes, so the Python NMS step is skipped.

    Its outputs are EfficientNMS-style, whichever way NMS was made: ``num_dets`` [B, 1] int32, ``det_boxes``
    [B, K, 4] x1 y1 x2 y2 in model-input pixels, ``det_scores`` [B, K], ``det_classes`` [B, K] int32."""

    method: str  # "EfficientNMS_TRT" (the plugin) or "INMSLayer"
    head: str  # the raw head the engine decodes: yolov8, yolov5 or yolox
    score_threshold: float
    iou_threshold: float
    max_output_boxes: int
    class_agnostic: bool = False
    num_classes: int = 0
    outputs: tuple[str, ...] = ("num_dets", "det_boxes", "det_scores", "det_classes")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NmsRecord:
        if not isinstance(data, dict):
            raise TypeError(f"nms is {type(data).__name__}, not an object")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "outputs": tuple(known.get("outputs", cls.outputs))})


@dataclass(frozen=True)
class EngineManifest:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    # One dict per optimisation profile: input name → its min/opt/max shapes.
    profiles: tuple[dict[str, ProfileShape], ...] = ()
    precision: str = "fp32"
    # Build facts (TensorRT version, GPU, L4T, ONNX sha256, kept-FP32 nodes, ...), filled by edge-convert.
    build: dict[str, Any] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    # NMS built into the engine by edge-convert --nms (an NmsRecord: method, head, thresholds, outputs): the plan
    # answers boxes and the Python NMS step is skipped. None (or absent, as before --nms) when there is none.
    nms: NmsRecord | None = None

    @property
    def answers_boxes(self) -> bool:
        """True when NMS is inside the engine: serve its outputs as detections, with no Python NMS after it."""
        return self.nms is not None

    def to_json(self) -> str:
        data = asdict(self)
        for key in ("inputs", "outputs"):  # the file's tensors carry their full engine shape as "shape"
            data[key] = [{"name": t["name"], "dtype": t["dtype"], "shape": t["dims"]} for t in data[key]]
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineManifest:
        def tensors(key: str) -> tuple[TensorSpec, ...]:
            return tuple(TensorSpec(t["name"], t["dtype"], tuple(t["shape"])) for t in data.get(key, ()))

        profiles = tuple(
            {name: ProfileShape(tuple(s["min"]), tuple(s["opt"]), tuple(s["max"])) for name, s in p.items()}
            for p in data.get("profiles", ())
        )
        return cls(
            inputs=tensors("inputs"),
            outputs=tensors("outputs"),
            profiles=profiles,
            precision=data.get("precision", "fp32"),
            build=dict(data.get("build", {})),
            format_version=int(data.get("format_version", FORMAT_VERSION)),
            nms=NmsRecord.from_dict(data["nms"]) if data.get("nms") else None,
        )

    def max_batch(self) -> int:
        """The largest batch every profile admits for every input whose first axis is dynamic; 0 when none is."""
        batched = [t.name for t in self.inputs if t.dims[:1] == (-1,)]
        if not batched or not self.profiles:
            return 0
        return min(max(p[name].max[0] for p in self.profiles if name in p) for name in batched)


def manifest_path(plan: str | os.PathLike[str]) -> Path:
    plan = Path(plan)
    return plan.with_name(plan.name + SUFFIX)


def read_manifest(plan: str | os.PathLike[str]) -> EngineManifest:
    if not Path(plan).is_file():
        raise ManifestError(f"{plan} does not exist", hint="check the path to the plan (model.plan)")
    path = manifest_path(plan)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(
            f"{plan} has no manifest ({path.name})",
            hint="build plans with edge-convert, which writes it, or describe the plan on the device",
        ) from None
    except (OSError, ValueError) as exc:
        raise ManifestError(f"{path} cannot be read: {exc}", hint="rebuild the plan with edge-convert") from exc
    if not isinstance(data, dict) or int(data.get("format_version", 0)) > FORMAT_VERSION:
        raise ManifestError(f"{path} is not a manifest this orinkit reads", hint="upgrade orinkit")
    try:
        return EngineManifest.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError(f"{path} is malformed: {exc}", hint="rebuild the plan with edge-convert") from exc


def write_manifest(plan: str | os.PathLike[str], manifest: EngineManifest) -> Path:
    return atomic_write_text(manifest_path(plan), manifest.to_json())
