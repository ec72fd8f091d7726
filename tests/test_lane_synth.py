"""orinkit.lanes.synth: drawn roads, and ground truth that lies on the painted markings."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from orinkit.lanes.errors import LaneError
from orinkit.lanes.synth import RoadSample, SynthOptions, lane_rows, render_road, road_stream

# With height / (n_rows - 1) a whole number every sample row is a pixel row, so the ground truth can be compared
# with the pixels of that very row, without interpolating between sample rows.
ON_PIXEL_ROWS = {360: 73, 300: 61, 720: 73}


def _painted(marking: dict, z_near: float, z_far: float) -> bool:
    """Whether the marking has paint over all of [z_near, z_far] (metres ahead)."""
    if not marking["dashed"]:
        return True
    period = marking["dash_m"] + marking["gap_m"]
    near, far = (z - marking["phase_m"] for z in (z_near, z_far))
    return math.floor(near / period) == math.floor(far / period) and near % period < marking["dash_m"] \
        and far % period < marking["dash_m"]


def _distance(scene: dict, x: float, y: float) -> float:
    """Metres ahead of the ground point seen at image pixel (x, y), undoing the roll about the image centre."""
    cx, cy = (scene["width"] - 1) / 2.0, (scene["height"] - 1) / 2.0
    roll = math.radians(scene["roll_deg"])
    v = cy + math.sin(roll) * (x - cx) + math.cos(roll) * (y - cy)
    horizon = cy + math.cos(roll) * (scene["horizon_y"] - cy)
    return scene["focal_px"] * scene["camera_height_m"] / (v - horizon) if v > horizon else math.inf


def _marking_pixels(row: np.ndarray, colour: np.ndarray, asphalt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each pixel of ``row``: how far it is from the asphalt towards the marking colour (0 asphalt, 1 paint),
    and whether it counts as paint (past half way, and not off to some other colour such as a grey kerb)."""
    towards = colour - asphalt
    offset = row - asphalt
    share = offset @ towards / (towards @ towards)
    off_line = np.linalg.norm(offset - share[:, None] * towards[None, :], axis=1)
    return share, (share > 0.5) & (off_line < 0.35 * np.linalg.norm(towards))


def check_lanes_on_paint(sample: RoadSample) -> tuple[list[float], int, int]:
    """Compare each lane with the paint of its marking, row by row.

    At every sample row inside the image where the marking is painted (inside a dash, at least 1.5 px wide,
    clear of the image edge and of other lanes, away from its far end), find the run of paint-coloured pixels
    nearest the lane's x and measure its centre (weighted by how much paint each pixel shows). Returns the signed
    errors (centre - x), and the counts of rows where paint was expected and where none was found; fails at once
    on a row whose paint is off the lane by more than 1.5 px or a quarter of the marking's width along the row."""
    scene, image = sample.scene, sample.image.astype(np.float64)
    height, width = image.shape[:2]
    errors, expected, missing = [], 0, 0
    for marking in scene["markings"]:
        if marking["lane_index"] is None:
            continue
        lane = sample.lanes[marking["lane_index"]]
        others = [other for index, other in enumerate(sample.lanes) if index != marking["lane_index"]]
        colour = np.asarray(marking["rgb"], dtype=np.float64)
        for i in range(1, len(lane) - 1):
            x, y = lane[i]
            r = round(y)
            assert abs(r - y) < 1e-6, "sample rows should be pixel rows here"
            if r > height - 1 or r < lane[-1, 1] + 4:
                continue
            z = _distance(scene, x, y)
            wide = scene["focal_px"] * marking["width_m"] / z
            if wide < 1.5 or not _painted(marking, _distance(scene, x, y + 1.5), _distance(scene, x, y - 1.5)):
                continue
            slope = (lane[i + 1, 0] - lane[i - 1, 0]) / (lane[i + 1, 1] - lane[i - 1, 1])
            along_row = wide * math.hypot(1.0, slope)
            window = max(3.0, 0.75 * along_row + 2.0)
            near_other = any(o[-1, 1] <= y <= o[0, 1] and abs(np.interp(y, o[::-1, 1], o[::-1, 0]) - x) < 2 * window
                             + along_row for o in others)
            if near_other or x - 3 * window - 6 < 0 or x + 3 * window + 6 > width - 1:
                continue
            row = image[r]
            # The asphalt on either side, a little away from the marking.
            beside = np.r_[np.arange(int(x - 3 * window - 6), int(x - window - 2)),
                           np.arange(int(x + window + 3), int(x + 3 * window + 7))]
            asphalt = np.median(row[beside], axis=0)
            if np.linalg.norm(colour - asphalt) < 40:
                continue
            expected += 1
            columns = np.arange(math.floor(x - window), math.ceil(x + window) + 1)
            share, paint = _marking_pixels(row[columns], colour, asphalt)
            if not paint.any():
                missing += 1
                continue
            bounds = np.flatnonzero(np.diff(np.r_[0, paint.astype(int), 0]))
            runs = list(zip(bounds[::2], bounds[1::2] - 1))
            first, last = min(runs, key=lambda run: abs((columns[run[0]] + columns[run[1]]) / 2 - x))
            around = slice(max(first - 1, 0), last + 2)
            weight = np.clip(share[around], 0.0, 1.0)
            centre = float((columns[around] * weight).sum() / weight.sum())
            tolerance = max(1.5, 0.25 * along_row)
            assert abs(centre - x) <= tolerance, (
                f"seed {scene['seed']}: {marking['colour']} {'dashed' if marking['dashed'] else 'solid'} marking "
                f"painted at x={centre:.2f} in row {r}, its lane says x={x:.2f} (tolerance {tolerance:.2f})")
            errors.append(centre - x)
    return errors, expected, missing


# -- the API ------------------------------------------------------------------------------------------------------


def test_lane_rows_run_from_the_bottom_edge_to_the_top():
    rows = lane_rows(720)
    assert rows.shape == (72,) and rows.dtype == np.float64
    assert rows[0] == 720.0 and rows[-1] == 0.0
    assert np.allclose(rows, (1 - np.arange(72) / 71) * 720)
    assert np.allclose(lane_rows(360, 73), 360.0 - 5.0 * np.arange(73), rtol=0, atol=1e-9)


def test_the_same_seed_draws_the_same_road():
    first, again = render_road(11, 640, 360), render_road(11, 640, 360)
    assert first.image.tobytes() == again.image.tobytes()
    assert len(first.lanes) == len(again.lanes)
    assert all(np.array_equal(a, b) for a, b in zip(first.lanes, again.lanes))
    assert first.scene == again.scene
    others = {render_road(seed, 640, 360).image.tobytes() for seed in (12, 13, 14)}
    assert len(others) == 3 and first.image.tobytes() not in others


@pytest.mark.parametrize("size", [(1280, 720), (640, 360), (500, 300)])
def test_sizes_and_lanes_on_the_sample_rows(size):
    width, height = size
    for seed in range(4):
        road = render_road(seed, width, height)
        assert road.image.shape == (height, width, 3) and road.image.dtype == np.uint8
        assert np.array_equal(road.rows, lane_rows(height))
        assert road.lanes
        for lane in road.lanes:
            assert lane.dtype == np.float64 and lane.ndim == 2 and lane.shape[1] == 2 and len(lane) >= 2
            assert np.isin(lane[:, 1], road.rows).all()
            assert (np.diff(lane[:, 1]) < 0).all(), "bottom row first"
            assert (lane[:, 0] >= 0).all() and (lane[:, 0] <= width - 1).all()
        starts = [lane[0, 0] for lane in road.lanes]
        assert starts == sorted(starts), "left to right by the x of the lowest point"
        indices = [m["lane_index"] for m in road.scene["markings"] if m["lane_index"] is not None]
        assert sorted(indices) == list(range(len(road.lanes)))


def test_bgr_and_encoding():
    road = render_road(3, 320, 180)
    assert np.array_equal(road.bgr(), road.image[..., ::-1]) and road.bgr().flags["C_CONTIGUOUS"]
    png = Image.open(io.BytesIO(road.encode("PNG")))
    assert png.format == "PNG" and np.array_equal(np.asarray(png.convert("RGB")), road.image)
    jpeg = Image.open(io.BytesIO(road.encode("jpeg", quality=80)))
    assert jpeg.format == "JPEG" and jpeg.size == (320, 180)


def test_road_stream_counts_seeds_up():
    roads = list(road_stream(40, 3, width=160, height=90))
    assert [road.scene["seed"] for road in roads] == [40, 41, 42]
    assert roads[1].image.tobytes() == render_road(41, 160, 90).image.tobytes()
    endless = road_stream(7, width=160, height=90, options=SynthOptions.clean())
    assert [next(endless).scene["seed"] for _ in range(4)] == [7, 8, 9, 10]


def test_clean_options_draw_the_same_road_without_effects():
    for seed in range(12):
        full, clean = render_road(seed, 320, 180), render_road(seed, 320, 180, options=SynthOptions.clean())
        for key in ("lane_count", "curvature", "horizon_y", "lane_width_m", "cam_offset", "draw_distance_m"):
            assert full.scene[key] == clean.scene[key], key
        assert [(m["colour"], m["dashed"], m["x_m"]) for m in full.scene["markings"]] == \
            [(m["colour"], m["dashed"], m["x_m"]) for m in clean.scene["markings"]]
        assert clean.scene["roll_deg"] == 0 and not clean.scene["vehicles"] and not clean.scene["shadows"]
        assert not any(m["worn"] for m in clean.scene["markings"])
        assert clean.scene["noise_sigma"] is None and clean.scene["blur_radius"] is None
        assert clean.scene["jpeg_quality"] is None


def test_switched_off_effects_never_appear():
    options = SynthOptions(curve=False, vehicles=0, shadows=0, jpeg=0, worn=0, min_markings=3, max_markings=3)
    for seed in range(20):
        scene = render_road(seed, 160, 90, options=options).scene
        assert scene["curvature"] == 0 and scene["lane_count"] == 3
        assert not scene["vehicles"] and not scene["shadows"] and scene["jpeg_quality"] is None
        assert not any(m["worn"] for m in scene["markings"])


# -- ground truth against the pixels ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(640, 360), (500, 300), (1280, 720)])
def test_lanes_lie_on_the_painted_markings(size):
    width, height = size
    errors, expected, missing = [], 0, 0
    for seed in range(8 if width < 1000 else 3):
        road = render_road(seed, width, height, options=SynthOptions.clean(), n_rows=ON_PIXEL_ROWS[height])
        found, wanted, lost = check_lanes_on_paint(road)
        errors += found
        expected, missing = expected + wanted, missing + lost
    assert expected > 100
    assert missing <= 0.05 * expected, f"no paint found at {missing} of {expected} rows"
    assert np.mean(np.abs(errors)) < 0.3, "the lanes should sit on the paint to a small fraction of a pixel"


def test_lanes_follow_the_rolled_image():
    options = replace(SynthOptions.clean(), roll=True, roll_max_deg=3.0)
    errors, expected, missing, rolls = [], 0, 0, []
    for seed in range(10):
        road = render_road(seed, 640, 360, options=options, n_rows=73)
        rolls.append(road.scene["roll_deg"])
        found, wanted, lost = check_lanes_on_paint(road)
        errors += found
        expected, missing = expected + wanted, missing + lost
    assert max(abs(r) for r in rolls) > 2.0 and min(rolls) < 0 < max(rolls)
    assert expected > 100
    assert missing <= 0.05 * expected, f"no paint found at {missing} of {expected} rows"
    assert np.mean(np.abs(errors)) < 0.3


def test_roll_turns_the_lanes_with_the_image():
    rolled = render_road(5, 640, 360, options=replace(SynthOptions.clean(), roll=True))
    level = render_road(5, 640, 360, options=SynthOptions.clean())
    assert abs(rolled.scene["roll_deg"]) > 0.5 and level.scene["roll_deg"] == 0
    assert rolled.scene["horizon_y"] == level.scene["horizon_y"]
    assert not all(len(a) == len(b) and np.allclose(a, b) for a, b in zip(rolled.lanes, level.lanes))


# -- variety ------------------------------------------------------------------------------------------------------


def test_default_roads_vary():
    seen: dict[str, set] = {key: set() for key in ("bend", "lanes", "colour", "dashed")}
    counts = dict.fromkeys(("vehicles", "shadows", "worn", "jpeg", "blur", "noise", "short_road", "kerbs"), 0)
    horizons, rolls = [], []
    for seed in range(200):
        road = render_road(seed, 320, 180)
        scene = road.scene
        seen["bend"].add(int(np.sign(scene["curvature"])))
        seen["lanes"].add(len(road.lanes))
        seen["colour"] |= {m["colour"] for m in scene["markings"]}
        seen["dashed"] |= {m["dashed"] for m in scene["markings"]}
        counts["vehicles"] += bool(scene["vehicles"])
        counts["shadows"] += bool(scene["shadows"])
        counts["worn"] += any(m["worn"] for m in scene["markings"])
        counts["jpeg"] += scene["jpeg_quality"] is not None
        counts["blur"] += scene["blur_radius"] is not None
        counts["noise"] += scene["noise_sigma"] is not None
        counts["short_road"] += scene["short_road"]
        counts["kerbs"] += scene["road"]["kerbs"]
        horizons.append(scene["horizon_y"] / 180)
        rolls.append(scene["roll_deg"])
    assert seen["bend"] == {-1, 0, 1}
    assert seen["lanes"] == {2, 3, 4}
    assert seen["colour"] == {"white", "yellow"} and seen["dashed"] == {True, False}
    for name, count in counts.items():
        assert 10 <= count <= 190, f"{name} in {count} of 200 roads"
    assert min(horizons) < 0.38 and max(horizons) > 0.52 and all(0.35 <= h <= 0.55 for h in horizons)
    assert min(rolls) < -2 and max(rolls) > 2 and all(abs(r) <= 3 for r in rolls)


# -- refused arguments --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda: render_road(0, 63, 360),
    lambda: render_road(0, 640, 20),
    lambda: render_road(0, 640.0, 360),
    lambda: render_road(0, True, 360),
    lambda: render_road(0, "640", 360),
    lambda: render_road(0, 640, 100_000),
    lambda: render_road(0, 640, 360, n_rows=1),
    lambda: render_road(-1, 640, 360),
    lambda: render_road(0, 640, 360, options={"curve": 0}),
    lambda: lane_rows(0),
    lambda: lane_rows(360, 1),
    lambda: road_stream(0, -1),
    lambda: road_stream(0, 2, width=10),
    lambda: road_stream(0, 2, colour="red"),
    lambda: SynthOptions(curve=1.5),
    lambda: SynthOptions(shadows="often"),
    lambda: SynthOptions(min_markings=4, max_markings=3),
    lambda: SynthOptions(max_markings=9),
    lambda: SynthOptions(lane_width_m=(3.9, 3.0)),
    lambda: SynthOptions(camera_height_m=(0.0, 1.0)),
    lambda: SynthOptions(horizon=(0.5, 0.95)),
    lambda: SynthOptions(jpeg_quality=(0, 95)),
    lambda: SynthOptions(roll_max_deg=45.0),
    lambda: SynthOptions(dash_m=3.0),
    lambda: render_road(0, 160, 90).encode("GIF"),
    lambda: render_road(0, 160, 90).encode("JPEG", quality=0),
])
def test_bad_arguments_are_refused_with_a_hint(call):
    with pytest.raises(LaneError) as caught:
        call()
    assert caught.value.hint
