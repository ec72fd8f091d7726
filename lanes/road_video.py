"""A road video from the synthetic renderer: a camera driving along a road whose curvature changes smoothly, with
the exact lanes of every frame.

Every frame is :func:`orinkit.lanes.synth.render_road` of one seed (so the road, its markings, colours, scenery
and camera stay the same) with four things moved by the drive: the road's curvature, the car's sway in its lane
(and the heading that sway implies), and how far the car has travelled, which slides the dashes and the wear of
the markings towards the camera. Consecutive frames are thus the same road moved a little. Effects that would be
glued to the camera while the road moves (shadows, repair patches, a road ending behind a rise) are off.

``write_road_video(path)`` writes an H.264 MP4 (PyAV) and beside it ``<name>.lanes.jsonl``: one line per frame,
``{"frame", "time_s", "fps", "width", "height", "curvature", "lanes": [[[x, y], ...], ...]}``, lanes in that frame's
pixels, bottom row first, left to right (what :mod:`orinkit.lanes.metrics` scores). ``road_truth(path)`` reads it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from orinkit.lanes import synth
from orinkit.lanes.errors import LaneError

__all__ = ["Drive", "RoadFrame", "RoadTruth", "VIDEO_STYLE", "road_frames", "road_truth", "truth_path",
           "write_road_video"]

# The training style minus what a moving camera would carry along with it.
VIDEO_STYLE = synth.SynthOptions(shadows=0.0, road_wear=0.0, short_road=0.0, jpeg=0.0)


@dataclass(frozen=True)
class Drive:
    """How the car moves. Curvature is ``curvature_max * (0.75 sin(2 pi t / curve_period_s + a) + 0.25 sin(2 pi t
    * 2.7 / curve_period_s + b))``: left and right bends that come and go within the training range (1/m)."""

    speed_mps: float = 20.0
    curvature_max: float = 0.005
    curve_period_s: float = 12.0
    sway_m: float = 0.25          # the car's lateral sway in its lane, at most
    sway_period_s: float = 7.0

    def __post_init__(self) -> None:
        for name, low, high in (("speed_mps", 0.0, 80.0), ("curvature_max", 0.0, 0.02), ("sway_m", 0.0, 1.0)):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and low <= value <= high):
                raise LaneError(f"Drive.{name}={value!r} is outside [{low}, {high}]",
                                hint=f"e.g. {getattr(Drive, name)}")
        for name in ("curve_period_s", "sway_period_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0):
                raise LaneError(f"Drive.{name}={value!r} must be a positive number of seconds", hint="e.g. 10.0")


@dataclass(frozen=True)
class _Pose:
    curvature: float
    sway: float       # metres right of the seed's own offset
    yaw: float        # radians
    travel: float     # metres driven


def _pose(drive: Drive, seed: int, t: float) -> _Pose:
    a, b, c = np.random.default_rng([seed, 0x0D417E]).uniform(0.0, 2.0 * math.pi, size=3)
    w1 = 2.0 * math.pi / drive.curve_period_s
    w2 = 2.0 * math.pi / drive.sway_period_s
    curvature = drive.curvature_max * (0.75 * math.sin(w1 * t + a) + 0.25 * math.sin(2.7 * w1 * t + b))
    sway = drive.sway_m * math.sin(w2 * t + c)
    # Drifting right at dx/dt, the car heads right of the road: the road runs to the left in the camera's view.
    drift = drive.sway_m * w2 * math.cos(w2 * t + c)
    yaw = -drift / drive.speed_mps if drive.speed_mps > 0 else 0.0
    return _Pose(curvature, sway, yaw, drive.speed_mps * t)


class _Moving(synth._Renderer):
    """render_road's renderer with the road's curvature, the car's sway and heading and its travel set."""

    def __init__(self, *args, pose: _Pose) -> None:
        super().__init__(*args)
        self.pose = pose

    def _geometry(self) -> None:
        super()._geometry()
        p = self.pose
        self.x_marks = [x - p.sway for x in self.x_marks]
        self.road_edges = (self.road_edges[0] - p.sway, self.road_edges[1] - p.sway)
        self.cam = replace(self.cam, curvature=p.curvature, yaw=p.yaw)
        self.scene.update({"curvature": p.curvature, "yaw_deg": math.degrees(p.yaw),
                           "cam_offset": self.scene["cam_offset"] + p.sway, "travel_m": p.travel})

    def _markings(self) -> None:
        super()._markings()
        travel = self.pose.travel
        for marking in self.markings:
            # Paint lies where (z + travel - phase) mod period < dash, z from the camera: the phase moves back.
            marking.phase = (marking.phase - travel) % (marking.dash + marking.gap)
            amplitudes, waves, phases, bias = marking.wear
            marking.wear = (amplitudes, waves, phases + waves * travel, bias)


@dataclass(frozen=True, eq=False)
class RoadFrame:
    index: int
    time_s: float
    image: np.ndarray            # [H, W, 3] uint8, BGR
    lanes: list[np.ndarray]      # each [M, 2] (x, y) in this frame's pixels, bottom row first; left to right
    curvature: float             # 1/m, negative bends left
    travel_m: float


def _check_size(size) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in size)
    except (TypeError, ValueError):
        raise LaneError(f"size={size!r} is not (width, height)", hint="e.g. (640, 360)") from None
    synth._check_size(width, height)
    return width, height


def _check_fps(fps) -> Fraction:
    try:
        rate = Fraction(fps).limit_denominator(1001)
    except (TypeError, ValueError):
        raise LaneError(f"fps={fps!r} is not a number", hint="e.g. 30") from None
    if not 1 <= rate <= 240:
        raise LaneError(f"fps={fps!r} is outside 1..240", hint="e.g. 30")
    return rate


def road_frames(seed: int = 0, frames: int | None = None, *, start: int = 0, size: tuple[int, int] = (640, 360),
                fps: float = 30, drive: Drive = Drive(), options: synth.SynthOptions = VIDEO_STYLE
                ) -> Iterator[RoadFrame]:
    """The frames of the drive on the road of ``seed`` from frame ``start``: ``frames`` of them, or without end.
    Each frame is drawn on its own (a pure function of the arguments and its index), so any stretch can be drawn
    again alike. Arguments are checked here, before the first frame is drawn."""
    seed = synth._whole(seed, "seed", 0, synth._MAX_SEED, "give a non-negative integer")
    start = synth._whole(start, "start", 0, 10**9, "give the index of the first frame")
    if frames is not None:
        frames = synth._whole(frames, "frames", 0, 10**9, "give a frame count, or None for no end")
    width, height = _check_size(size)
    rate = _check_fps(fps)
    if not isinstance(options, synth.SynthOptions) or not isinstance(drive, Drive):
        raise LaneError("options must be SynthOptions and drive a Drive", hint="e.g. options=VIDEO_STYLE")
    return _frames(seed, start, frames, width, height, float(rate), drive, options)


def _frames(seed, start, frames, width, height, fps, drive, options) -> Iterator[RoadFrame]:
    index = start
    while frames is None or index < start + frames:
        t = index / fps
        pose = _pose(drive, seed, t)
        rngs = {name: np.random.default_rng(child)
                for name, child in zip(synth._STREAMS, np.random.SeedSequence(seed).spawn(len(synth._STREAMS)))}
        road = _Moving(seed, width, height, options, 72, rngs, pose=pose).render()
        yield RoadFrame(index, t, road.bgr(), road.lanes, pose.curvature, pose.travel)
        index += 1


def truth_path(video: str | os.PathLike[str]) -> Path:
    """Where the lanes of ``video`` lie: ``road.mp4`` -> ``road.lanes.jsonl``."""
    video = Path(video)
    return video.with_name(video.stem + ".lanes.jsonl")


@dataclass(frozen=True, eq=False)
class RoadTruth:
    """The lanes of every frame of a road video, in its pixels; ``truth[i]`` is frame ``i``'s list of lanes."""

    size: tuple[int, int]                # (width, height)
    fps: float
    lanes: list[list[np.ndarray]]
    curvature: list[float]

    def __len__(self) -> int:
        return len(self.lanes)

    def __getitem__(self, index: int) -> list[np.ndarray]:
        return self.lanes[index]


def _line(frame: RoadFrame, width: int, height: int, fps: float) -> str:
    lanes = [np.round(lane, 2).tolist() for lane in frame.lanes]
    return json.dumps({"frame": frame.index, "time_s": round(frame.time_s, 6), "fps": fps, "width": width,
                       "height": height, "curvature": round(frame.curvature, 7), "lanes": lanes},
                      separators=(",", ":"))


def write_road_video(path: str | os.PathLike[str], frames: int = 150, fps: float = 30, seed: int = 0, *,
                     size: tuple[int, int] = (640, 360), drive: Drive = Drive(),
                     options: synth.SynthOptions = VIDEO_STYLE, crf: int = 20) -> RoadTruth:
    """Write the drive as an H.264 MP4 (yuv420p, ``crf``) at ``path`` and its lanes to :func:`truth_path`; both
    appear complete or not at all. Returns the truth written."""
    from orinkit.core.optional import require

    av = require("av")
    width, height = _check_size(size)
    if width % 2 or height % 2:
        raise LaneError(f"size {width}x{height} is odd; H.264 in yuv420p needs even sides", hint="e.g. (640, 360)")
    if isinstance(crf, bool) or not isinstance(crf, int) or not 0 <= crf <= 51:
        raise LaneError(f"crf={crf!r} is outside 0..51", hint="lower is better; 18..23 is typical")
    rate = _check_fps(fps)
    frames = synth._whole(frames, "frames", 1, 10**7, "give at least one frame")
    stream_of = road_frames(seed, frames, size=(width, height), fps=rate, drive=drive, options=options)
    target, sidecar = Path(path), truth_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    parts = (target.with_name(f".{target.name}.part"), sidecar.with_name(f".{sidecar.name}.part"))
    truth: list[list[np.ndarray]] = []
    curvature: list[float] = []
    try:
        with av.open(str(parts[0]), "w", format="mp4") as container, open(parts[1], "w", encoding="utf-8") as lines:
            stream = container.add_stream("libx264", rate=rate,
                                          options={"crf": str(crf), "preset": "veryfast"})
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            for frame in stream_of:
                picture = av.VideoFrame.from_ndarray(frame.image, format="bgr24")
                picture.pts = frame.index
                container.mux(stream.encode(picture))
                lines.write(_line(frame, width, height, float(rate)) + "\n")
                truth.append([np.round(lane, 2) for lane in frame.lanes])
                curvature.append(frame.curvature)
            container.mux(stream.encode())
        os.replace(parts[1], sidecar)
        os.replace(parts[0], target)
    finally:
        for part in parts:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(part)
    return RoadTruth((width, height), float(rate), truth, curvature)


def road_truth(path: str | os.PathLike[str]) -> RoadTruth:
    """The lanes written beside a road video: ``path`` is the MP4 or its ``.lanes.jsonl``."""
    path = Path(path)
    sidecar = path if path.name.endswith(".jsonl") else truth_path(path)
    try:
        text = sidecar.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LaneError(f"no lane truth at {sidecar}",
                        hint="write_road_video puts it beside the MP4 as <name>.lanes.jsonl") from None
    lanes: list[list[np.ndarray]] = []
    curvature: list[float] = []
    size, fps = None, 0.0
    for number, line in enumerate(text.splitlines(), 1):
        try:
            record = json.loads(line)
            index, frame_size = int(record["frame"]), (int(record["width"]), int(record["height"]))
            frame_lanes = [np.asarray(lane, dtype=np.float64).reshape(-1, 2) for lane in record["lanes"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise LaneError(f"{sidecar} line {number} is not a lane truth record ({exc})",
                            hint="rewrite it with write_road_video") from None
        if index != len(lanes) or (size is not None and frame_size != size):
            raise LaneError(f"{sidecar} line {number} is frame {index} of {frame_size[0]}x{frame_size[1]}, expected "
                            f"frame {len(lanes)} of the same size as line 1", hint="rewrite it with write_road_video")
        size = frame_size
        lanes.append(frame_lanes)
        curvature.append(float(record.get("curvature", 0.0)))
        fps = float(record.get("fps", fps))
    if size is None:
        raise LaneError(f"{sidecar} holds no frames", hint="rewrite it with write_road_video")
    return RoadTruth(size, fps, lanes, curvature)
