"""The ``lane_detection`` ensemble on video: frames go as JPEG (or PNG), lanes come back in the source's pixels.

The decoder scales frames to 640x360, the model's own size, so the server step resizes nothing; the ensemble
answers in the pixels of the image it was sent, which this adapter scales to the source's. ``lane_f1`` scores
answered frames against a road video's truth (:func:`orinkit.lanes.road_video.road_truth`) with CULane's rule.

The lane kit (:mod:`orinkit.lanes.kit`) hands this adapter to ``orinkit.video.adapters.adapter_for``: video/
never imports it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from orinkit.lanes.client import JPEG_QUALITY, Lane, check_frame_format, check_quality, encode, lanes_from
from orinkit.lanes.errors import LaneError
from orinkit.video.adapters import Adapter
from orinkit.video.frames import Frame


class LaneAnswer(list):
    """The lanes of one frame (``Lane``, points in the source's pixels, best first), and the source's
    ``(width, height)``, so that they can be drawn on the frame at any size."""

    def __init__(self, lanes: Iterable[Lane] = (), source_size: tuple[int, int] | None = None) -> None:
        super().__init__(lanes)
        self.source_size = source_size


class LaneAdapter(Adapter):
    size = (640, 360)

    def __init__(self, frame_format: str = "jpeg", *, jpeg_quality: int = JPEG_QUALITY) -> None:
        self.frame_format, self.jpeg_quality = check_frame_format(frame_format), check_quality(jpeg_quality)

    def inputs(self, frame: Frame) -> tuple:
        data = encode(frame.image, self.frame_format, quality=self.jpeg_quality)
        return (np.array([data], dtype=np.object_),)

    def answer(self, outputs: Any, frame: Frame) -> tuple[LaneAnswer, dict]:
        height, width = frame.image.shape[:2]
        source = tuple(frame.source_size) if frame.source_size else (width, height)
        scale = np.array([source[0] / width, source[1] / height])
        lanes = LaneAnswer((Lane(lane.points * scale, lane.score)
                            for lane in lanes_from(outputs["lanes"], outputs["scores"], outputs["count"])), source)
        record = {"lanes": [{"score": round(lane.score, 4), "points": np.round(lane.points, 1).tolist()}
                            for lane in lanes]}
        return lanes, record

    def draw(self, image: np.ndarray, answer: Any) -> np.ndarray:
        from PIL import Image

        from orinkit.lanes.draw import FOUND, draw_lanes

        height, width = image.shape[:2]
        source = getattr(answer, "source_size", None) or (width, height)
        # Pillow unpacks BGR rows into its own memory (the frame stays untouched) and packs them back: a reversed
        # numpy copy each way would cost ten times as much.
        picture = Image.frombuffer("RGB", (width, height), np.ascontiguousarray(image), "raw", "BGR", 0, 1)
        draw_lanes(picture, answer or (), colour=FOUND, width=max(2, round(width / 240)),
                   scale=(source[0] / width, source[1] / height))
        return np.frombuffer(bytearray(picture.tobytes("raw", "BGR")), np.uint8).reshape(height, width, 3)


@dataclass(frozen=True)
class LaneF1:
    """CULane counts over the answered frames (``total``) and each frame's F1 (``per_frame``: frame -> F1)."""

    total: Any                       # orinkit.lanes.metrics.LaneScore
    per_frame: dict[int, float]

    @property
    def frames(self) -> int:
        return len(self.per_frame)

    @property
    def f1(self) -> float:
        return self.total.f1

    @property
    def mean_f1(self) -> float:
        return float(np.mean(list(self.per_frame.values()))) if self.per_frame else float("nan")

    @property
    def worst(self) -> tuple[int, float] | None:
        return min(self.per_frame.items(), key=lambda item: item[1]) if self.per_frame else None

    def describe(self) -> str:
        worst = self.worst
        return (f"{self.frames} frames: F1 {self.f1:.4f} over all lanes, per frame mean {self.mean_f1:.4f}"
                + (f", worst {worst[1]:.4f} (frame {worst[0]})" if worst else "") + f"; {self.total.describe()}")


def _frame_and_lanes(record) -> tuple[int, list]:
    """(frame index, lanes as [M, 2] arrays) from a Result, or a JSON line ({"frame": n, "answer": {"lanes":
    [...]}}), or a bare ``{"frame": n, "lanes": [...]}``."""
    if hasattr(record, "frame") and hasattr(record, "record"):
        index, answer = record.frame.index, record.record
    elif isinstance(record, Mapping):
        index = record.get("frame", record.get("index"))
        answer = record.get("answer", record)
    else:
        raise LaneError(f"a {type(record).__name__} is no answered frame",
                        hint="pass Results, or the JSON lines of the results sink")
    try:
        lanes = [np.asarray(lane["points"], dtype=np.float64).reshape(-1, 2) for lane in answer["lanes"]]
        return int(index), lanes
    except (KeyError, TypeError, ValueError) as exc:
        raise LaneError(f"an answered frame without a frame number or lanes ({exc!r})",
                        hint="pass the records of the lane_detection model with their frame numbers") from None


def lane_f1(results_records: Iterable, truth) -> LaneF1:
    """CULane F1 of the answered frames against ``truth`` (a RoadTruth: ``truth.size`` (width, height) and
    ``truth[i]`` the lanes of frame ``i``), lanes in the source's pixels on both sides. Frames not answered are
    not scored (a live pipeline drops frames) and a frame answered twice counts once; an answer for a frame the
    truth does not have is an error. ``results_records``: Results, or the results sink's JSON lines."""
    from orinkit.lanes.metrics import LaneScore, score_image

    width, height = truth.size
    total, per_frame = LaneScore(0, 0, 0), {}
    for record in results_records:
        index, lanes = _frame_and_lanes(record)
        if index in per_frame:
            continue  # a frame answered twice counts once
        if not 0 <= index < len(truth):
            raise LaneError(f"frame {index} was answered but the truth has frames 0..{len(truth) - 1}",
                            hint="score the results of the video the truth was written with")
        score = score_image(lanes, truth[index], (height, width))
        total = total + score
        per_frame[index] = score.f1
    return LaneF1(total, per_frame)
