"""How well a tracker kept identities: CLEAR-MOT counts (id switches, fragmentations, MOTA) and IDF1.

>>> from orinkit.detect.track_metrics import id_switches
>>> score = id_switches(scene.truth, tracked)  # doctest: +SKIP
>>> score.switches, round(score.mota, 3), round(score.idf1, 3)  # doctest: +SKIP
(1, 0.962, 0.948)

``truth`` and ``tracked`` are one :class:`~orinkit.detect.detections.Detections` per frame, in the same order; the
truth's ``track_id`` are the objects' own ids (as :func:`orinkit.detect.scenes.moving_scene` gives them), the
tracked boxes' are the tracker's (boxes with ``track_id`` -1, untracked, are not counted as the tracker's output).

Per frame (Bernardin & Stiefelhagen, 2008): a true object keeps the track it was matched to in the previous frame
while they still overlap at ``iou``; the others are paired by IoU (the most pairs, then the largest total). A box
pairs only with a box of its class. A true object whose matched track differs from the one it last had is an id
switch; one matched again after frames in which it was shown but missed is a fragmentation. MOTA = 1 - (missed +
false positives + switches) / true boxes; IDF1 (Ristani et al., 2016) pairs each true id with at most one track
id for the whole sequence (the pairing that overlaps in the most frames) and scores 2 IDTP / (true + tracked
boxes). Where the truth has no box at all, MOTA and IDF1 are 1.0 when the tracker output none either, else 0.0.

:func:`detector_like` turns true boxes into what a detector would give for them (jittered edges and scores,
some boxes missed, a stray box now and then), so a tracker is judged on realistic input without running a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError
from orinkit.detect.metrics import box_iou
from orinkit.detect.track import assign, greedy_assign, linear_sum_assignment


@dataclass(frozen=True)
class TrackScore:
    frames: int
    objects: int  # true boxes over all frames
    matched: int  # true boxes paired with a tracked box
    missed: int  # true boxes with none
    false_positives: int  # tracked boxes paired with no true box
    switches: int  # a true object's matched track id changed
    fragmentations: int  # a true object's matches resumed after misses
    true_ids: int  # distinct true objects
    track_ids: int  # distinct track ids the tracker output
    mota: float
    idf1: float

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def id_switches(truth: Sequence[Detections], tracked: Sequence[Detections], iou: float = 0.5) -> TrackScore:
    """CLEAR-MOT counts and IDF1 of ``tracked`` against ``truth`` (see the module's text)."""
    truth, tracked = list(truth), list(tracked)
    _check(truth, tracked, iou)
    last: dict[int, int] = {}  # true id -> the track id it was last matched to
    missed_since: set[int] = set()  # true ids shown but missed since their last match
    overlaps: dict[tuple[int, int], int] = {}  # (true id, track id) -> frames overlapping at iou (for IDF1)
    objects = matched = switches = fragmentations = hypotheses = 0
    true_ids: set[int] = set()
    track_ids: set[int] = set()
    for frame_truth, frame_tracked in zip(truth, tracked):
        frame_tracked = frame_tracked[frame_tracked.track_id >= 0]
        t_ids, h_ids = frame_truth.track_id.tolist(), frame_tracked.track_id.tolist()
        objects += len(t_ids)
        hypotheses += len(h_ids)
        true_ids.update(t_ids)
        track_ids.update(h_ids)
        ious = box_iou(frame_truth.xyxy, frame_tracked.xyxy)
        ious[frame_truth.class_id[:, None] != frame_tracked.class_id[None, :]] = 0.0
        for g, h in zip(*np.nonzero(ious >= iou)):
            key = (t_ids[g], h_ids[h])
            overlaps[key] = overlaps.get(key, 0) + 1
        pairs = _frame_pairs(ious, t_ids, h_ids, last, iou)
        matched += len(pairs)
        for g, h in pairs:
            true_id, track_id = t_ids[g], h_ids[h]
            if true_id in last and last[true_id] != track_id:
                switches += 1
            if true_id in missed_since:
                fragmentations += 1
                missed_since.discard(true_id)
            last[true_id] = track_id
        paired = {t_ids[g] for g, _ in pairs}
        missed_since.update(t for t in t_ids if t not in paired and t in last)
    missed, false_positives = objects - matched, hypotheses - matched
    if objects:
        mota = 1.0 - (missed + false_positives + switches) / objects
        idf1 = 2 * _idtp(overlaps) / (objects + hypotheses)
    else:
        mota = idf1 = 1.0 if not hypotheses else 0.0
    return TrackScore(frames=len(truth), objects=objects, matched=matched, missed=missed,
                      false_positives=false_positives, switches=switches, fragmentations=fragmentations,
                      true_ids=len(true_ids), track_ids=len(track_ids), mota=float(mota), idf1=float(idf1))


def detector_like(truth: Sequence[Detections], seed: int = 0, *, jitter_px: float = 2.0, miss: float = 0.05,
                  strays: float = 0.05) -> list[Detections]:
    """Per frame: the true boxes with each edge moved by N(0, ``jitter_px``) pixels and a score of N(0.8, 0.1)
    clipped to 0.05..1 (a few fall below a tracker's high threshold), each box dropped with probability ``miss``,
    and with probability ``strays`` one stray box (25-45 px, any class, score 0.3..0.9) somewhere in the frame's
    extent. No true ids (``track_id`` None): what a detector answers."""
    rng = np.random.default_rng(seed)
    frames = list(truth)
    extent = np.concatenate([frame.xyxy for frame in frames] + [np.zeros((1, 4), np.float32)]).max(axis=0)
    width, height = max(float(extent[2]), 64.0), max(float(extent[3]), 64.0)
    answers = []
    for frame in frames:
        keep = rng.random(len(frame)) >= miss
        boxes = frame.xyxy[keep] + rng.normal(0.0, jitter_px, (int(keep.sum()), 4))
        scores = np.clip(rng.normal(0.8, 0.1, len(boxes)), 0.05, 1.0)
        classes = frame.class_id[keep]
        if rng.random() < strays:
            size = rng.uniform(25, 45)
            x, y = rng.uniform(0, width - size), rng.uniform(0, height - size)
            boxes = np.vstack([boxes, [[x, y, x + size, y + size]]])
            scores = np.append(scores, rng.uniform(0.3, 0.9))
            classes = np.append(classes, rng.integers(max(len(frame.names), 1)))
        answers.append(Detections(boxes, scores, classes, frame.names))
    return answers


def _frame_pairs(ious: np.ndarray, t_ids: list, h_ids: list, last: dict, least: float) -> list[tuple[int, int]]:
    """(truth row, tracked row) pairs of one frame: last frame's correspondences that still overlap, then the
    best assignment of the rest."""
    pairs = []
    free_t = np.ones(len(t_ids), bool)
    free_h = np.ones(len(h_ids), bool)
    column = {h: j for j, h in enumerate(h_ids)}
    for g, true_id in enumerate(t_ids):
        j = column.get(last.get(true_id, -1))
        if j is not None and free_h[j] and ious[g, j] >= least:
            pairs.append((g, j))
            free_t[g] = free_h[j] = False
    rows, cols = np.flatnonzero(free_t), np.flatnonzero(free_h)
    r, c = assign(ious[np.ix_(rows, cols)], least)
    pairs.extend(zip(rows[r].tolist(), cols[c].tolist()))
    return pairs


def _idtp(overlaps: dict[tuple[int, int], int]) -> int:
    """The most frames true ids and track ids can agree in when each true id takes at most one track id."""
    if not overlaps:
        return 0
    t_index = {t: i for i, t in enumerate(sorted({t for t, _ in overlaps}))}
    h_index = {h: j for j, h in enumerate(sorted({h for _, h in overlaps}))}
    counts = np.zeros((len(t_index), len(h_index)))
    for (t, h), count in overlaps.items():
        counts[t_index[t], h_index[h]] = count
    if linear_sum_assignment is not None:
        r, c = linear_sum_assignment(counts, maximize=True)
    else:
        r, c = greedy_assign(counts, 0.5)
    return int(counts[r, c].sum())


def _check(truth: list, tracked: list, iou: float) -> None:
    if len(truth) != len(tracked):
        raise DetectInputError(f"{len(truth)} truth frames but {len(tracked)} tracked frames",
                               hint="give one Detections per frame on both sides, in the same order")
    if isinstance(iou, bool) or not isinstance(iou, (int, float)) or not 0.0 < iou <= 1.0:
        raise DetectInputError(f"iou must be a number in (0, 1], got {iou!r}", hint="e.g. iou=0.5")
    for side, frames in (("truth", truth), ("tracked", tracked)):
        for index, frame in enumerate(frames):
            if not isinstance(frame, Detections):
                raise DetectInputError(f"{side} frame {index} is a {type(frame).__name__}, not Detections",
                                       hint="give orinkit.detect.Detections per frame")
            if frame.track_id is None:
                raise DetectInputError(f"{side} frame {index} has no track_id",
                                       hint="truth needs the objects' ids; tracked needs Tracker.update's answer")
