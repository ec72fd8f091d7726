"""What the lane model trains on and what it is judged on: the renderer's styles, the data versions and the
augmentation.

A model trained on one renderer learns that renderer's look. The defences here:

- Data versions (:data:`DATA_VERSIONS`, :func:`training_road`): ``synth-v1`` draws roads in
  :data:`TRAINING_STYLE`, the first renderer's ranges (the first shipped models' data); ``wide-v1`` draws them in
  :data:`~orinkit.lanes.synth.WIDE_STYLE` (domain randomisation: cameras of every aspect, height, pitch, roll and
  field of view, 2-6 lanes with merges, S-bends, double lines and raised dots, flat colours and photographs, grass,
  sand, snow, concrete and city streets, clutter that looks like lanes, lens distortion and vignetting). New runs
  draw ``wide-v1``; a run records its version, so a resumed run keeps its own. ``mix-v1`` alternates the two by
  seed (even: ``synth-v1``, odd: ``wide-v1``): a model continued from ``wide-v1`` on it keeps the breadth and
  regains the first renderer's precision.
- :func:`augment` then changes what the renderer never changes: colour casts and channel order, grey images,
  zoomed crops (another horizon and camera height), occluding blocks, extra blur and noise. Lanes move with the
  crop.
- :data:`STRESS_STYLE` holds out whole style settings of the first renderer, not only seeds: camera heights,
  fields of view, curvature, lane and marking widths, dash patterns and light levels outside every ``synth-v1``
  range (``wide-v1`` covers them: for its models the second renderer, not this, is the judge of transfer).

numpy and Pillow only, so the data-loader workers stay light.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageFilter

from orinkit.lanes.errors import LaneError
from orinkit.lanes.synth import FIRST_STYLE, WIDE_STYLE, RoadSample, SynthOptions, render_road

TRAINING_STYLE = FIRST_STYLE
DATA_VERSIONS = ("synth-v1", "wide-v1", "mix-v1")
DEFAULT_DATA = "wide-v1"
# CULane annotates at most four lanes: the ego lane's two lines and the next one on either side.
MAX_LANES = 4
STRESS_STYLE = SynthOptions(
    camera_height_m=(1.9, 2.6),       # training: 1.2-1.8
    fov_deg=(72.0, 85.0),             # 50-70
    curvature=(0.0065, 0.010),        # 0.001-0.006
    lane_width_m=(2.6, 2.95),         # 3.0-3.9
    marking_width_m=(0.21, 0.30),     # 0.10-0.20
    dash_m=(1.2, 2.4),                # 2.5-3.5
    gap_m=(3.0, 5.4),                 # 5.5-9.0
    brightness=(0.45, 0.64),          # 0.65-1.3
    yellow=0.6,                       # 0.2
)


def training_road(data: str, seed: int, width: int = 640, height: int = 360) -> tuple[np.ndarray, list[np.ndarray]]:
    """The BGR image and lanes of training road ``seed`` in data version ``data`` (:data:`DATA_VERSIONS`)."""
    if data == "synth-v1":
        road = render_road(seed, width, height, options=TRAINING_STYLE)
        return road.image[:, :, ::-1], road.lanes
    if data == "wide-v1":
        road = render_road(seed, width, height, options=WIDE_STYLE)
        return road.image[:, :, ::-1], nearest_lanes(road, MAX_LANES)
    if data == "mix-v1":  # still a pure function of the seed: its parity picks the version
        return training_road("synth-v1" if seed % 2 == 0 else "wide-v1", seed, width, height)
    raise LaneError(f"unknown training data version {data!r}", hint=f"use one of {', '.join(DATA_VERSIONS)}")


def nearest_lanes(road: RoadSample, count: int = MAX_LANES) -> list[np.ndarray]:
    """The lanes of the ``count`` markings nearest the camera (sideways, where the car is), left to right: a road of
    five or six lines is annotated as CULane would, its far lines left out."""
    seen = [m for m in road.scene["markings"] if m["lane_index"] is not None]
    kept = sorted(sorted(seen, key=lambda m: abs(m["x_m"]))[:count], key=lambda m: m["lane_index"])
    return [road.lanes[m["lane_index"]] for m in kept]


def _crop_zoom(image: np.ndarray, lanes: list[np.ndarray], rng: np.random.Generator, most: float = 1.25):
    """Crop a window of 1/z of the image (z in 1..``most``) and scale it back up: the horizon, camera height and
    lane spacing the model sees change. No border is ever exposed, so every drawn lane stays true."""
    height, width = image.shape[:2]
    zoom = float(rng.uniform(1.0, most))
    crop_w, crop_h = width / zoom, height / zoom
    left = float(rng.uniform(0, width - crop_w))
    top = float(rng.uniform(0, height - crop_h))
    picture = Image.fromarray(image).transform(
        (width, height), Image.Transform.EXTENT, (left, top, left + crop_w, top + crop_h), Image.Resampling.BILINEAR)
    moved = [np.stack([(lane[:, 0] - left) * zoom, (lane[:, 1] - top) * zoom], axis=1) for lane in lanes]
    return np.asarray(picture), moved


def _keep_inside(lanes: list[np.ndarray], height: int) -> list[np.ndarray]:
    """Points below the image bottom are gone after a crop; a lane needs two points left to be a lane."""
    kept = []
    for lane in lanes:
        lane = lane[(lane[:, 1] >= 0) & (lane[:, 1] <= height)]
        if len(lane) >= 2:
            kept.append(lane)
    return kept


def augment_strength(index: int, strength: float = 1.0, ramp: int = 0) -> float:
    """The augmentation strength of training image ``index``: ``strength`` throughout, or (``ramp`` > 0) rising
    linearly from 0 at the first image to ``strength`` at image ``ramp``: a schedule by image, not by clock, so the
    data stays a pure function of (seed, index) and a resumed run draws what it would have drawn."""
    if ramp <= 0:
        return strength
    return strength * min(1.0, index / ramp)


def augment(image: np.ndarray, lanes: list[np.ndarray], rng: np.random.Generator, strength: float = 1.0):
    """``image`` [H, W, 3] uint8 and its lanes ([M, 2] pixel points) → changed copies, drawn from ``rng``.

    ``strength`` scales how often each change happens (1: the rates below; 0: none; 2: twice as often, at most
    always). At 1 it draws exactly what it drew before strengths existed, so older runs resume unchanged."""
    lanes = [np.asarray(lane, dtype=np.float64) for lane in lanes]
    height = image.shape[0]

    def happens(rate: float) -> bool:
        return rng.random() < rate * strength

    if happens(0.5):
        image, lanes = _crop_zoom(image, lanes, rng)
        lanes = _keep_inside(lanes, height)
    out = image.astype(np.float32)
    if happens(0.25):
        out = out[:, :, rng.permutation(3)]
    if happens(0.6):
        out *= rng.uniform(0.75, 1.25, size=3).astype(np.float32)
    if happens(0.1):
        out[:] = out.mean(axis=2, keepdims=True)
    if happens(0.3):
        # Light from one side: a ramp of gain across the image.
        ramp = np.linspace(rng.uniform(0.6, 1.0), rng.uniform(1.0, 1.4), out.shape[1], dtype=np.float32)
        out *= ramp[None, :, None] if rng.random() < 0.5 else ramp[None, ::-1, None]
    if happens(0.25):
        for _ in range(int(rng.integers(1, 4))):
            h, w = int(rng.integers(10, height // 3)), int(rng.integers(10, out.shape[1] // 5))
            y, x = int(rng.integers(height // 3, height - h)), int(rng.integers(0, out.shape[1] - w))
            out[y:y + h, x:x + w] = rng.uniform(0, 255, size=3).astype(np.float32)
    if happens(0.2):
        out += rng.normal(0, rng.uniform(2, 10), size=out.shape).astype(np.float32)
    out = np.clip(out, 0, 255).astype(np.uint8)
    if happens(0.15):
        out = np.asarray(Image.fromarray(out).filter(ImageFilter.GaussianBlur(float(rng.uniform(0.8, 2.0)))))
    return out, lanes
