"""``Tracker``: persistent ids for detections across video frames (ByteTrack's two-stage association, in seconds).

>>> from orinkit.detect.track import Tracker
>>> tracker = Tracker()
>>> tracked = tracker.update(detections, frame.pts)  # doctest: +SKIP
>>> tracked.track_id, tracker.counts()  # doctest: +SKIP
(array([1, 2, -1]), {'disc': 2})

ByteTrack (Zhang et al., 2022): boxes scoring at least ``high`` are matched first to every track (seen or lost) by
IoU with the track's predicted box; the high boxes left then get a second chance with the tracks left by the IoU
of both boxes widened by half their size on each side (the buffered IoU of C-BIoU, Yang et al., 2023: a box that
shrank to its visible part behind a crossing object, or an object that turned, still overlaps there; on the drawn
crossing scenes it halves the id switches); boxes between ``low`` and ``high`` then keep the remaining seen tracks
alive (an occluded object's score drops before it disappears); a new track (no speed known yet) takes its next
high box by the widened IoU too (a small object moving its own size per frame has no plain overlap with its first
box); unmatched boxes of at least ``new_track`` start tracks, which get an id after ``confirm_hits`` matched frames
(at once on the first frame). Associations never cross classes.

Time is the frames' timestamps, not their count: the motion model (:mod:`orinkit.detect.kalman`, constant
velocity per second) predicts by the time since the last update, and a lost track is dropped ``lost_s`` seconds
after it was last seen. orinkit's video reader drops frames by design when the model falls behind (latest wins),
so a dropped frame must be a longer step, not a lost track; a frame-counting tracker loses ids exactly there.

Why our own and not a library's: supervision's ``ByteTrack`` (the issue's anchor) was deprecated in supervision
0.28 and removed in 0.31 (the current release has none; its successor is Roboflow's ``trackers`` package).
Installing supervision 0.30 pulls av (FFmpeg, ~100 MB), matplotlib, scipy, requests and tqdm into the device's
environment for a ~300-line algorithm; it counts time in frames (``lost_track_buffer`` frames at a nominal
``frame_rate``), so dropped frames shorten its memory and its Kalman step stays one frame long whatever time
passed; it is class-agnostic; and it builds one Python object per box per frame. This module needs numpy only
(scipy's ``linear_sum_assignment`` when it is importable, else a greedy assignment: scipy is not among orinkit's
install requirements and is often absent from a Jetson's Python), runs on Python 3.10 and 3.12, and keeps the
tracks as arrays, so one update is a few dozen numpy calls at any object count. ``benchmarks/track.py`` compares
both on the same detections: at 50 objects about 0.5 ms per frame against supervision's 15-20 ms (median, a busy
x86 CPU), and several times fewer id switches on the drawn crossing scenes, most of all with frames dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from orinkit.detect.detections import Detections, class_names
from orinkit.detect.errors import DetectInputError
from orinkit.detect.kalman import BoxMotion

try:  # optional: the optimal assignment; without it a greedy one (the same on all but crowded, ambiguous frames)
    from scipy.optimize import linear_sum_assignment
except ImportError:  # pragma: no cover - depends on the environment
    linear_sum_assignment = None

LOW_MATCH_IOU = 0.5  # ByteTrack's second stage: a low-score box keeps a track only when it clearly overlaps it
BUFFER = 0.5  # widening of both boxes for the recovery stage, of each box's size per side (C-BIoU's large buffer)
UNCONFIRMED_MATCH_IOU = 0.3  # ByteTrack's threshold for a new track's second box (here on widened boxes)


@dataclass(frozen=True)
class TrackerOptions:
    high: float = 0.5  # ByteTrack's first-association score threshold
    low: float = 0.1  # second association (low-score boxes keep tracks alive)
    new_track: float = 0.6  # a new track starts from an unmatched box at least this score
    match_iou: float = 0.2  # the least IoU for an association (first stage)
    lost_s: float = 1.0  # a lost track is kept this many SECONDS (not frames), predicted forward
    confirm_hits: int = 2  # a new track gets an id after this many matched frames (the first frame's: at once)

    def __post_init__(self) -> None:
        for name in ("high", "low", "new_track", "match_iou"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise DetectInputError(f"TrackerOptions.{name} must be a number in 0..1, got {value!r}",
                                       hint=f"e.g. TrackerOptions({name}={_default(name)})")
        if self.low > self.high:
            raise DetectInputError(f"TrackerOptions.low ({self.low}) is above high ({self.high})",
                                   hint="low keeps tracks alive below high: choose low <= high")
        lost = self.lost_s
        if isinstance(lost, bool) or not isinstance(lost, (int, float)) or not math.isfinite(lost) or lost < 0:
            raise DetectInputError(f"TrackerOptions.lost_s must be a number of seconds >= 0, got {lost!r}",
                                   hint="e.g. TrackerOptions(lost_s=1.0)")
        hits = self.confirm_hits
        if isinstance(hits, bool) or not isinstance(hits, int) or hits < 1:
            raise DetectInputError(f"TrackerOptions.confirm_hits must be a whole number >= 1, got {hits!r}",
                                   hint="e.g. TrackerOptions(confirm_hits=2)")


def _default(name: str):
    return next(f.default for f in fields(TrackerOptions) if f.name == name)


def assign(scores: np.ndarray, least: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns paired one-to-one so that the sum of ``scores`` (e.g. IoU) is largest among the pairings
    that match the most pairs scoring at least ``least`` (scipy), or best pair first (greedy, without scipy).
    Pairs below ``least`` are never returned."""
    rows, cols = scores.shape
    none = np.zeros(0, np.intp)
    if not rows or not cols:
        return none, none
    allowed = scores >= least
    if not allowed.any():
        return none, none
    if linear_sum_assignment is not None:
        # a pair below the threshold costs more than any set of allowed ones, so the fewest of them are used
        cost = np.where(allowed, 1.0 - scores, float(min(rows, cols) + 1))
        r, c = linear_sum_assignment(cost)
        keep = allowed[r, c]
        return r[keep], c[keep]
    return greedy_assign(scores, least)


def greedy_assign(scores: np.ndarray, least: float) -> tuple[np.ndarray, np.ndarray]:
    """Best-scoring pair first, each row and column used once (the fallback when scipy is absent)."""
    r, c = np.nonzero(scores >= least)
    order = np.argsort(-scores[r, c], kind="stable")
    used_r, used_c, out_r, out_c = set(), set(), [], []
    for i, j in zip(r[order].tolist(), c[order].tolist()):
        if i not in used_r and j not in used_c:
            used_r.add(i)
            used_c.add(j)
            out_r.append(i)
            out_c.append(j)
    return np.asarray(out_r, np.intp), np.asarray(out_c, np.intp)


@dataclass(eq=False)
class _Tracks:
    """Every live track as columns (one row per track), so prediction and IoU run over all tracks at once."""

    motion: BoxMotion = field(default_factory=BoxMotion.empty)
    class_id: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    ident: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # -1 until confirmed
    hits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    seen: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))  # time of the last match, seconds
    lost: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __len__(self) -> int:
        return len(self.ident)

    def select(self, index) -> _Tracks:
        return _Tracks(self.motion.select(index), self.class_id[index], self.ident[index], self.hits[index],
                       self.seen[index], self.lost[index])

    def extend(self, other: _Tracks) -> _Tracks:
        return _Tracks(self.motion.extend(other.motion), *(np.concatenate([a, b]) for a, b in zip(
            (self.class_id, self.ident, self.hits, self.seen, self.lost),
            (other.class_id, other.ident, other.hits, other.seen, other.lost))))


class Tracker:
    """ByteTrack on :class:`~orinkit.detect.detections.Detections`, one per video source (its ids are its own).

    ``update(detections, timestamp)`` answers the same detections in the same order with ``track_id`` filled
    (-1 for a box no confirmed track holds); ``counts()`` the distinct confirmed tracks per class so far."""

    def __init__(self, options: TrackerOptions = TrackerOptions()) -> None:
        if not isinstance(options, TrackerOptions):
            raise DetectInputError(f"options must be TrackerOptions, got {type(options).__name__}",
                                   hint="e.g. Tracker(TrackerOptions(lost_s=2.0))")
        self.options = options
        self.reset()

    def reset(self) -> None:
        """Forgets every track, the counts and the last timestamp; ids start again from 1."""
        self._tracks = _Tracks()
        self._time: float | None = None
        self._next_id = 1
        self._counts: dict[str, int] = {}

    def counts(self) -> dict[str, int]:
        """Class name -> the number of distinct confirmed tracks of that class since the start (or reset)."""
        return dict(sorted(self._counts.items()))

    def update(self, detections: Detections, timestamp: float) -> Detections:
        if not isinstance(detections, Detections):
            raise DetectInputError(f"Tracker.update takes Detections, got {type(detections).__name__}",
                                   hint="pass what a Detector or RemoteDetector answers for the frame")
        now = _seconds(timestamp)
        if self._time is not None and now < self._time:
            raise DetectInputError(f"timestamp {now:.6f} s is earlier than the last one, {self._time:.6f} s",
                                   hint="give frames in order with their own times (frame.pts or frame.captured); "
                                        "call reset() for a new video")
        first = self._time is None
        dt = 0.0 if first else now - self._time
        self._time = now
        options = self.options
        # lost tracks past lost_s go before matching: a box there now is a new object (or one back too late)
        tracks = self._tracks
        if len(tracks) and (now - tracks.seen > options.lost_s).any():
            tracks = tracks.select(now - tracks.seen <= options.lost_s)
        tracks.motion.predict(dt, still_size=tracks.lost)

        boxes, scores, classes = detections.xyxy.astype(np.float64), detections.score, detections.class_id
        usable = np.isfinite(boxes).all(axis=1) & np.isfinite(scores) & (scores >= options.low)
        if not usable.all():  # boxes that cannot be tracked take no part (and put no NaN into the IoU)
            boxes[~usable] = 0.0
        track_boxes = tracks.motion.xyxy()
        det_track = np.full(len(detections), -1, np.intp)  # the row of the track each detection went to
        ious = _class_iou(boxes, classes, track_boxes, tracks.class_id)
        confirmed = tracks.ident >= 0
        free_det = usable.copy()
        free_track = np.ones(len(tracks), bool)

        # 1: high-score boxes with every confirmed track, seen or lost
        high = usable & (scores >= options.high)
        self._match(ious, high, confirmed, options.match_iou, det_track, free_det, free_track)
        # 1b: high-score boxes left, with the confirmed tracks left, by the IoU of boxes widened by BUFFER of their
        # size on each side (C-BIoU): a box whose visible part jumped (half hidden behind a crossing object) or a
        # track that turned still overlaps there, where a new track would be an id switch
        wide = None
        if (free_det & high).any() and free_track.any():
            wide = _class_iou(_widen(boxes, BUFFER), classes, _widen(track_boxes, BUFFER), tracks.class_id)
            self._match(wide, free_det & high, confirmed, options.match_iou, det_track, free_det, free_track)
        # 2: low-score boxes keep the confirmed tracks still seen (not the lost: a low box is too weak a sign)
        self._match(ious, usable & ~high, confirmed & ~tracks.lost & free_track, LOW_MATCH_IOU,
                    det_track, free_det, free_track)
        # 3: unconfirmed tracks (seen once or more, no speed known yet) with the high boxes left, by the widened
        # IoU: a small object moving its own size per frame has no plain overlap with its first box
        if wide is not None:
            self._match(wide, high & free_det, ~confirmed, UNCONFIRMED_MATCH_IOU, det_track, free_det, free_track)

        matched_det = np.flatnonzero(det_track >= 0)
        rows = det_track[matched_det]
        tracks.motion.correct(rows, boxes[matched_det])
        tracks.hits[rows] += 1
        tracks.seen[rows] = now
        tracks.lost[rows] = False
        unmatched = free_track
        tracks.lost[unmatched & confirmed] = True
        names = detections.names
        self._confirm(tracks, rows, tracks.hits[rows] >= options.confirm_hits, names)

        keep = ~(unmatched & ~confirmed)  # an unconfirmed track dies on its first miss (a flicker)
        answer = np.where(det_track >= 0, tracks.ident[np.maximum(det_track, 0)] if len(tracks) else -1, -1)
        if not keep.all():
            tracks = tracks.select(keep)

        start = np.flatnonzero(free_det & high & (scores >= options.new_track))
        if len(start):
            born = _Tracks(BoxMotion.start(boxes[start]), classes[start].copy(), np.full(len(start), -1, np.int64),
                           np.ones(len(start), np.int64), np.full(len(start), now), np.zeros(len(start), bool))
            if first or options.confirm_hits <= 1:
                self._confirm(born, np.arange(len(start)), np.ones(len(start), bool), names)
                answer[start] = born.ident
            tracks = tracks.extend(born)
        self._tracks = tracks
        return Detections(detections.xyxy, detections.score, detections.class_id, detections.names,
                          answer.astype(np.int64))

    @staticmethod
    def _match(ious, det_mask, track_mask, least, det_track, free_det, free_track) -> None:
        det_index, track_index = np.flatnonzero(det_mask), np.flatnonzero(track_mask & free_track)
        if not len(det_index) or not len(track_index):
            return
        r, c = assign(ious[np.ix_(det_index, track_index)], least)
        det_track[det_index[r]] = track_index[c]
        free_det[det_index[r]] = False
        free_track[track_index[c]] = False

    def _confirm(self, tracks: _Tracks, rows: np.ndarray, ready: np.ndarray, names) -> None:
        """Gives an id to each track at ``rows`` that is ``ready`` and has none, and counts it under its class."""
        rows = rows[ready & (tracks.ident[rows] < 0)]
        if not len(rows):
            return
        tracks.ident[rows] = np.arange(self._next_id, self._next_id + len(rows))
        self._next_id += len(rows)
        for name in class_names(tracks.class_id[rows], names):
            self._counts[name] = self._counts.get(name, 0) + 1


def _seconds(timestamp) -> float:
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(timestamp)):
        raise DetectInputError(f"timestamp must be a finite number of seconds, got {timestamp!r}",
                               hint="use the frame's time: frame.pts for files, frame.captured for live sources")
    return float(timestamp)


def _widen(xyxy: np.ndarray, by: float) -> np.ndarray:
    xyxy = np.asarray(xyxy, np.float64)
    pad = (xyxy[:, 2:] - xyxy[:, :2]) * by
    return np.concatenate([xyxy[:, :2] - pad, xyxy[:, 2:] + pad], axis=1)


def _class_iou(boxes: np.ndarray, classes: np.ndarray, track_boxes: np.ndarray, track_classes: np.ndarray):
    """IoU of every detection with every track's predicted box, 0 across classes: [detections, tracks]."""
    if not len(boxes) or not len(track_boxes):
        return np.zeros((len(boxes), len(track_boxes)))
    top_left = np.maximum(boxes[:, None, :2], track_boxes[None, :, :2])
    bottom_right = np.minimum(boxes[:, None, 2:], track_boxes[None, :, 2:])
    sides = np.maximum(bottom_right - top_left, 0.0)
    inter = sides[..., 0] * sides[..., 1]
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    track_area = (track_boxes[:, 2] - track_boxes[:, 0]) * (track_boxes[:, 3] - track_boxes[:, 1])
    ious = inter / np.maximum(area[:, None] + track_area[None, :] - inter, 1e-9)
    ious[classes[:, None] != track_classes[None, :]] = 0.0
    return ious
