"""The CULane lane metric on hand-made cases, at CULane's size and scaled to others."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from orinkit.lanes.errors import LaneError
from orinkit.lanes.metrics import LaneScore, assignment, culane_score, iou_matrix, score_image

SIZE = (590, 1640)  # CULane's own: height, width


def lane(x_bottom: float, x_top: float, size=SIZE, top=0.4) -> np.ndarray:
    """A straight lane from the bottom row up to ``top`` of the height, x in pixels of ``size``."""
    height = size[0]
    ys = np.linspace(height - 1, height * top, 40)
    return np.stack([np.linspace(x_bottom, x_top, ys.size), ys], axis=1)


ROAD = [lane(300, 700), lane(800, 820), lane(1300, 950)]


def test_exact_match():
    score = score_image(ROAD, ROAD, SIZE)
    assert (score.true_positives, score.false_positives, score.false_negatives) == (3, 0, 0)
    assert score.f1 == 1.0 and np.allclose(np.diag(iou_matrix(ROAD, ROAD, SIZE)), 1.0)


def test_a_lane_shifted_by_less_than_a_third_of_its_width_matches_and_by_more_does_not():
    # Two vertical 30 px wide bands d apart overlap in 30 - d: IoU (30 - d) / (30 + d) >= 0.5 up to d = 10 px.
    truth = [lane(300, 300)]
    near, far = [lane(308, 308)], [lane(325, 325)]
    assert iou_matrix(near, truth, SIZE)[0, 0] == pytest.approx(22 / 38, abs=0.02)
    assert score_image(near, truth, SIZE).true_positives == 1
    shifted = score_image(far, truth, SIZE)
    assert (shifted.true_positives, shifted.false_positives, shifted.false_negatives) == (0, 1, 1)


def test_missing_lane_is_a_false_negative():
    score = score_image(ROAD[:2], ROAD, SIZE)
    assert (score.true_positives, score.false_positives, score.false_negatives) == (2, 0, 1)
    assert score.precision == 1.0 and score.recall == pytest.approx(2 / 3) and score.f1 == pytest.approx(0.8)


def test_extra_lane_is_a_false_positive():
    score = score_image([*ROAD, lane(50, 500)], ROAD, SIZE)
    assert (score.true_positives, score.false_positives, score.false_negatives) == (3, 1, 0)
    assert score.precision == pytest.approx(0.75) and score.recall == 1.0


def test_no_lanes_on_either_side():
    assert score_image([], [], SIZE) == LaneScore(0, 0, 0)
    assert LaneScore(0, 0, 0).f1 == 1.0
    assert score_image([], ROAD, SIZE).recall == 0.0 and score_image(ROAD, [], SIZE).precision == 0.0


def test_one_prediction_covering_two_lanes_matches_one_of_them():
    between = [lane(300, 700), lane(320, 720)]  # two near-identical predictions for one true lane
    score = score_image(between, [ROAD[0]], SIZE)
    assert (score.true_positives, score.false_positives, score.false_negatives) == (1, 1, 0)


def test_the_width_scales_with_the_image():
    """The same scene at 1280x720 and 640x360 gives the same IoU as at 1640x590: lanes are scaled onto
    CULane's canvas, so a shift of the same fraction of the width counts the same."""
    base = iou_matrix([lane(308, 708)], [ROAD[0]], SIZE)[0, 0]
    for size in ((720, 1280), (360, 640)):
        scale = (size[1] / SIZE[1], size[0] / SIZE[0])
        found, truth = lane(308, 708) * scale, ROAD[0] * scale
        assert iou_matrix([found], [truth], size)[0, 0] == pytest.approx(base, abs=0.02)


def test_scores_add_over_images():
    total = culane_score([ROAD, ROAD[:1]], [ROAD, ROAD], SIZE)
    assert (total.true_positives, total.false_positives, total.false_negatives) == (4, 0, 2)
    with pytest.raises(LaneError, match="2 predicted images but 1"):
        culane_score([ROAD, ROAD], [ROAD], SIZE)


def test_hungarian_assignment_is_optimal():
    rng = np.random.default_rng(0)
    for rows, cols in ((3, 3), (2, 5), (5, 2), (6, 6), (1, 4)):
        cost = rng.random((rows, cols))
        pairs = assignment(cost)
        brute = min(sum(cost[r, c] for r, c in zip(chosen, columns))
                    for chosen in itertools.permutations(range(rows), min(rows, cols))
                    for columns in itertools.permutations(range(cols), min(rows, cols)))
        assert len(pairs) == min(rows, cols)
        assert sum(cost[r, c] for r, c in pairs) == pytest.approx(brute)


def test_bad_lanes_are_refused():
    with pytest.raises(LaneError, match=r"\[M, 2\]"):
        score_image([np.zeros((3, 3))], ROAD, SIZE)
    with pytest.raises(LaneError, match="image_size"):
        iou_matrix(ROAD, ROAD, (0, 100))
