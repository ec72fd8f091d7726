"""A text detector's answers, as DBNet's post-processing gives them: boxes, not pixels.

``--metric text_boxes:boxes_agree`` judges a DBNet-style probability map by the text boxes it yields: the map
binarised at 0.3, each connected region a box kept when its mean probability is at least 0.6 and each side at
least 3 px (PaddleOCR's det_db_thresh and det_db_box_thresh), and the candidate's boxes matched one to one to the
reference's at IoU >= 0.7. The agreement is the matched share of all boxes (an F1 over every sample), so a box
lost, split, merged or moved counts against it, and a mask that only thickens by a pixel does not."""

from __future__ import annotations

import numpy as np

BINARY = 0.3
BOX_SCORE = 0.6
MIN_SIDE = 3
MATCH_IOU = 0.7


def text_boxes(probability: np.ndarray) -> list[tuple[int, int, int, int]]:
    """``(x0, y0, x1, y1)`` boxes (exclusive ends) of one HxW probability map."""
    from scipy import ndimage

    labels, count = ndimage.label(probability > BINARY)
    boxes = []
    for index, region in enumerate(ndimage.find_objects(labels), start=1):
        if region is None:
            continue
        rows, cols = region
        if rows.stop - rows.start < MIN_SIDE or cols.stop - cols.start < MIN_SIDE:
            continue
        if probability[region][labels[region] == index].mean() < BOX_SCORE:
            continue
        boxes.append((cols.start, rows.start, cols.stop, rows.stop))
    return boxes


def _iou(a, b) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def matched(reference: list, candidate: list) -> int:
    """Boxes matched one to one at IoU >= MATCH_IOU, best pairs first."""
    pairs = sorted(((_iou(r, c), i, j) for i, r in enumerate(reference) for j, c in enumerate(candidate)),
                   reverse=True)
    used_r, used_c, count = set(), set(), 0
    for iou, i, j in pairs:
        if iou < MATCH_IOU:
            break
        if i not in used_r and j not in used_c:
            used_r.add(i)
            used_c.add(j)
            count += 1
    return count


def _map(outputs: dict) -> np.ndarray:
    probability = np.asarray(next(iter(outputs.values())), np.float32)
    return probability.reshape(probability.shape[-2:])


def boxes_agree(reference, candidate) -> float:
    """The share of text boxes the candidate reproduces, over every sample (1.0 when neither finds any)."""
    hits = total = 0
    for ref, got in zip(reference, candidate):
        ref_boxes, got_boxes = text_boxes(_map(ref)), text_boxes(_map(got))
        hits += 2 * matched(ref_boxes, got_boxes)
        total += len(ref_boxes) + len(got_boxes)
    return hits / total if total else 1.0
