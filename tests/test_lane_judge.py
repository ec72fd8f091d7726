"""The judge renderer (orinkit.lanes.judge_roads): pure in its seed, every size, lanes that lie on painted lines,
judge_f1 at its two ends, and a readable road video with its truth."""

from __future__ import annotations

import json

import numpy as np
import pytest

from orinkit.lanes.errors import LaneInputError
from orinkit.lanes.judge_roads import (
    JUDGE_SEED,
    JUDGE_SIZES,
    judge_f1,
    judge_set,
    judge_video,
    render_judge_road,
    truth_path,
)

SMALL = ((320, 180), (410, 148), (160, 120))  # the judge's three aspect ratios, cheap to draw


@pytest.fixture(scope="module")
def full_size_roads():
    """One road at each of JUDGE_SIZES (seeds chosen to hold solid lines of both colours and a dashed one)."""
    return list(judge_set(3, seed=JUDGE_SEED + 9))


def test_the_same_seed_draws_the_same_road_and_another_seed_another():
    first, again = render_judge_road(JUDGE_SEED + 2, 320, 180), render_judge_road(JUDGE_SEED + 2, 320, 180)
    other = render_judge_road(JUDGE_SEED + 3, 320, 180)
    assert np.array_equal(first.image, again.image)
    assert len(first.lanes) == len(again.lanes) and all(np.array_equal(a, b) for a, b in zip(first.lanes, again.lanes))
    assert first.image.shape == other.image.shape
    assert np.abs(first.image.astype(int) - other.image.astype(int)).mean() > 10
    assert first.scene != other.scene or len(first.lanes) != len(other.lanes)


def test_every_judge_size_is_drawn_with_lanes_inside_it_in_order(full_size_roads):
    assert [road.size for road in full_size_roads] == list(JUDGE_SIZES)
    for road in full_size_roads:
        width, height = road.size
        assert road.image.shape == (height, width, 3) and road.image.dtype == np.uint8
        assert 2 <= len(road.lanes) <= 6, (road.seed, road.scene)
        assert len(road.scene["lanes"]) == len(road.lanes)
        for lane in road.lanes:
            assert lane.ndim == 2 and lane.shape[1] == 2 and len(lane) >= 3
            assert (lane[:, 0] >= 0).all() and (lane[:, 0] <= width - 1).all()
            assert (lane[:, 1] >= 0).all() and (lane[:, 1] <= height - 1).all()
            steps = -np.diff(lane[:, 1])
            assert (steps > 0).all() and (steps[:-1] == 10).all(), "a point every 10 rows, bottom first"
            assert lane[0, 1] - lane[-1, 1] >= 0.05 * height
        for left, right in zip(road.lanes[:-1], road.lanes[1:]):
            low, high = max(left[-1, 1], right[-1, 1]), min(left[0, 1], right[0, 1])
            rows = np.arange(high, low, -5.0)
            if len(rows):
                at_left = np.interp(rows, left[::-1, 1], left[::-1, 0])
                at_right = np.interp(rows, right[::-1, 1], right[::-1, 0])
                assert (at_left < at_right).all(), f"seed {road.seed}: lanes not left to right"


def _brightness(image: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    xi, yi = np.clip(np.round(x).astype(int), 0, w - 1), np.clip(np.round(y).astype(int), 0, h - 1)
    return image[yi, xi].astype(float).mean(axis=1)


def test_the_truth_lies_on_painted_lines(full_size_roads):
    """Along a solid line's truth the image is brighter than the road a line's width or two beside it, on most
    rows of the near half of the lane (where the paint is several pixels wide); dashed lines less often; and the
    same test a lane's width away from the truth (on bare road) fails."""
    solid, dashed, beside = [], [], []
    for road in full_size_roads:
        width = road.size[0]
        for lane, style in zip(road.lanes, road.scene["lanes"]):
            near = lane[: max(3, len(lane) // 2)]
            x, y = near[:, 0], near[:, 1]
            gap = max(6.0, 0.012 * width)
            on = _brightness(road.image, x, y)
            off = np.maximum(_brightness(road.image, x - gap, y), _brightness(road.image, x + gap, y))
            keep = (x - gap >= 0) & (x + gap <= width - 1)
            brighter = (on > off + 8)[keep]
            if style["style"] == "solid":
                solid.extend(brighter)
            elif style["style"] == "dashed":
                dashed.extend(brighter)
            shifted = x + 0.08 * width
            ok = (shifted + gap <= width - 1)
            beside.extend((_brightness(road.image, shifted, y) > np.maximum(
                _brightness(road.image, shifted - gap, y), _brightness(road.image, shifted + gap, y)) + 8)[ok])
    assert len(solid) >= 20 and len(dashed) >= 5
    assert np.mean(solid) >= 0.75, f"solid lines brighter than the road beside them on {np.mean(solid):.0%} of rows"
    assert np.mean(dashed) >= 0.15
    assert np.mean(beside) <= 0.15, f"bare road passes the same test on {np.mean(beside):.0%} of rows"


def test_judge_f1_of_a_perfect_detector_is_one_and_of_a_blind_one_zero():
    truth = {road.image.tobytes(): road.lanes for road in judge_set(6, sizes=SMALL)}
    perfect = judge_f1(lambda image: truth[image.tobytes()], 6, sizes=SMALL)
    assert perfect["overall"].f1 == 1.0 and perfect["overall"].true_positives == sum(map(len, truth.values()))
    assert set(perfect["by_size"]) == {"320x180", "410x148", "160x120"}
    assert all(score.f1 == 1.0 and score.true_positives > 0 for score in perfect["by_size"].values())
    blind = judge_f1(lambda image: [], 6, sizes=SMALL)
    assert blind["overall"].f1 == 0.0 and blind["overall"].false_negatives == perfect["overall"].true_positives
    # Lanes one lane's width off are not the lanes: each counts once as extra and once as missed.
    shifted = judge_f1(lambda image: [lane + (0.25 * image.shape[1], 0) for lane in truth[image.tobytes()]], 6,
                       sizes=SMALL)
    assert shifted["overall"].f1 < 0.2


def test_judge_video_is_a_readable_mp4_of_a_smooth_drive(tmp_path):
    import av

    path = tmp_path / "judge.mp4"
    truth = judge_video(path, frames=8, fps=15, width=320, height=180, seed=JUDGE_SEED + 2)
    with av.open(str(path)) as container:
        images = [frame.to_ndarray(format="bgr24") for frame in container.decode(video=0)]
    assert len(images) == len(truth) == 8 and images[0].shape == (180, 320, 3)
    assert truth.size == (320, 180) and truth.fps == 15
    records = [json.loads(line) for line in truth_path(path).read_text().splitlines()]
    assert [r["frame"] for r in records] == list(range(8))
    assert all(np.allclose(np.asarray(r["lanes"][0]), lanes[0]) for r, lanes in zip(records, truth))
    # The car moves forward: frames differ, but each lane's bottom moves by a few pixels a frame at most.
    assert np.abs(images[0].astype(int) - images[7].astype(int)).mean() > 2
    for before, after in zip(truth[:-1], truth[1:]):
        assert len(before) == len(after)
        for a, b in zip(before, after):
            assert abs(a[0, 0] - b[0, 0]) < 6 and abs(a[0, 1] - b[0, 1]) < 11
    assert not list(tmp_path.glob(".*.part"))
    # The same scoring as a road_video's: edge-stream's records of the true lanes score 1.0 against it.
    from orinkit.lanes.video import lane_f1

    records = [{"frame": i, "lanes": [{"points": lane.tolist()} for lane in lanes]} for i, lanes in enumerate(truth)]
    assert lane_f1(records, truth).f1 == 1.0 and lane_f1(records[:1], truth).frames == 1


@pytest.mark.parametrize("call", [
    lambda: render_judge_road(-1),
    lambda: render_judge_road(1, 32, 720),
    lambda: render_judge_road(1, 1280.0, 720),
    lambda: list(judge_set(2, sizes=())),
    lambda: judge_video("x.mp4", width=321, height=180),
])
def test_bad_arguments_are_refused_with_a_hint(call):
    with pytest.raises(LaneInputError) as caught:
        call()
    assert caught.value.hint
