"""The options of a lane training run (:mod:`orinkit.lanes.train`), checked when they are made.

A run is its options plus a step count: everything here but :data:`RESUMABLE_CHANGES` decides what the run
computes, so ``--resume`` refuses to change it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orinkit.lanes.errors import LaneError

IMG_W, IMG_H = 640, 360
HELD_OUT_SEED = 1_000_000_007  # held-out roads never overlap training roads (those are seed * 10**8 + index)
STRESS_SEED = 2_000_000_011
SYNTH_LANES = 4  # training targets per drawn road; a dataset with more lanes per image raises it for its run
# Options a resumed run may change: where and how fast it runs, never what it computes.
RESUMABLE_CHANGES = ("device", "workers", "log_seconds", "checkpoint_minutes", "eval_minutes", "pause_minutes",
                     "pause_at_step", "out", "command", "judge_images", "calibration_images")


@dataclass(frozen=True)
class TrainOptions:
    arch: str = "lite"
    device: str = "cpu"
    steps: int = 20000
    minutes: float | None = None  # training-time budget (resumes included); the schedule ends with it
    batch: int = 8
    workers: int = 1
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 300
    seed: int = 0
    augment: bool = True
    # How often each augmentation happens (orinkit.lanes.augment.augment: 1 the usual rates, 0 none), reached at
    # image augment_ramp when that is above 0 (a schedule by image: rising from 0).
    augment_strength: float = 1.0
    augment_ramp: int = 0
    data: str = "wide-v1"  # the drawn roads' version (orinkit.lanes.augment.DATA_VERSIONS); a resumed run keeps its own
    cls_weight: float = 10.0
    bf16: bool = True
    log_seconds: float = 30.0
    checkpoint_minutes: float = 5.0
    eval_minutes: float = 10.0  # held-out F1 on eval_quick roads this often (0: never during training)
    eval_quick: int = 100
    eval_images: int = 500
    # Roads of the judge renderer (orinkit.lanes.judge_roads) scored at the end: read, never trained or tuned on.
    judge_images: int = 150
    # Roads of the run's own data (a seed of their own) that choose the card's confidence threshold at the end
    # (orinkit.lanes.calibrate); 0 (or eval_images 0): the card keeps 0.5. Runs on a dataset or your frames are not
    # calibrated.
    calibration_images: int = 200
    pause_minutes: float | None = None  # stop with a checkpoint after this much wall time in this process
    pause_at_step: int | None = None  # the same at a step (tests)
    init: Path | None = None
    frames: Path | None = None  # your own labelled frames (CULane format) to fine-tune on
    dataset: str | None = None  # a lane dataset to train on, KIND:PATH (orinkit.lanes.datasets)
    # The share of training images taken from ``frames`` or ``dataset``, the rest drawn roads; None: 0.5 of
    # your frames, all of a dataset.
    frames_share: float | None = None
    out: Path = Path("laneatt-train")
    name: str | None = None  # the card's name; default laneatt_<arch>_synth (laneatt_<arch>_<kind> on a dataset)
    command: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        from orinkit.lanes.architectures import ARCHITECTURES

        if self.arch not in ARCHITECTURES:
            raise LaneError(f"--arch {self.arch} is not a lane architecture", hint=f"use one of "
                            f"{', '.join(ARCHITECTURES)}")
        if self.device not in ("cuda", "cpu"):
            raise LaneError(f"--device must be cuda or cpu, got {self.device}", hint="use --device cuda on a GPU")
        for name in ("steps", "batch"):
            if getattr(self, name) < 1:
                raise LaneError(f"--{name} must be 1 or more", hint="e.g. --batch 8")
        if min(self.workers, self.eval_images, self.eval_quick, self.judge_images, self.calibration_images) < 0:
            raise LaneError("--workers, --eval-images, --judge-images and --calibration-images must be 0 or more",
                            hint="e.g. --workers 1")
        if not 0.0 <= self.augment_strength <= 4.0 or self.augment_ramp < 0:
            raise LaneError(f"--augment-strength {self.augment_strength:g} (0 to 4) or --augment-ramp "
                            f"{self.augment_ramp} (0 or more images) is out of range", hint="e.g. --augment-strength 1")
        if not self.augment and (self.augment_strength != 1.0 or self.augment_ramp):
            raise LaneError("--no-augment with --augment-strength or --augment-ramp: there is nothing to scale",
                            hint="drop --no-augment, or use --augment-strength 0")
        from orinkit.lanes.augment import DATA_VERSIONS

        if self.data not in DATA_VERSIONS:
            raise LaneError(f"--data {self.data} is not a version of the drawn roads",
                            hint=f"use one of {', '.join(DATA_VERSIONS)}")
        if self.frames_share is not None and not 0.0 <= self.frames_share <= 1.0:
            raise LaneError(f"--frames-share {self.frames_share} is not in [0, 1]", hint="e.g. 0.5")
        if self.frames is not None and self.dataset is not None:
            raise LaneError("--frames and --dataset both name training images",
                            hint="give one: --dataset frames:DIR is the same as --frames DIR")
        if self.dataset is not None:
            from orinkit.lanes.datasets import parse_spec

            parse_spec(self.dataset)  # an unknown kind is refused before anything starts
        if not 0 < self.checkpoint_minutes <= 5:
            raise LaneError(f"--checkpoint-minutes {self.checkpoint_minutes} is not in (0, 5]",
                            hint="a killed run loses at most this much: keep it at 5 or less")
        for name in ("minutes", "pause_minutes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise LaneError(f"--{name.replace('_', '-')} must be above 0", hint="e.g. 30")

    @property
    def card_name(self) -> str:
        if self.name:
            return self.name
        source = "synth" if self.dataset is None else self.dataset.partition(":")[0].strip().lower()
        return f"laneatt_{self.arch.replace('-', '_')}_{source}"

    @property
    def share(self) -> float:
        """The share of training images from ``frames`` or ``dataset`` (0 without either)."""
        if self.frames is None and self.dataset is None:
            return 0.0
        if self.frames_share is not None:
            return self.frames_share
        return 0.5 if self.frames is not None else 1.0
