"""The CULane lane metric, and the FP16 gate's lane agreement built on it.

CULane's rule (Pan et al., SCNN; the evaluation code LaneATT reports with): every lane is drawn as a line 30
pixels wide on a 1640x590 image, a prediction matches a ground-truth lane when the IoU of their drawings is at
least 0.5, and predictions and ground truth are paired one to one by Hungarian matching on that IoU. Lanes of any
other image size are first scaled onto 1640x590, so the 30 pixels keep their meaning. The official code joins a
lane's points with a cubic spline before drawing; lanes here are dense (one point per anchor row), and are joined
by straight segments.

numpy and Pillow only, so this also runs on the device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.lanes.errors import LaneError

CULANE_SIZE = (590, 1640)  # height, width
LANE_WIDTH = 30
IOU_THRESHOLD = 0.5


@dataclass(frozen=True)
class LaneScore:
    """Counts over one or more images, and the precision, recall and F1 they give."""

    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> float:
        found = self.true_positives + self.false_positives
        return self.true_positives / found if found else 1.0

    @property
    def recall(self) -> float:
        present = self.true_positives + self.false_negatives
        return self.true_positives / present if present else 1.0

    @property
    def f1(self) -> float:
        total = 2 * self.true_positives + self.false_positives + self.false_negatives
        return 2 * self.true_positives / total if total else 1.0

    def __add__(self, other: LaneScore) -> LaneScore:
        return LaneScore(self.true_positives + other.true_positives, self.false_positives + other.false_positives,
                         self.false_negatives + other.false_negatives)

    def describe(self) -> str:
        return (f"precision {self.precision:.4f}, recall {self.recall:.4f}, F1 {self.f1:.4f} "
                f"({self.true_positives} matched, {self.false_positives} extra, {self.false_negatives} missed)")


def _points(lane, image_size: tuple[float, float]) -> list[tuple[float, float]]:
    array = np.asarray(lane, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise LaneError(f"a lane must be [M, 2] points (x, y), got shape {list(array.shape)}",
                        hint="pass each lane as an array of (x, y) pixel coordinates")
    array = array[np.isfinite(array).all(axis=1)]
    height, width = image_size
    scale = np.array([CULANE_SIZE[1] / width, CULANE_SIZE[0] / height])
    return [tuple(p) for p in array * scale]


def _mask(points) -> np.ndarray:
    from PIL import Image, ImageDraw

    canvas = Image.new("1", (CULANE_SIZE[1], CULANE_SIZE[0]), 0)
    if len(points) >= 2:
        ImageDraw.Draw(canvas).line(points, fill=1, width=LANE_WIDTH, joint="curve")
    elif len(points) == 1:
        x, y = points[0]
        r = LANE_WIDTH / 2
        ImageDraw.Draw(canvas).ellipse([x - r, y - r, x + r, y + r], fill=1)
    return np.asarray(canvas, dtype=bool)


def iou_matrix(predicted: Sequence, truth: Sequence, image_size: tuple[float, float]) -> np.ndarray:
    """``[len(predicted), len(truth)]`` IoU of the lanes drawn CULane's way (``image_size``: height, width)."""
    if len(image_size) != 2 or not all(float(v) > 0 for v in image_size):
        raise LaneError(f"image_size must be (height, width) > 0, got {image_size!r}", hint="e.g. (720, 1280)")
    masks_p = [_mask(_points(lane, image_size)) for lane in predicted]
    masks_t = [_mask(_points(lane, image_size)) for lane in truth]
    ious = np.zeros((len(masks_p), len(masks_t)))
    for i, p in enumerate(masks_p):
        for j, t in enumerate(masks_t):
            union = np.count_nonzero(p | t)
            ious[i, j] = np.count_nonzero(p & t) / union if union else 0.0
    return ious


def assignment(cost: np.ndarray) -> list[tuple[int, int]]:
    """Hungarian matching: pairs (row, column) of minimum total cost, min(rows, columns) of them."""
    cost = np.asarray(cost, dtype=np.float64)
    transposed = cost.shape[0] > cost.shape[1]
    if transposed:
        cost = cost.T
    rows, cols = cost.shape
    if rows == 0:
        return []
    # Shortest augmenting paths with potentials (Jonker-Volgenant style), O(rows^2 * cols).
    u, v = np.zeros(rows + 1), np.zeros(cols + 1)
    match = np.zeros(cols + 1, dtype=int)  # match[j]: row (1-based) assigned to column j; 0 for none
    for i in range(1, rows + 1):
        match[0], j0 = i, 0
        minv, used, way = np.full(cols + 1, np.inf), np.zeros(cols + 1, bool), np.zeros(cols + 1, int)
        while True:
            used[j0] = True
            i0 = match[j0]
            delta, j1 = np.inf, 0
            for j in range(1, cols + 1):
                if not used[j]:
                    current = cost[i0 - 1, j - 1] - u[i0] - v[j]
                    if current < minv[j]:
                        minv[j], way[j] = current, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(cols + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    pairs = [(match[j] - 1, j - 1) for j in range(1, cols + 1) if match[j]]
    return sorted((c, r) if transposed else (r, c) for r, c in pairs)


def score_image(predicted: Sequence, truth: Sequence, image_size: tuple[float, float]) -> LaneScore:
    """CULane counts for one image: predicted and true lanes as [M, 2] (x, y) points in its pixels."""
    if not len(predicted) or not len(truth):
        return LaneScore(0, len(predicted), len(truth))
    ious = iou_matrix(predicted, truth, image_size)
    matched = sum(1 for i, j in assignment(1.0 - ious) if ious[i, j] >= IOU_THRESHOLD)
    return LaneScore(matched, len(predicted) - matched, len(truth) - matched)


def culane_score(predictions: Sequence[Sequence], truths: Sequence[Sequence], image_size: tuple[float, float]
                 ) -> LaneScore:
    """CULane counts summed over images (one list of lanes per image, all of ``image_size``)."""
    if len(predictions) != len(truths):
        raise LaneError(f"{len(predictions)} predicted images but {len(truths)} annotated ones",
                        hint="give one list of lanes per image on both sides")
    total = LaneScore(0, 0, 0)
    for predicted, truth in zip(predictions, truths):
        total = total + score_image(predicted, truth, image_size)
    return total


def _proposals(outputs: Mapping[str, np.ndarray]) -> np.ndarray:
    from orinkit.lanes.postprocess import PROPOSAL_SIZE

    for value in outputs.values():
        value = np.asarray(value)
        if value.ndim >= 2 and value.shape[-1] == PROPOSAL_SIZE:
            return value.reshape(-1, value.shape[-2], PROPOSAL_SIZE)
    raise LaneError(f"the lanes metric needs LaneATT proposals [.., N, {PROPOSAL_SIZE}]; the outputs are "
                    + ", ".join(f"{n} {list(np.shape(v))}" for n, v in outputs.items()),
                    hint="use --metric lanes only on a LaneATT model")


# FP16's rounding moves a score by far less than this; a lane kept by one side and scored within it by the other
# is a decision FP32 itself made by a hair (0.51 against 0.49, or one of two overlapping lanes of equal score).
SCORE_MARGIN = 0.05


def _agreeing(kept, own_scores, other, other_scores, size) -> int:
    """How many lanes of ``kept`` (a LaneResult) the other side's proposals at the same anchors reproduce: the
    other score within :data:`SCORE_MARGIN`, the other decoding drawn alike (CULane IoU >= 0.5)."""
    from orinkit.lanes.postprocess import decode

    count = 0
    for lane, index in zip(kept.lanes, kept.indices):
        if abs(own_scores[index] - other_scores[index]) > SCORE_MARGIN:
            continue
        points = decode(other[index], size[1]) * (size[1], size[0])
        if len(points) and iou_matrix([lane], [points], size)[0, 0] >= IOU_THRESHOLD:
            count += 1
    return count


def lane_agreement(reference: Sequence[Mapping[str, np.ndarray]], candidate: Sequence[Mapping[str, np.ndarray]]):
    """The FP16 gate's ``--metric lanes``: FP32's and FP16's proposals are decoded with the CULane settings (score
    above 0.5, NMS at 50 pixels, 4 lanes). Each lane either side keeps agrees when the other side's proposal at
    the same anchor scores within :data:`SCORE_MARGIN` of it and decodes to a lane drawn alike (CULane's rule:
    30 pixels wide at 1640x590, IoU >= 0.5). Which of two near-equal lanes wins the NMS, or whether a lane at the
    threshold is kept, is thus no disagreement, while FP16 that moves scores or lanes is. The agreement is the
    share of all kept lanes, of both sides, that agree."""
    from orinkit.convert.fp16.task_metrics import MetricResult
    from orinkit.lanes.postprocess import PostprocessOptions, postprocess, scores

    options = PostprocessOptions()
    size = (options.img_h, options.img_w)
    agree32 = total32 = agree16 = total16 = images = 0
    for ref, got in zip(reference, candidate):
        for fp32, fp16 in zip(_proposals(ref), _proposals(got)):
            images += 1
            s32, s16 = scores(fp32), scores(fp16)
            kept32, kept16 = postprocess(fp32, size, options), postprocess(fp16, size, options)
            agree32 += _agreeing(kept32, s32, fp16, s16, size)
            agree16 += _agreeing(kept16, s16, fp32, s32, size)
            total32 += len(kept32.lanes)
            total16 += len(kept16.lanes)
    if total32 == 0:
        raise LaneError(
            f"the lanes metric found no lane in the FP32 outputs of the {images} sample(s): with nothing to "
            "compare it proves nothing",
            hint="give --data with frames that show roads (an .npz holding [N, 3, 360, 640] BGR images in 0..1)")
    agreement = (agree32 + agree16) / (total32 + total16)
    return MetricResult("lanes", agreement, True, f"{images} image(s): {agree32} of {total32} FP32 lanes and "
                        f"{agree16} of {total16} FP16 lanes reproduced by the other")
