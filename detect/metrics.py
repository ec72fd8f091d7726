"""Box agreement between two sets of detections: matched F1 (the gates' criterion) and COCO-style mAP50-95.

Both take one side as the truth: FP32's boxes when an FP16 or INT8 conversion is judged, labelled boxes when a
model is. No crowd regions, no area ranges, no limit per image (COCO's ``maxDets``): every box counts. Where
the truth has no box at all, both give 1.0 when the other side has none either, else 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError

COCO_IOUS = np.linspace(0.5, 0.95, 10)
RECALL_POINTS = np.linspace(0.0, 1.0, 101)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` [N, 4] with every box in ``b`` [M, 4] (xyxy): [N, M]."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    width = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    height = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(width, 0, None) * np.clip(height, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def _greedy(ious: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """COCO's matching: candidates (rows, best score first) each take the unmatched truth (column) they overlap
    most, at IoU >= threshold. Returns [len(thresholds), rows] booleans: matched or not."""
    count_t, (rows, cols) = len(thresholds), ious.shape
    matched = np.zeros((count_t, rows), bool)
    if not rows or not cols:
        return matched
    taken = np.zeros((count_t, cols), bool)
    every = np.arange(count_t)
    for row in range(rows):
        free = np.where(taken, -1.0, ious[row][None, :])
        best = free.argmax(axis=1)
        ok = free[every, best] >= thresholds
        matched[ok, row] = True
        taken[every[ok], best[ok]] = True
    return matched


def _pairs(references: Sequence[Detections], candidates: Sequence[Detections]):
    references, candidates = list(references), list(candidates)
    if len(references) != len(candidates):
        raise DetectInputError(f"{len(references)} reference images but {len(candidates)} candidate images",
                               hint="give one Detections per image on both sides, in the same order")
    return zip(references, candidates)


def match(reference: Detections, candidate: Detections, iou: float = 0.5) -> tuple[int, int, int]:
    """Per-class greedy matching at IoU >= ``iou``: (true positives, false positives, false negatives)."""
    true_positives = 0
    for class_id in np.union1d(reference.class_id, candidate.class_id):
        truth = reference.xyxy[reference.class_id == class_id]
        mine = candidate.class_id == class_id
        order = np.argsort(-candidate.score[mine], kind="stable")
        found = candidate.xyxy[mine][order]
        true_positives += int(_greedy(box_iou(found, truth), np.array([iou]))[0].sum())
    return true_positives, len(candidate) - true_positives, len(reference) - true_positives


def detection_f1(references: Sequence[Detections], candidates: Sequence[Detections], iou: float = 0.5) -> float:
    """F1 of the candidates' boxes against the references', matched per class at IoU >= ``iou``, over all images."""
    tp = fp = fn = 0
    for reference, candidate in _pairs(references, candidates):
        a, b, c = match(reference, candidate, iou)
        tp, fp, fn = tp + a, fp + b, fn + c
    if tp + fp + fn == 0:
        return 1.0
    return 2 * tp / (2 * tp + fp + fn)


def _average_precision(matched: np.ndarray, scores: np.ndarray, truths: int) -> np.ndarray:
    """101-point interpolated AP at each threshold, from the matched flags [T, n] of one class's candidates."""
    order = np.argsort(-scores, kind="mergesort")
    hits = matched[:, order]
    tp = np.cumsum(hits, axis=1)
    fp = np.cumsum(~hits, axis=1)
    recall = tp / truths
    precision = tp / np.maximum(tp + fp, 1)
    envelope = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]  # best precision at this recall or more
    result = np.zeros(len(matched))
    for t in range(len(matched)):
        index = np.searchsorted(recall[t], RECALL_POINTS, side="left")
        inside = index < recall.shape[1]
        result[t] = np.where(inside, envelope[t][np.minimum(index, recall.shape[1] - 1)], 0.0).mean()
    return result


def map50_95(truths: Sequence[Detections], predictions: Sequence[Detections]) -> float:
    """COCO-style mAP over IoU 0.50:0.05:0.95 (101-point interpolation), classes with a truth box averaged."""
    truths, predictions = list(truths), list(predictions)
    per_class: dict[int, list] = {}
    for truth, prediction in _pairs(truths, predictions):
        for class_id in np.union1d(truth.class_id, prediction.class_id).tolist():
            real = truth.xyxy[truth.class_id == class_id]
            mine = prediction.class_id == class_id
            scores = prediction.score[mine]
            order = np.argsort(-scores, kind="stable")
            matched = _greedy(box_iou(prediction.xyxy[mine][order], real), COCO_IOUS)
            entry = per_class.setdefault(class_id, [[], [], 0])
            entry[0].append(matched)
            entry[1].append(scores[order])
            entry[2] += len(real)
    aps = []
    for matched_parts, score_parts, count in per_class.values():
        if count == 0:  # COCO leaves classes without truth out of the mean
            continue
        matched = np.concatenate(matched_parts, axis=1)
        if matched.shape[1] == 0:
            aps.append(0.0)
            continue
        aps.append(float(_average_precision(matched, np.concatenate(score_parts), count).mean()))
    if not aps:
        return 1.0 if all(len(p) == 0 for p in predictions) else 0.0
    return float(np.mean(aps))
