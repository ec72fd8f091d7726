"""The judge: a second road renderer, used only to score lane models, never to train or tune them.

It was written from a plain description of what dash cameras see, by someone who had not read
:mod:`orinkit.lanes.synth`, so that its roads are not the training renderer's: a model that learned roads rather
than one renderer should score about as well here as on its held-out set. Nothing in training or augmentation
may draw from it or be chosen by looking at its images; read its F1 only.

A road (:func:`render_judge_road`) is a pure function of ``(seed, width, height)``: a highway of 2-4 lanes, an
urban street or a rural two-lane road (modules ``judge_scene``, ``judge_view``, ``judge_ground``,
``judge_objects``), with its true lanes CULane-style: the centre line of every lane-line marking on the image,
through dash gaps and under cars, from where it enters the image to a few pixels below the road's far end, a point
every 10 rows, bottom first, left to right. Its seeds start at :data:`JUDGE_SEED` (910,000), far from any seed the
training renderer is given, and every generator also mixes in its own tag.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from orinkit.lanes.errors import LaneInputError
from orinkit.lanes.judge_scene import JUDGE_TAG, Scene, sample_scene
from orinkit.lanes.judge_view import View, curvature

__all__ = ["JUDGE_SEED", "JUDGE_SIZES", "JudgeRoad", "JudgeTruth", "judge_f1", "judge_frames", "judge_set",
           "judge_video", "render_judge_road", "truth_path"]

JUDGE_SIZES = ((1280, 720), (1640, 590), (640, 480))  # (width, height): HD dash cam, CULane, VGA
JUDGE_SEED = 910_000
_MAX_SIDE = 4096


@dataclass(frozen=True, eq=False)
class JudgeRoad:
    image: np.ndarray              # [H, W, 3] uint8, BGR
    lanes: list[np.ndarray]        # each [M, 2] (x, y) in the image's pixels, bottom first; left to right
    size: tuple[int, int]          # (width, height)
    seed: int
    kind: str = ""                 # "highway", "urban" or "rural"
    scene: dict = field(default_factory=dict)


class JudgeTruth(list):
    """The true lanes of every frame of a judge video (``truth[i]``: frame ``i``'s lanes), with the frames'
    ``size`` (width, height) and ``fps``: what :func:`orinkit.lanes.video.lane_f1` scores against."""

    def __init__(self, lanes: Sequence, size: tuple[int, int], fps: float) -> None:
        super().__init__(lanes)
        self.size, self.fps = size, fps


def _whole(value, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise LaneInputError(f"{name}={value!r} is not a whole number in {low}..{high}",
                             hint=f"give {name} as an int, e.g. {max(low, 1)}")
    return int(value)


def _size(width, height) -> tuple[int, int]:
    return _whole(width, "width", 64, _MAX_SIDE), _whole(height, "height", 64, _MAX_SIDE)


def _style(paint) -> dict:
    yellow = paint.colour[2] < 0.5 * paint.colour[0]
    return {"style": "double" if paint.double else "dashed" if paint.dash else "solid",
            "colour": "yellow" if yellow else "white", "width_m": round(paint.width, 3)}


def _summary(scene: Scene, painted: list) -> dict:
    """What the road holds, for reports: ``lanes`` describes each true lane (style, colour, paint width)."""
    return {"kind": scene.kind, "lanes": [_style(paint) for paint in painted], "light": scene.light,
            "cars": len(scene.cars),
            "camera_height_m": round(scene.cam_height, 2), "hfov_deg": round(scene.hfov, 1),
            "horizon": round(scene.horizon, 3), "roll_deg": round(math.degrees(scene.roll), 2)}


def _draw(scene: Scene, width: int, height: int, *, travel: float, car_r: float, yaw: float, time_s: float,
          frame: int, jpeg: bool) -> tuple[np.ndarray, list[np.ndarray], list]:
    from PIL import Image

    from orinkit.lanes.judge_ground import ground_colour, sky_colour
    from orinkit.lanes.judge_objects import draw_objects, finish

    view = View(scene, width, height, travel=travel, car_r=car_r, yaw=yaw)
    u, v = view.grid()
    ground = v > view.v_end
    rgb = np.empty((height, width, 3))
    rgb[~ground] = sky_colour(view, u[~ground], v[~ground])
    rgb[ground] = ground_colour(view, view.ground(u[ground], v[ground]))
    picture = Image.fromarray(np.clip(rgb * 255 + 0.5, 0, 255).astype(np.uint8))
    draw_objects(view, picture, time_s)
    rgb = np.asarray(picture, dtype=np.float32) / 255
    image = finish(scene, rgb, np.random.default_rng([JUDGE_TAG, scene.seed, 11, frame]), jpeg=jpeg)
    seen = [(paint, view.lane(paint.r, scene.margin)) for paint in scene.paints]
    seen = [(paint, lane) for paint, lane in seen if lane is not None]
    return image, [lane for _, lane in seen], [paint for paint, _ in seen]


def render_judge_road(seed: int, width: int = 1280, height: int = 720) -> JudgeRoad:
    """The judge's road of ``seed`` at ``width`` x ``height``: its BGR image and true lanes."""
    seed = _whole(seed, "seed", 0, 2**63 - 1)
    width, height = _size(width, height)
    scene = sample_scene(seed)
    image, lanes, painted = _draw(scene, width, height, travel=scene.travel, car_r=scene.car_r, yaw=scene.yaw,
                                  time_s=0.0, frame=0, jpeg=True)
    return JudgeRoad(image, lanes, (width, height), seed, scene.kind, _summary(scene, painted))


def _sizes(sizes) -> list[tuple[int, int]]:
    try:
        checked = [_size(*pair) for pair in sizes]
    except TypeError:
        raise LaneInputError(f"sizes={sizes!r} is not a list of (width, height)",
                             hint="e.g. ((1280, 720), (640, 480))") from None
    if not checked:
        raise LaneInputError("sizes is empty", hint="give at least one (width, height), e.g. ((1280, 720),)")
    return checked


def judge_set(count: int, *, sizes=JUDGE_SIZES, seed: int = JUDGE_SEED) -> Iterator[JudgeRoad]:
    """``count`` judge roads of seeds ``seed``, ``seed + 1``, ..., cycling through ``sizes``."""
    count = _whole(count, "count", 0, 10**7)
    seed = _whole(seed, "seed", 0, 2**63 - 1 - count)
    checked = _sizes(sizes)
    return (render_judge_road(seed + i, *checked[i % len(checked)]) for i in range(count))


def _points(lane) -> np.ndarray:
    return np.asarray(getattr(lane, "points", lane), dtype=np.float64).reshape(-1, 2)


def judge_f1(detect: Callable, count: int = 300, *, sizes=JUDGE_SIZES, seed: int = JUDGE_SEED) -> dict:
    """CULane F1 of ``detect`` (BGR image -> lanes: [M, 2] pixel points, or objects with ``.points`` such as
    LaneDetector's) on ``count`` judge roads: ``{"overall": LaneScore, "by_size": {"1280x720": LaneScore, ...},
    "by_kind": {"highway": LaneScore, ...}}``."""
    from orinkit.lanes.metrics import LaneScore, score_image

    overall = LaneScore(0, 0, 0)
    by_size: dict[str, LaneScore] = {f"{w}x{h}": LaneScore(0, 0, 0) for w, h in _sizes(sizes)}
    by_kind: dict[str, LaneScore] = {}
    for road in judge_set(count, sizes=sizes, seed=seed):
        width, height = road.size
        found = [_points(lane) for lane in detect(road.image)]
        score = score_image(found, road.lanes, (height, width))
        overall = overall + score
        by_size[f"{width}x{height}"] = by_size[f"{width}x{height}"] + score
        by_kind[road.kind] = by_kind.get(road.kind, LaneScore(0, 0, 0)) + score
    return {"overall": overall, "by_size": by_size, "by_kind": by_kind}


def judge_frames(seed: int = JUDGE_SEED, frames: int = 150, fps: float = 15, width: int = 1280, height: int = 720
                 ) -> Iterator[tuple[np.ndarray, list[np.ndarray], float]]:
    """(BGR image, true lanes, the road's curvature at the car in 1/m) of each frame of a drive along the judge
    road of ``seed``: the car moves forward at the scene's speed and weaves gently in its lane (heading along its
    weave), the road's curvature and slope change as the car covers it, the cars ahead drift closer and farther.
    Each frame is a pure function of the arguments and its index. Arguments are checked before the first frame."""
    seed = _whole(seed, "seed", 0, 2**63 - 1)
    frames = _whole(frames, "frames", 1, 10**6)
    width, height = _size(width, height)
    if isinstance(fps, bool) or not isinstance(fps, (int, float, Fraction)) or not 1 <= fps <= 240:
        raise LaneInputError(f"fps={fps!r} is outside 1..240", hint="e.g. 15")
    return _frames(sample_scene(seed), frames, float(fps), width, height)


def _frames(scene: Scene, frames: int, fps: float, width: int, height: int):
    weave = np.random.default_rng([JUDGE_TAG, scene.seed, 12]).uniform(0, 2 * math.pi)
    omega = 2 * math.pi / 8.0
    for index in range(frames):
        t = index / fps
        car_r = scene.car_r + scene.sway * math.sin(omega * t + weave)
        yaw = scene.yaw * 0.3 + math.atan(scene.sway * omega * math.cos(omega * t + weave) / scene.speed)
        travel = scene.travel + scene.speed * t
        image, lanes, _ = _draw(scene, width, height, travel=travel, car_r=car_r, yaw=yaw, time_s=t, frame=index,
                                jpeg=False)
        yield image, lanes, float(curvature(scene.bends, np.array([travel]))[0])


def truth_path(video: str | os.PathLike[str]) -> Path:
    """Where a judge video's lanes lie: ``road.mp4`` -> ``road.lanes.jsonl`` (the road video's layout)."""
    video = Path(video)
    return video.with_name(video.stem + ".lanes.jsonl")


def judge_video(path: str | os.PathLike[str], *, frames: int = 150, fps: int = 15, width: int = 1280,
                height: int = 720, seed: int = JUDGE_SEED, crf: int = 20) -> JudgeTruth:
    """Write a drive along the judge road of ``seed`` as an H.264 MP4 (yuv420p) at ``path``, and beside it
    ``<name>.lanes.jsonl`` in :mod:`orinkit.lanes.road_video`'s layout (one line per frame: ``frame``,
    ``time_s``, ``fps``, ``width``, ``height``, ``curvature``, ``lanes``); both appear whole or not at all.
    Returns the frames' true lanes."""
    from orinkit.core.optional import require

    av = require("av")
    if isinstance(crf, bool) or not isinstance(crf, int) or not 0 <= crf <= 51:
        raise LaneInputError(f"crf={crf!r} is outside 0..51", hint="lower is better; 18..23 is typical")
    if isinstance(fps, bool) or not isinstance(fps, (int, float, Fraction)) or not 1 <= fps <= 240:
        raise LaneInputError(f"fps={fps!r} is outside 1..240", hint="e.g. 15")
    rate = Fraction(fps).limit_denominator(1001)
    drive = judge_frames(seed, frames, rate, width, height)
    if width % 2 or height % 2:
        raise LaneInputError(f"size {width}x{height} is odd; H.264 in yuv420p needs even sides",
                             hint="e.g. width=1280, height=720")
    target, sidecar = Path(path), truth_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    parts = (target.with_name(f".{target.name}.part"), sidecar.with_name(f".{sidecar.name}.part"))
    truth: list[list[np.ndarray]] = []
    try:
        with av.open(str(parts[0]), "w", format="mp4") as container, open(parts[1], "w", encoding="utf-8") as lines:
            stream = container.add_stream("libx264", rate=rate, options={"crf": str(crf), "preset": "veryfast"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for index, (image, lanes, bend) in enumerate(drive):
                picture = av.VideoFrame.from_ndarray(image, format="bgr24")
                picture.pts = index
                container.mux(stream.encode(picture))
                lanes = [np.round(lane, 2) for lane in lanes]
                lines.write(json.dumps({"frame": index, "time_s": round(index / float(rate), 6), "fps": float(rate),
                                        "width": width, "height": height, "curvature": round(bend, 7),
                                        "lanes": [lane.tolist() for lane in lanes]}, separators=(",", ":")) + "\n")
                truth.append(lanes)
            container.mux(stream.encode())
        os.replace(parts[1], sidecar)
        os.replace(parts[0], target)
    finally:
        for part in parts:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)
    return JudgeTruth(truth, (width, height), float(rate))
