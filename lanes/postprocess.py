"""LaneATT post-processing: raw proposals [N, 77] -> lanes, with the reference implementation's semantics.

Reproduces lucastabelini/LaneATT (MIT licence): the score threshold of ``LaneATT.nms``, the greedy NMS of
``lib/nms/src/nms_kernel.cu`` and the decoding of ``LaneATT.proposals_to_pred``. Their edge cases are kept too,
also on inputs a trained head never produces (start_y outside [0, 1], negative lengths), so that any proposal set
gives what the reference gives. numpy only: it is inlined into the lane_postprocess model.py that runs inside
Triton's Python backend.

A proposal is [logit0, logit1, start_y, start_x, length, x_0 ... x_71]: start_y normalised, length in rows, x_i in
pixels of the network input at row i, whose normalised y is 1 - i / 71 (row 0 is the bottom of the image).

Choices where the reference leaves freedom or has none to give:

- Proposals are taken as float32 (what the head emits and the reference computed in); scores are float64.
- Equal scores keep their index order (a stable sort); the reference's CUDA sort leaves their order unspecified.
- Rounding in decoding is Python's ``round`` (half to even), as the reference's ``round()``/``torch.round``;
  the NMS rows use the kernel's own ``(int)(v + 0.5)`` truncation.
- Where the kernel's ``(int)`` cast is undefined (NaN, beyond int32) a lane overlaps nothing, and where the
  reference's ``round()`` raises (NaN or infinite start_y or length) the lane decodes to nothing.
- Points of a lane are listed bottom row first; the reference lists the same points top first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

try:
    from orinkit.lanes.errors import LaneInputError
except ImportError:  # inlined into the server's model.py, where orinkit need not be installed

    class LaneInputError(ValueError):
        """Proposals, sizes or options that post-processing cannot use."""


N_OFFSETS = 72
N_STRIPS = N_OFFSETS - 1
PROPOSAL_SIZE = 5 + N_OFFSETS
ROW_YS = 1.0 - np.arange(N_OFFSETS) / N_STRIPS


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _is_integer(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class PostprocessOptions:
    conf_threshold: float = 0.5  # a lane needs a score strictly above this
    nms_threshold: float = 50.0  # mean x gap (input pixels) below which two lanes are one
    top_k: int = 4
    img_w: int = 640  # the network input's size: x_i are pixels of this width
    img_h: int = 360  # y comes from the row index, so decoding needs no height; kept to describe the input

    def __post_init__(self) -> None:
        for name in ("conf_threshold", "nms_threshold"):
            value = getattr(self, name)
            if not _is_number(value) or not math.isfinite(value):
                raise LaneInputError(f"{name} must be a finite number, got {value!r}")
        if not 0.0 <= self.conf_threshold <= 1.0:
            raise LaneInputError(f"conf_threshold must lie in [0, 1] (a probability), got {self.conf_threshold!r}")
        if self.nms_threshold < 0:
            raise LaneInputError(f"nms_threshold must be >= 0 pixels, got {self.nms_threshold!r}")
        for name in ("top_k", "img_w", "img_h"):
            value = getattr(self, name)
            if not _is_integer(value) or value < 1:
                raise LaneInputError(f"{name} must be a positive integer, got {value!r}")


def _as_proposals(proposals) -> np.ndarray:
    array = np.asarray(proposals)
    if array.ndim != 2 or array.shape[1] != PROPOSAL_SIZE:
        raise LaneInputError(f"proposals must have shape [N, {PROPOSAL_SIZE}], got {list(array.shape)}")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise LaneInputError(f"proposals must be numbers, got dtype {array.dtype}")
    return array.astype(np.float32, copy=False)


def _check_top_k(top_k) -> None:
    if not _is_integer(top_k) or top_k < 1:
        raise LaneInputError(f"top_k must be a positive integer, got {top_k!r}")


def scores(proposals) -> np.ndarray:
    """softmax(logits)[1] of each proposal ([..., 77] -> [...]), float64."""
    array = np.asarray(proposals)
    if array.ndim < 1 or array.shape[-1] != PROPOSAL_SIZE:
        raise LaneInputError(f"proposals must have shape [..., {PROPOSAL_SIZE}], got {list(array.shape)}")
    logits = array[..., :2].astype(np.float64)  # the two logits only: the whole array in float64 is 2 MB a frame
    # This form cannot overflow into inf / inf: a huge gap makes exp() inf and the score exactly 0.
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(logits[..., 0] - logits[..., 1]))


def _row_ranges(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each lane's first and last row as nms_kernel.cu computes them, and where C's int cast is defined."""
    start_y, length = p[:, 2], p[:, 4]
    one = np.float32(1)
    with np.errstate(invalid="ignore", over="ignore"):
        # The kernel multiplies and adds in float32 and only then adds 0.5 in double; the cast truncates toward
        # zero, and "- (L - 1 < 0)" is its fix for lengths below one.
        first = np.trunc((start_y * np.float32(N_STRIPS)).astype(np.float64) + 0.5)
        last = np.trunc(((first.astype(np.float32) + length) - one).astype(np.float64) + 0.5 - (length - one < 0))
    valid = (np.abs(first) < 2**31) & (np.abs(last) < 2**31)
    return np.where(valid, first, 0).astype(np.int64), np.where(valid, last, 0).astype(np.int64), valid


_COLUMNS = np.arange(PROPOSAL_SIZE)
SUM_DOWN_ROWS = 8


def _overlaps(p, first, last, valid, k: int, others: np.ndarray, threshold: float) -> np.ndarray:
    """nms_kernel.cu's devIoU of lane k against each of ``others``."""
    start = np.maximum(first[others], first[k])
    end = np.minimum(np.minimum(last[others], last[k]), N_STRIPS)
    # The kernel walks columns 5 + start .. 5 + end of the whole 77-value row with an unsigned char: a start
    # below 0 (start_y < 0, which a LaneATT head never emits) reads the header fields or wraps modulo 256.
    low = (5 + start) % 256
    inside = (_COLUMNS >= low[:, None]) & (_COLUMNS <= 5 + end[:, None])
    with np.errstate(invalid="ignore", over="ignore"):
        gaps = np.where(inside, np.abs(p[others] - p[k]), np.float32(0))
        # The sums must add in float32 and in the kernel loop's order to agree to the bit. A cumsum along each row
        # does; so does a sum down the rows of the transposed copy (numpy adds row after row when the rows are
        # the outer loop), 20x faster: the cumsum was 90 % of the time with 2784 candidates. With a single row,
        # numpy would sum that contiguous column pairwise instead, so few rows take the cumsum.
        if len(others) < SUM_DOWN_ROWS:
            dist = np.cumsum(gaps, axis=1)[:, -1]
        else:
            dist = np.add.reduce(np.ascontiguousarray(gaps.T), axis=0)
        limit = np.float32(threshold) * (end - start + 1).astype(np.float32)
        return valid[others] & valid[k] & (end >= start) & (dist < limit)


def nms(proposals, scores, threshold: float, top_k: int) -> np.ndarray:
    """Indices of the lanes greedy NMS keeps, best first (at most ``top_k``).

    Lanes are visited by descending score, equal scores in index order; a NaN score sorts last. Each kept lane
    suppresses the later lanes it overlaps: over their common rows, mean |x_a - x_b| below ``threshold`` pixels.
    """
    p = _as_proposals(proposals)
    score = np.asarray(scores, dtype=np.float64)
    if score.shape != (len(p),):
        raise LaneInputError(f"scores must have shape [{len(p)}] (one per proposal), got {list(score.shape)}")
    if not _is_number(threshold) or math.isnan(threshold):
        raise LaneInputError(f"threshold must be a number, got {threshold!r}")
    _check_top_k(top_k)
    first, last, valid = _row_ranges(p)
    pending = np.argsort(-score, kind="stable")
    keep = []
    while pending.size and len(keep) < top_k:
        k, pending = pending[0], pending[1:]
        keep.append(k)
        pending = pending[~_overlaps(p, first, last, valid, k, pending, threshold)]
    return np.asarray(keep, dtype=np.int64)


def decode(proposal, img_w: int = 640) -> np.ndarray:
    """A proposal's points [M, 2] as normalised (x, y), bottom row first; [0, 2] when the lane is dropped."""
    p = np.asarray(proposal).astype(np.float32, copy=False)
    if p.shape != (PROPOSAL_SIZE,):
        raise LaneInputError(f"a proposal must have shape [{PROPOSAL_SIZE}], got {list(p.shape)}")
    if not _is_integer(img_w) or img_w < 1:
        raise LaneInputError(f"img_w must be a positive integer, got {img_w!r}")
    empty = np.empty((0, 2))
    start_y, length = float(p[2]), float(p[4])
    if not (math.isfinite(start_y) and math.isfinite(length)):
        return empty
    xs = p[5:] / np.float32(img_w)
    start = round(start_y * N_STRIPS)
    end = min(start + round(length) - 1, N_STRIPS)
    # Clipping to +-73 changes no slice below but keeps absurd values out of numpy's index range.
    start, after = (min(max(v, -N_OFFSETS - 1), N_OFFSETS + 1) for v in (start, end + 1))
    # The reference slices with these as Python bounds, so a negative start or end + 1 counts from the top
    # (xs[:-3] is all but the top 3 rows); that is kept, to give the reference's lanes.
    # The reference drops points left of the image only; points right of it (x > 1) are no pixel of the image
    # either, and a user printing or drawing lanes must not get them.
    keep = (xs >= 0) & (xs <= 1)
    keep[after:] = False
    below = xs[:start]
    # Below its start a lane is extended down only while it stays inside the image.
    keep[:start] &= np.logical_and.accumulate(((below >= 0) & (below <= 1))[::-1])[::-1]
    rows = np.flatnonzero(keep)
    if rows.size <= 1:
        return empty
    return np.stack([xs[rows].astype(np.float64), ROW_YS[rows]], axis=1)


@dataclass(frozen=True)
class LaneResult:
    lanes: list  # [M, 2] float64 (x, y) in the original image's pixels, bottom row first; best lane first
    scores: np.ndarray  # [len(lanes)] float64
    indices: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))  # the lanes' proposal rows

    def fixed(self, top_k: int, n_points: int = N_OFFSETS) -> tuple[np.ndarray, np.ndarray, np.int32]:
        """Fixed-size arrays for a tensor output: points [top_k, n_points, 2] float32, each lane's points first
        and NaN after; scores [top_k] float32, 0 past the lanes (a score no kept lane can have, since it must
        beat conf_threshold >= 0); count, the lanes written (the best ``top_k``)."""
        _check_top_k(top_k)
        if not _is_integer(n_points) or n_points < 1:
            raise LaneInputError(f"n_points must be a positive integer, got {n_points!r}")
        points = np.full((top_k, n_points, 2), np.nan, dtype=np.float32)
        fixed_scores = np.zeros(top_k, dtype=np.float32)
        count = min(len(self.lanes), top_k)
        for index, lane in enumerate(self.lanes[:count]):
            if len(lane) > n_points:
                raise LaneInputError(f"lane {index} has {len(lane)} points, more than n_points={n_points}")
            points[index, : len(lane)] = lane
        fixed_scores[:count] = self.scores[:count]
        return points, fixed_scores, np.int32(count)


def _check_size(original_size) -> tuple[float, float]:
    size = np.asarray(original_size)
    if size.shape != (2,) or not np.issubdtype(size.dtype, np.number):
        raise LaneInputError(f"original_size must be (height, width), got {original_size!r}")
    height, width = float(size[0]), float(size[1])
    if not (math.isfinite(height) and math.isfinite(width) and height > 0 and width > 0):
        raise LaneInputError(f"original_size must be two positive numbers (height, width), got {original_size!r}")
    return height, width


def postprocess(proposals, original_size, options: PostprocessOptions = PostprocessOptions()) -> LaneResult:
    """Threshold, NMS and decode one image's proposals; points are stretched onto the original image
    (``original_size`` is (height, width)), as the network input was a plain resize of it."""
    p = _as_proposals(proposals)
    height, width = _check_size(original_size)
    score = scores(p)
    candidates = np.flatnonzero(score > options.conf_threshold)
    kept = candidates[nms(p[candidates], score[candidates], options.nms_threshold, options.top_k)]
    lanes, indices = [], []
    for index in kept:
        points = decode(p[index], options.img_w)
        # As in the reference, a lane too short to draw is dropped after NMS, without taking the next one.
        if len(points):
            lanes.append(points * (width, height))
            indices.append(index)
    indices = np.asarray(indices, dtype=np.int64)
    return LaneResult(lanes=lanes, scores=score[indices], indices=indices)


def postprocess_batch(proposals, original_sizes, options: PostprocessOptions = PostprocessOptions()):
    """Per-image ``postprocess`` of [B, N, 77] proposals and [B, 2] (height, width) sizes, as fixed arrays:
    points [B, top_k, 72, 2] float32 (NaN padded), scores [B, top_k] float32 (0 padded), counts [B] int32."""
    batch = np.asarray(proposals)
    sizes = np.asarray(original_sizes)
    if batch.ndim != 3 or batch.shape[2] != PROPOSAL_SIZE:
        raise LaneInputError(f"proposals must have shape [B, N, {PROPOSAL_SIZE}], got {list(batch.shape)}")
    if sizes.shape != (len(batch), 2):
        raise LaneInputError(f"original sizes must have shape [{len(batch)}, 2] (height, width per image), "
                         f"got {list(sizes.shape)}")
    k = options.top_k
    points = np.empty((len(batch), k, N_OFFSETS, 2), dtype=np.float32)
    lane_scores = np.empty((len(batch), k), dtype=np.float32)
    counts = np.empty(len(batch), dtype=np.int32)
    for b in range(len(batch)):
        try:
            result = postprocess(batch[b], sizes[b], options)
        except ValueError as exc:
            raise LaneInputError(f"image {b}: {exc}") from None
        points[b], lane_scores[b], counts[b] = result.fixed(k)
    return points, lane_scores, counts
