"""LaneATT post-processing (lanes/postprocess.py) against a plain-loop transcription of the reference
(lucastabelini/LaneATT: lib/nms/src/nms_kernel.cu and LaneATT.proposals_to_pred)."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def load(name: str, path: Path):
    # Loaded by path so that these tests need no installed orinkit.lanes.
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


pp = load("lane_postprocess", ROOT / "lanes" / "postprocess.py")

F = np.float32
W = 640


# ---- the reference, one proposal pair and one row at a time -------------------------------------------------

def ref_scores(proposals) -> list[float]:
    out = []
    for l0, l1 in np.asarray(proposals, dtype=np.float64)[:, :2].tolist():
        m = max(l0, l1)
        out.append(math.exp(l1 - m) / (math.exp(l0 - m) + math.exp(l1 - m)))
    return out


def c_int(value: float):
    """C's (int) cast of a double: truncation toward zero; None where C leaves it undefined."""
    if not math.isfinite(value) or abs(value) >= 2**31:
        return None
    return math.trunc(value)


def ref_dev_iou(a, b, threshold: float) -> bool:
    """devIoU of nms_kernel.cu, operation by operation (float where it has float, double where it has double)."""
    start_a = c_int(float(F(a[2]) * F(71) - F(0)) + 0.5)
    start_b = c_int(float(F(b[2]) * F(71) - F(0)) + 0.5)
    if start_a is None or start_b is None:
        return False
    start = max(start_a, start_b)
    end_a = c_int(float(F(start_a) + F(a[4]) - F(1)) + 0.5 - int(F(a[4]) - F(1) < 0))
    end_b = c_int(float(F(start_b) + F(b[4]) - F(1)) + 0.5 - int(F(b[4]) - F(1) < 0))
    if end_a is None or end_b is None:
        return False
    end = min(min(end_a, end_b), 72 - 1)
    if end < start:
        return False
    limit = F(threshold) * F(end - start + 1)
    dist = F(0)
    i = (5 + start) & 0xFF  # unsigned char i
    while i <= 5 + end:
        if F(a[i]) < F(b[i]):
            dist = dist + (F(b[i]) - F(a[i]))
        else:
            dist = dist + (F(a[i]) - F(b[i]))
        if dist >= limit:  # only for speed: adding gaps >= 0 never lowers a float sum
            return False
        i = (i + 1) & 0xFF
    return bool(dist < limit)


def ref_nms(proposals, score: list[float], threshold: float, top_k: int) -> list[int]:
    """nms_forward + nms_collect: sort by descending score (ties: lower index first), greedy keep."""
    rows = np.asarray(proposals, dtype=np.float32).tolist()
    order = sorted(range(len(rows)), key=lambda i: -score[i])
    removed = [False] * len(order)
    keep = []
    for pos, i in enumerate(order):
        if removed[pos]:
            continue
        keep.append(i)
        if len(keep) == top_k:
            break
        for later in range(pos + 1, len(order)):
            if not removed[later] and ref_dev_iou(rows[i], rows[order[later]], threshold):
                removed[later] = True
    return keep


def ref_decode(proposal, img_w: int = W) -> list[tuple[float, float]]:
    """proposals_to_pred for one lane, row by row; points bottom row first."""
    lane = np.asarray(proposal, dtype=np.float32)
    xs = [F(x) / F(img_w) for x in lane[5:]]
    start = int(round(float(lane[2]) * 71))
    length = int(round(float(lane[4])))
    end = min(start + length - 1, 71)
    keep = [True] * 72
    for i in range(*slice(end + 1, None).indices(72)):  # lane_xs[end + 1:] = -2, Python slice bounds
        keep[i] = False
    inside = True
    for i in reversed(range(*slice(None, start).indices(72))):  # lane_xs[:start], from start - 1 down
        inside = inside and 0 <= xs[i] <= 1
        keep[i] = keep[i] and inside
    # The reference keeps points right of the image (x > 1); orinkit drops them like those left of it (x < 0),
    # so that every lane point is a pixel of the image.
    points = [(float(xs[i]), 1 - i / 71) for i in range(72) if keep[i] and 0 <= xs[i] <= 1]
    return points if len(points) > 1 else []


def ref_postprocess(proposals, conf: float, threshold: float, top_k: int):
    score = ref_scores(proposals)
    candidates = [i for i, s in enumerate(score) if s > conf]
    kept = [candidates[j] for j in ref_nms(np.asarray(proposals)[candidates], [score[i] for i in candidates],
                                           threshold, top_k)]
    lanes = [(i, ref_decode(proposals[i])) for i in kept]
    return kept, [(i, points) for i, points in lanes if points]


# ---- random proposal sets with the awkward cases -------------------------------------------------------------

ANCHOR_STARTS = (1 - np.linspace(1, 0, 72, dtype=np.float32)).astype(np.float32)


def random_set(rng: np.random.Generator, n: int) -> np.ndarray:
    p = np.zeros((n, 77), dtype=np.float32)
    p[:, :2] = rng.normal(0, 2, size=(n, 2))
    if rng.random() < 0.1:
        p[:, 1] -= 20  # nothing above the threshold
    ties = rng.integers(0, n, size=n // 5)
    p[ties, :2] = p[rng.integers(0, n), :2]  # equal scores
    start_y = rng.choice(ANCHOR_STARTS, size=n)
    odd = rng.random(n)
    start_y[odd < 0.15] = rng.uniform(-0.3, 1.3, size=(odd < 0.15).sum())
    start_y[odd < 0.03] = rng.uniform(-8, 8, size=(odd < 0.03).sum())  # wraps the kernel's unsigned char
    p[:, 2] = start_y
    p[:, 3] = rng.random(n)
    length = rng.uniform(-10, 80, size=n)
    kind = rng.random(n)
    length[kind < 0.3] = np.round(length[kind < 0.3])
    length[kind < 0.2] = np.round(length[kind < 0.2]) + 0.5  # half-way rounding
    length[kind < 0.1] = rng.choice([-1.0, 0.0, 0.5, 1.0, 1.5, 2.0], size=(kind < 0.1).sum())
    p[:, 4] = length
    # Lanes in a few clusters, so that NMS has something to suppress; some run off the image.
    bases = rng.uniform(-200, 840, size=(6, 1)) + rng.uniform(-6, 6, size=(6, 1)) * np.arange(72)
    p[:, 5:] = bases[rng.integers(0, 6, size=n)] + rng.normal(0, rng.choice([2.0, 20.0, 60.0]), size=(n, 72))
    return p


def assert_matches_reference(p, conf, threshold, top_k):
    score = pp.scores(p)
    candidates = np.flatnonzero(score > conf)
    kept_ref, lanes_ref = ref_postprocess(p, conf, threshold, top_k)
    kept = candidates[pp.nms(p[candidates], score[candidates], threshold, top_k)]
    assert kept.tolist() == kept_ref
    height, width = 590, 1640
    result = pp.postprocess(p, (height, width), pp.PostprocessOptions(conf, threshold, top_k))
    assert result.indices.tolist() == [i for i, _ in lanes_ref]
    assert len(result.lanes) == len(lanes_ref)
    for lane, (index, points) in zip(result.lanes, lanes_ref):
        np.testing.assert_allclose(lane / (width, height), np.asarray(points), rtol=1e-12, atol=1e-12)
        assert result.scores[list(result.indices).index(index)] == pytest.approx(score[index])


def test_matches_reference_on_random_sets():
    rng = np.random.default_rng(20240607)
    kept_lanes = suppressed = 0
    for _ in range(300):
        p = random_set(rng, int(rng.integers(50, 301)))
        conf = float(rng.choice([0.0, 0.2, 0.5, 0.9]))
        threshold = float(rng.choice([0.0, 10.0, 45.0, 50.0, 200.0]))
        top_k = int(rng.choice([1, 2, 4, 5, 8, 1000]))
        assert_matches_reference(p, conf, threshold, top_k)
        kept = pp.postprocess(p, (360, 640), pp.PostprocessOptions(conf, threshold, top_k))
        kept_lanes += len(kept.lanes)
        suppressed += int((pp.scores(p) > conf).sum()) - len(kept.lanes)
    # The sets must exercise both outcomes, or the comparison proves little.
    assert kept_lanes > 500 and suppressed > 5000


def test_matches_reference_on_non_finite_values():
    rng = np.random.default_rng(7)
    for _ in range(20):
        p = random_set(rng, 80)
        for column in (2, 4, 10, 40, 76):
            rows = rng.integers(0, 80, size=5)
            p[rows, column] = rng.choice([np.nan, np.inf, -np.inf, 3e38], size=5)
        score = pp.scores(p)
        candidates = np.flatnonzero(score > 0.2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the loop's float32 scalars warn on inf - inf
            expected = ref_nms(p[candidates], list(score[candidates]), 50.0, 8)
        assert pp.nms(p[candidates], score[candidates], 50.0, 8).tolist() == expected
        for row in p:
            points = pp.decode(row)
            assert not np.isnan(points).any()  # an infinite x above the start is kept, as the reference does
            if np.isfinite(row[[2, 4]]).all():  # the reference's round() raises on the others
                np.testing.assert_array_equal(points, np.asarray(ref_decode(row)).reshape(-1, 2))
            else:
                assert points.shape == (0, 2)


# ---- hand-made cases ----------------------------------------------------------------------------------------

def lane(x0: float, slope: float = 0.0, *, start_y: float = 0.0, length: float = 72, logit: float = 5.0):
    row = np.zeros(77, dtype=np.float32)
    row[:5] = [0.0, logit, start_y, 0.5, length]
    row[5:] = x0 + slope * np.arange(72)
    return row


def test_nms_suppresses_close_lanes_and_keeps_far_ones():
    p = np.stack([lane(300, logit=3), lane(320, logit=4), lane(500, logit=2)])
    assert pp.nms(p, pp.scores(p), 50.0, 4).tolist() == [1, 2]
    assert pp.nms(p, pp.scores(p), 10.0, 4).tolist() == [1, 0, 2]
    assert pp.nms(p, pp.scores(p), 10.0, 2).tolist() == [1, 0]


def test_nms_rows_that_do_not_meet_never_overlap():
    low = lane(300, start_y=0.0, length=30)
    high = lane(300, start_y=40 / 71, length=30)
    p = np.stack([low, high])
    assert pp.nms(p, pp.scores(p), 50.0, 4).tolist() == [0, 1]


def test_nms_rows_use_the_kernels_float32_arithmetic():
    # 71 * this float32 is 0.5 when multiplied in float32, as the kernel does, but just below 0.5 in double:
    # the kernel puts this one-row lane on row 1, so it misses the identical lane on row 0.
    start_y = float(np.float32(0.007042253389954567))
    assert np.float32(start_y) * np.float32(71) == 0.5 and start_y * 71 < 0.5
    p = np.stack([lane(300, start_y=start_y, length=1), lane(300, length=1, logit=3)])
    assert pp.nms(p, pp.scores(p), 50.0, 4).tolist() == ref_nms(p, ref_scores(p), 50.0, 4) == [0, 1]


@pytest.mark.parametrize("crowd", [0, 30], ids=["two lanes", "with 30 more"])
def test_nms_adds_gaps_in_the_kernels_order(crowd):
    # Find two lanes whose float32 gap sum differs between in-order adds (the kernel) and numpy's pairwise
    # sum, and a threshold between the two: only the kernel's order gives the reference's answer. With a crowd
    # of lower-scored lanes the sums take postprocess's other path (down the rows of a transposed copy).
    rng = np.random.default_rng(0)
    for _ in range(100):
        a, b = rng.uniform(0, 640, (2, 72)).astype(np.float32)
        gaps = np.abs(a - b)
        in_order, pairwise = np.cumsum(gaps)[-1], gaps.sum()
        threshold = np.float32(float(max(in_order, pairwise)) / 72)
        for _ in range(50):
            limit = threshold * np.float32(72)
            if min(in_order, pairwise) < limit <= max(in_order, pairwise):
                break
            threshold = np.nextafter(threshold, np.float32(np.inf if limit <= min(in_order, pairwise) else -np.inf))
        else:
            continue
        p = np.stack([lane(0), lane(0, logit=3)] + [lane(0, logit=2) for _ in range(crowd)])
        p[0, 5:], p[1, 5:] = a, b
        p[2:, 5:] = rng.uniform(0, 640, (crowd, 72)).astype(np.float32)
        expected = ref_nms(p, ref_scores(p), float(threshold), 4)
        assert pp.nms(p, pp.scores(p), float(threshold), 4).tolist() == expected
        assert expected[0] == 0 and (1 in expected) == (in_order >= limit)
        return
    pytest.fail("no pair of lanes found whose gap sums differ")


def test_scores_must_beat_the_threshold_strictly():
    p = np.stack([lane(300, logit=0.0), lane(500, logit=1e-3)])
    assert pp.scores(p)[0] == 0.5
    assert pp.postprocess(p, (360, 640)).indices.tolist() == [1]


def test_nms_equal_scores_keep_index_order():
    p = np.stack([lane(100), lane(300), lane(500), lane(700)])
    assert pp.nms(p, np.full(4, 0.9), 50.0, 4).tolist() == [0, 1, 2, 3]
    assert pp.nms(p, np.array([0.5, 0.9, 0.5, 0.9]), 50.0, 4).tolist() == [1, 3, 0, 2]


def test_nms_on_nothing():
    assert pp.nms(np.zeros((0, 77), np.float32), np.zeros(0), 50.0, 4).tolist() == []


def test_decode_extends_down_only_inside_the_image():
    row = lane(100, slope=5, start_y=10 / 71, length=20)
    points = pp.decode(row)
    assert points[:, 1].tolist() == pytest.approx([1 - i / 71 for i in range(0, 30)])  # rows 0..29
    row[5 + 3] = -50  # x < 0 at row 3: rows 0..3 are no longer reachable from the start
    assert pp.decode(row)[:, 1].tolist() == pytest.approx([1 - i / 71 for i in range(4, 30)])
    row[5 + 3] = 700  # right of the image: the same cut, though x > 0
    assert pp.decode(row)[:, 1].tolist() == pytest.approx([1 - i / 71 for i in range(4, 30)])


def test_decode_ends_a_lane_at_the_right_edge_above_the_start():
    row = lane(600, slope=5, start_y=0.0, length=40)
    points = pp.decode(row)
    inside = int((row[5:5 + 40] <= 640).sum())
    assert 1 < len(points) == inside < 40 and points[-1, 0] <= 1


def test_decode_drops_lanes_of_one_point_or_less():
    assert pp.decode(lane(100, length=0)).shape == (0, 2)
    assert pp.decode(lane(100, length=1)).shape == (0, 2)
    assert pp.decode(lane(100, length=1.5)).shape == (2, 2)  # round half to even: 2
    assert pp.decode(lane(100, length=2.5)).shape == (2, 2)
    assert pp.decode(lane(-100, length=72)).shape == (0, 2)
    assert pp.decode(lane(100, start_y=np.nan)).shape == (0, 2)


def test_decode_negative_length_follows_python_slicing_as_the_reference():
    # end + 1 = -3: the reference's lane_xs[-3:] = -2 drops only the top 3 rows.
    assert len(pp.decode(lane(100, length=-3))) == 69


def test_decode_orders_points_bottom_first():
    points = pp.decode(lane(64, slope=1, length=72))
    assert points[0].tolist() == pytest.approx([0.1, 1.0])
    assert points[-1].tolist() == pytest.approx([(64 + 71) / 640, 0.0])


# ---- scores, options, fixed outputs, batches ----------------------------------------------------------------

def test_scores_are_a_stable_softmax():
    p = np.zeros((6, 77), dtype=np.float64)
    p[:, :2] = [[0, 0], [1e4, -1e4], [-1e4, 1e4], [1000, 1000], [-3, 2], [2.5, -1.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = pp.scores(p)
    assert s.tolist()[:4] == [0.5, 0.0, 1.0, 0.5]
    np.testing.assert_allclose(s[4:], ref_scores(p[4:]), rtol=1e-14)
    assert pp.scores(p[None]).shape == (1, 6)


@pytest.mark.parametrize("field, value", [
    ("conf_threshold", -0.1), ("conf_threshold", 1.5), ("conf_threshold", float("nan")), ("conf_threshold", "0.5"),
    ("conf_threshold", True), ("nms_threshold", -1.0), ("nms_threshold", float("inf")), ("top_k", 0),
    ("top_k", 2.0), ("top_k", True), ("img_w", 0), ("img_h", -360),
])
def test_options_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        pp.PostprocessOptions(**{field: value})


def test_options_defaults_are_the_culane_settings():
    options = pp.PostprocessOptions()
    assert (options.conf_threshold, options.nms_threshold, options.top_k, options.img_w) == (0.5, 50.0, 4, 640)
    assert pp.PostprocessOptions(conf_threshold=0, nms_threshold=45, top_k=5).top_k == 5


def test_bad_inputs_are_reported():
    with pytest.raises(ValueError, match="shape"):
        pp.postprocess(np.zeros((3, 76)), (360, 640))
    with pytest.raises(ValueError, match="original_size"):
        pp.postprocess(np.zeros((3, 77)), (0, 640))
    with pytest.raises(ValueError, match="scores"):
        pp.nms(np.zeros((3, 77)), np.zeros(2), 50.0, 4)


def three_lanes() -> np.ndarray:
    return np.stack([lane(100, 2, logit=3), lane(300, logit=4, length=30), lane(500, -2, logit=2),
                     lane(310, logit=-4)])


def test_postprocess_scales_to_the_original_image():
    result = pp.postprocess(three_lanes(), (720, 1280))
    assert result.indices.tolist() == [1, 0, 2]
    assert result.lanes[0][0].tolist() == pytest.approx([300 * 2, 720])
    assert result.lanes[0][-1].tolist() == pytest.approx([600, 720 * (1 - 29 / 71)])
    np.testing.assert_allclose(result.scores, pp.scores(three_lanes())[[1, 0, 2]])


def test_fixed_pads_with_nan_points_and_zero_scores():
    result = pp.postprocess(three_lanes(), (720, 1280), pp.PostprocessOptions(top_k=5))
    points, scores, count = result.fixed(5)
    assert points.shape == (5, 72, 2) and points.dtype == np.float32
    assert scores.dtype == np.float32 and count.dtype == np.int32 and count == 3
    assert np.isnan(points[0, 30:]).all() and not np.isnan(points[0, :30]).any()
    assert np.isnan(points[3:]).all() and scores[3:].tolist() == [0, 0]
    np.testing.assert_allclose(scores[:3], result.scores, rtol=1e-6)
    points, scores, count = result.fixed(2)
    assert points.shape == (2, 72, 2) and count == 2
    with pytest.raises(ValueError, match="n_points"):
        result.fixed(3, n_points=40)


def test_postprocess_batch_shapes_and_contents():
    rng = np.random.default_rng(3)
    batch = np.stack([three_lanes()] + [random_set(rng, 4) for _ in range(2)])
    sizes = np.array([[720, 1280], [360, 640], [590, 1640]], dtype=np.int32)
    options = pp.PostprocessOptions(conf_threshold=0.2, top_k=5)
    points, scores, counts = pp.postprocess_batch(batch, sizes, options)
    assert points.shape == (3, 5, 72, 2) and scores.shape == (3, 5) and counts.shape == (3,)
    assert points.dtype == scores.dtype == np.float32 and counts.dtype == np.int32
    for b in range(3):
        expected = pp.postprocess(batch[b], sizes[b], options).fixed(5)
        np.testing.assert_array_equal(points[b], expected[0])
        np.testing.assert_array_equal(scores[b], expected[1])
        assert counts[b] == expected[2]
    with pytest.raises(ValueError, match=r"\[3, 2\]"):
        pp.postprocess_batch(batch, sizes[:2], options)
    with pytest.raises(ValueError, match="image 1"):
        pp.postprocess_batch(batch, np.array([[720, 1280], [0, 640], [1, 1]]), options)


# ---- the Triton model, with a stand-in for triton_python_backend_utils -------------------------------------

class FakeTensor:
    def __init__(self, name, array):
        self.name, self.array = name, np.asarray(array)

    def as_numpy(self):
        return self.array


class FakeResponse:
    def __init__(self, output_tensors, error=None):
        self.outputs = {t.name: t.array for t in output_tensors}
        self.error = error


def fake_pb_utils() -> types.ModuleType:
    module = types.ModuleType("triton_python_backend_utils")
    module.Tensor = FakeTensor
    module.InferenceResponse = FakeResponse
    module.TritonError = str
    module.get_input_tensor_by_name = lambda request, name: request.get(name)
    return module


def test_triton_model_answers_each_request(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake_pb_utils())
    monkeypatch.setitem(sys.modules, "orinkit.lanes.postprocess", pp)
    model_module = load("lane_triton_postprocess", ROOT / "lanes" / "triton_postprocess.py")
    model = model_module.TritonPythonModel()
    parameters = {"conf_threshold": {"string_value": "0.2"}, "nms_threshold": {"string_value": "45"},
                  "top_k": {"string_value": "5"}, "EXECUTION_ENV_PATH": {"string_value": "x"}}
    model.initialize({"model_config": f'{{"parameters": {json.dumps(parameters)}}}'})
    assert model.options == pp.PostprocessOptions(conf_threshold=0.2, nms_threshold=45.0, top_k=5)
    good = {"PROPOSALS": FakeTensor("PROPOSALS", three_lanes()[None]),
            "ORIGINAL_SIZE": FakeTensor("ORIGINAL_SIZE", np.array([[720, 1280]], np.int32))}
    bad = {"PROPOSALS": FakeTensor("PROPOSALS", np.zeros((1, 4, 76), np.float32)),
           "ORIGINAL_SIZE": FakeTensor("ORIGINAL_SIZE", np.array([[720, 1280]], np.int32))}
    missing = {"PROPOSALS": good["PROPOSALS"]}
    responses = model.execute([good, bad, missing, good])
    assert [r.error is None for r in responses] == [True, False, False, True]
    assert "77" in responses[1].error and "ORIGINAL_SIZE" in responses[2].error
    outputs = responses[0].outputs
    assert outputs["LANES"].shape == (1, 5, 72, 2) and outputs["SCORES"].shape == (1, 5)
    assert outputs["COUNT"].tolist() == [[3]] and outputs["COUNT"].dtype == np.int32
    with pytest.raises(ValueError, match="top_k"):
        model.initialize({"model_config": '{"parameters": {"top_k": {"string_value": "four"}}}'})


# ---- speed (reported, not asserted) -------------------------------------------------------------------------

def anchors() -> np.ndarray:
    """The 2784 LaneATT anchors of a 640x360 input (left, bottom, right)."""
    ys = 1 - np.arange(72) / 71
    rows = []
    sides = [(np.linspace(1, 0, 72), 0.0, [72, 60, 49, 39, 30, 22], "side"),
             (np.linspace(1, 0, 128), 1.0, [165, 150, 141, 131, 120, 108, 100, 90, 80, 72, 60, 49, 39, 30, 15],
              "bottom"),
             (np.linspace(1, 0, 72), 1.0, [108, 120, 131, 141, 150, 158], "side")]
    for origins, fixed, angles, kind in sides:
        for origin in origins:
            x0, y0 = (fixed, origin) if kind == "side" else (origin, fixed)
            for angle in angles:
                xs = (x0 + (y0 - ys) / math.tan(math.radians(angle))) * W
                rows.append([0, 0, 1 - y0, x0, 0, *xs])
    return np.asarray(rows, dtype=np.float32)


def test_speed_on_a_full_output(capsys):
    rng = np.random.default_rng(11)
    p = anchors()
    assert p.shape == (2784, 77)
    p[:, 1] = rng.normal(0, 1, len(p))  # about a third above 0.5
    p[:, 4] = rng.uniform(10, 72, len(p))
    p[:, 5:] += rng.normal(0, 5, (len(p), 72))
    began = time.perf_counter()
    for _ in range(10):
        result = pp.postprocess(p, (590, 1640))
    vectorised = (time.perf_counter() - began) / 10
    began = time.perf_counter()
    kept, _ = ref_postprocess(p, 0.5, 50.0, 4)
    loop = time.perf_counter() - began
    assert result.indices.tolist() == [i for i in kept if len(pp.decode(p[i]))]
    with capsys.disabled():
        print(f"\n2784 proposals ({int((pp.scores(p) > 0.5).sum())} above 0.5): postprocess {vectorised * 1e3:.1f} ms,"
              f" plain loop {loop * 1e3:.0f} ms")


def test_points_right_of_the_image_are_dropped_like_those_left_of_it():
    """A lane leaving through the right edge ends there: every decoded point is a pixel of the image."""
    from orinkit.lanes.postprocess import decode

    proposal = np.zeros(77, dtype=np.float32)
    proposal[2], proposal[4] = 0.0, 72  # from the bottom row, all 72 rows long
    proposal[5:] = np.linspace(500, 800, 72)  # crosses x = 640 two thirds of the way up
    points = decode(proposal)
    assert len(points) > 1 and points[:, 0].max() <= 1.0 and points[:, 0].min() >= 0.0
    assert len(points) == int((np.linspace(500, 800, 72) <= 640).sum())


def test_a_missing_image_file_is_a_typed_error_naming_it():
    from orinkit.client import InvalidInputError
    from orinkit.lanes.client import encode

    with pytest.raises(InvalidInputError, match="no image file at nosuch.jpg; check the path"):
        encode("nosuch.jpg")
