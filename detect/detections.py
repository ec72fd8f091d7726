"""``Detections``: the one type every detector, tracker, metric and client answer in.

Boxes are x1 y1 x2 y2 in the source image's pixels (not the model's letterboxed input), so they can be drawn on
the frame the camera gave. Columns are numpy arrays of one length, as in Roboflow's supervision, so a filter is one
boolean mask: ``detections[detections.score > 0.5]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.detect.errors import DetectInputError


def class_names(class_ids: np.ndarray, names: Sequence[str]) -> list[str]:
    """The name of each class id: ``names[id]`` where it is known, else the id as text."""
    count = len(names)
    return [names[i] if 0 <= i < count and names[i] else str(i) for i in np.asarray(class_ids).tolist()]


@dataclass(eq=False)
class Detections:
    xyxy: np.ndarray  # float32 [N, 4], x1 y1 x2 y2 in the source image's pixels
    score: np.ndarray  # float32 [N]
    class_id: np.ndarray  # int32 [N]
    names: tuple[str, ...] = ()  # class names indexed by class id
    track_id: np.ndarray | None = None  # int64 [N], -1 where a detection has no track

    def __post_init__(self) -> None:
        self.xyxy = np.asarray(self.xyxy, dtype=np.float32).reshape(-1, 4)
        self.score = np.asarray(self.score, dtype=np.float32).reshape(-1)
        self.class_id = np.asarray(self.class_id).astype(np.int32, copy=False).reshape(-1)
        self.names = tuple(str(name) for name in self.names)
        count = len(self.xyxy)
        columns = {"score": self.score, "class_id": self.class_id}
        if self.track_id is not None:
            self.track_id = np.asarray(self.track_id).astype(np.int64, copy=False).reshape(-1)
            columns["track_id"] = self.track_id
        for name, column in columns.items():
            if len(column) != count:
                raise DetectInputError(f"Detections has {count} boxes but {len(column)} values of {name}",
                                       hint="give every column one value per box")

    def __len__(self) -> int:
        return len(self.xyxy)

    def __getitem__(self, index) -> Detections:
        if isinstance(index, (int, np.integer)):
            index = [int(index)]
        elif not isinstance(index, slice):
            index = np.asarray(index)
            if index.dtype == bool and index.shape != (len(self),):
                raise DetectInputError(f"a mask of shape {index.shape} cannot select from {len(self)} detections",
                                       hint="use one boolean per detection")
        track = None if self.track_id is None else self.track_id[index]
        return Detections(self.xyxy[index], self.score[index], self.class_id[index], self.names, track)

    def __repr__(self) -> str:
        return f"Detections({len(self)} boxes, classes {sorted(set(self.class_name))})"

    @property
    def class_name(self) -> list[str]:
        return class_names(self.class_id, self.names)

    @classmethod
    def empty(cls, names: Sequence[str] = ()) -> Detections:
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32), tuple(names))

    def to_records(self) -> list[dict]:
        """One dict per box: ``{"box": [x1, y1, x2, y2], "score", "class_id", "class"}`` (and ``"track_id"``
        once a tracker has filled it), with plain Python numbers, ready for JSON."""
        records = []
        tracks = None if self.track_id is None else self.track_id.tolist()
        for index, (box, score, class_id, name) in enumerate(zip(self.xyxy.tolist(), self.score.tolist(),
                                                                  self.class_id.tolist(), self.class_name)):
            record = {"box": box, "score": score, "class_id": class_id, "class": name}
            if tracks is not None:
                record["track_id"] = tracks[index]
            records.append(record)
        return records

    @classmethod
    def from_records(cls, records: Sequence[Mapping], names: Sequence[str] = ()) -> Detections:
        if not records:
            return cls.empty(names)
        try:
            boxes = [list(record["box"]) for record in records]
            scores = [float(record["score"]) for record in records]
            classes = [int(record["class_id"]) for record in records]
        except (KeyError, TypeError, ValueError) as exc:
            raise DetectInputError(f"a detection record lacks or misuses a field: {exc}",
                                   hint='each record needs "box" [x1, y1, x2, y2], "score" and "class_id"') from None
        if any(len(box) != 4 for box in boxes):
            raise DetectInputError("a detection record's box does not have 4 numbers", hint="use [x1, y1, x2, y2]")
        tracks = None
        if any("track_id" in record for record in records):
            tracks = [int(record.get("track_id", -1)) for record in records]
        return cls(np.asarray(boxes, np.float32), scores, classes, tuple(names), tracks)
