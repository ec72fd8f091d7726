"""orinkit.lanes.synth: drawn roads, and ground truth that lies on the painted markings."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from orinkit.lanes.augment import nearest_lanes, training_road
from orinkit.lanes.errors import LaneError
from orinkit.lanes.synth import WIDE_STYLE, RoadSample, SynthOptions, lane_rows, render_road, road_stream

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
    """Metres ahead of the ground point seen at image pixel (x, y), undoing the roll about the image centre (turned
    in the camera's square-pixel frame when the pixels are not square)."""
    cx, cy = (scene["width"] - 1) / 2.0, (scene["height"] - 1) / 2.0
    roll, aspect = math.radians(scene["roll_deg"]), scene.get("pixel_aspect", 1.0)
    v = cy + aspect * math.sin(roll) * (x - cx) + math.cos(roll) * (y - cy)
    horizon = cy + math.cos(roll) * (scene["horizon_y"] - cy)
    return scene["focal_px"] * aspect * scene["camera_height_m"] / (v - horizon) if v > horizon else math.inf


def _marking_pixels(row: np.ndarray, colour: np.ndarray, asphalt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each pixel of ``row``: how far it is from the asphalt towards the marking colour (0 asphalt, 1 paint),
    and whether it counts as paint (past half way, and not off to some other colour such as a grey kerb)."""
    towards = colour - asphalt
    offset = row - asphalt
    share = offset @ towards / (towards @ towards)
    off_line = np.linalg.norm(offset - share[:, None] * towards[None, :], axis=1)
    return share, (share > 0.5) & (off_line < 0.35 * np.linalg.norm(towards))


def check_lanes_on_paint(sample: RoadSample, resampled: bool = False) -> tuple[list[float], int, int]:
    """Compare each lane with the paint of its marking, row by row.

    At every sample row inside the image where the marking is painted (inside a dash, at least 1.5 px wide,
    clear of the image edge and of other lanes, away from its far end), find the run of paint-coloured pixels
    nearest the lane's x and measure its centre (weighted by how much paint each pixel shows). Returns the signed
    errors (centre - x), and the counts of rows where paint was expected and where none was found; fails at once
    on a row whose paint is off the lane by more than 1.5 px or a quarter of the marking's width along the row (plus
    what nearest-pixel resampling moves it by, when ``resampled``)."""
    scene, image = sample.scene, sample.image.astype(np.float64)
    height, width = image.shape[:2]
    errors, expected, missing = [], 0, 0
    # An image resampled to the nearest pixel (the lens) has its paint up to half a pixel off each way: along the row
    # that is half a pixel plus half the lane's slope.
    slack = 0.5 if resampled else 0.0
    for marking in scene["markings"]:
        if marking["lane_index"] is None or marking.get("double"):
            continue    # a double line's lane lies between its two lines, on the asphalt
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
            tolerance = max(1.5, 0.25 * along_row) + slack * (1.0 + abs(slope))
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
    lambda: SynthOptions(s_curve=2.0),
    lambda: SynthOptions(camera_aspects=(16 / 9, 0.1)),
    lambda: SynthOptions(camera_aspects=[16 / 9]),
    lambda: SynthOptions(surroundings=("grass", "moon")),
    lambda: SynthOptions(distortion_k=(0.1, 2.0)),
    lambda: SynthOptions(shadow_strength=(0.5, 1.5)),
    lambda: SynthOptions(asphalt_grey=(-5.0, 100.0)),
    lambda: SynthOptions(curvature=(0.01, 0.2)),
    lambda: render_road(0, 160, 90).encode("GIF"),
    lambda: render_road(0, 160, 90).encode("JPEG", quality=0),
])
def test_bad_arguments_are_refused_with_a_hint(call):
    with pytest.raises(LaneError) as caught:
        call()
    assert caught.value.hint


# -- the wide data (WIDE_STYLE, data version wide-v1) -------------------------------------------------------------

# The wide data's roads with nothing on or over the markings and no camera effects: the pixels must show each lane's
# marking. Snow and sand drift over edge lines and a city's houses hide a bend's far lines, as they may: left out.
WIDE_CLEAN = replace(WIDE_STYLE, shadows=0, vehicles=0, worn=0, noise=0, blur=0, jpeg=0, low_res=0, vignette=0,
                     distortion=0, seams=0, crosswalk=0, road_signs=0, guard_rail=0, road_wear=0,
                     surroundings=("grass", "dry", "gravel", "concrete"))


def _check_on_paint(roads, resampled: bool = False, mean_error: float = 0.35) -> None:
    errors, expected, missing = [], 0, 0
    for road in roads:
        found, wanted, lost = check_lanes_on_paint(road, resampled)
        errors += found
        expected, missing = expected + wanted, missing + lost
    assert expected > 100
    assert missing <= 0.05 * expected, f"no paint found at {missing} of {expected} rows"
    assert np.mean(np.abs(errors)) < mean_error, "the lanes should sit on the paint to a fraction of a pixel"


def test_wide_roads_are_a_pure_function_of_the_seed():
    first = [render_road(seed, 320, 180, options=WIDE_STYLE) for seed in (5, 6)]
    again = [render_road(seed, 320, 180, options=WIDE_STYLE) for seed in (6, 5)][::-1]
    for a, b in zip(first, again):
        assert a.image.tobytes() == b.image.tobytes() and a.scene == b.scene
        assert len(a.lanes) == len(b.lanes) and all(np.array_equal(x, y) for x, y in zip(a.lanes, b.lanes))
    assert first[0].image.tobytes() != first[1].image.tobytes()
    # Training road `index` of data seed `seed` is the same whenever it is drawn.
    image, lanes = training_road("wide-v1", 3 * 10**8 + 17)
    image2, lanes2 = training_road("wide-v1", 3 * 10**8 + 17)
    assert image.shape == (360, 640, 3) and image.tobytes() == image2.tobytes()
    assert all(np.array_equal(x, y) for x, y in zip(lanes, lanes2))


def test_mixed_data_alternates_the_two_versions_by_seed():
    for seed, version in ((3 * 10**8 + 16, "synth-v1"), (3 * 10**8 + 17, "wide-v1")):
        image, lanes = training_road("mix-v1", seed, 320, 180)
        alone, alone_lanes = training_road(version, seed, 320, 180)
        assert image.tobytes() == alone.tobytes() and len(lanes) == len(alone_lanes)
        assert all(np.array_equal(x, y) for x, y in zip(lanes, alone_lanes))


@pytest.mark.parametrize("horizon", [(0.02, 0.05), (0.85, 0.89)])
@pytest.mark.parametrize("fov_deg", [(5.0, 10.0), (140.0, 149.0)])
def test_every_effect_draws_at_the_camera_extremes_the_options_allow(horizon, fov_deg):
    """A data-loading worker that raises ends a training run (a lent GPU's run died so, 90,000 roads in): a camera
    pitched up with a long lens saw no road nearer than the seams' 30 m, and numpy refused the backwards range."""
    from orinkit.lanes.augment import augment
    from orinkit.lanes.synth_options import _PROBABILITIES

    everything = {name: 1.0 for name in _PROBABILITIES} | {"short_road": 0.0}
    for height, flat in (((0.1, 0.2), 1.0), ((10.0, 12.0), 0.0)):
        options = replace(WIDE_STYLE, **everything | {"flat": flat, "photo": 1 - flat}, horizon=horizon,
                          fov_deg=fov_deg, camera_height_m=height, draw_distance_m=(5.0, 8.0), lane_width_m=(1.0, 1.2))
        road = render_road(0, 320, 180, options=options)
        image, lanes = augment(np.ascontiguousarray(road.image), road.lanes, np.random.default_rng(0))
        assert image.shape == (180, 320, 3) and road.scene["clutter"]["seams"] >= 1
        assert all(np.isfinite(lane).all() for lane in lanes)


def test_wide_effects_leave_the_road_itself_alone():
    """Each effect draws from its own generator: the wide-only ones switched off, the road is the same road."""
    plain = replace(WIDE_STYLE, seams=0, crosswalk=0, road_signs=0, guard_rail=0, photo=0, flat=0, vignette=0,
                    distortion=0, low_res=0)
    for seed in range(6):
        full, bare = render_road(seed, 320, 180, options=WIDE_STYLE), render_road(seed, 320, 180, options=plain)
        for key in ("lane_count", "curvature", "curvature_change", "horizon_y", "pixel_aspect", "lane_width_m",
                    "surroundings", "camera_height_m", "fov_deg"):
            assert full.scene[key] == bare.scene[key], key
        assert [m["x_m"] for m in full.scene["markings"]] == [m["x_m"] for m in bare.scene["markings"]]


def test_wide_geometry_stays_within_its_ranges_and_spreads_over_them():
    o = WIDE_STYLE
    seen: dict[str, list] = {}
    for seed in range(50):
        scene = render_road(seed, 320, 180, options=o).scene
        horizon = scene["horizon_y"] / 180
        values = {"horizon": horizon, "fov_deg": scene["fov_deg"], "camera_height_m": scene["camera_height_m"],
                  "lane_width_m": scene["lane_width_m"], "roll": scene["roll_deg"], "yaw": scene["yaw_deg"],
                  "offset": scene["cam_offset"], "markings": scene["lane_count"], "curvature": scene["curvature"],
                  "change": scene["curvature_change"], "aspect": scene["pixel_aspect"] * 320 / 180}
        for key, value in values.items():
            seen.setdefault(key, []).append(value)
        for low_high, key in ((o.horizon, "horizon"), (o.fov_deg, "fov_deg"), (o.camera_height_m, "camera_height_m"),
                              (o.lane_width_m, "lane_width_m")):
            assert low_high[0] <= values[key] <= low_high[1], (seed, key, values[key])
        assert abs(values["roll"]) <= o.roll_max_deg and abs(values["yaw"]) <= o.yaw_max_deg
        assert abs(values["offset"]) <= o.cam_offset_m and 2 <= values["markings"] <= 6
        assert values["curvature"] == 0 or o.curvature[0] <= abs(values["curvature"]) <= o.curvature[1]
        assert values["change"] == 0 or o.curvature_change[0] <= abs(values["change"]) <= o.curvature_change[1]
        assert min(abs(values["aspect"] - a) for a in o.camera_aspects) < 1e-9
        assert scene["surroundings"] in o.surroundings
        k = scene["distortion_k"]
        assert k is None or o.distortion_k[0] - 0.015 <= k <= o.distortion_k[1] + 0.015
        for m in scene["markings"]:
            widths, dashes, gaps = ((0.1, 0.15), (0.1, 0.2), (0.8, 2.0)) if m["dots"] else \
                (o.marking_width_m, o.dash_m, o.gap_m)
            assert widths[0] <= m["width_m"] <= widths[1]
            if m["dashed"]:
                assert dashes[0] <= m["dash_m"] <= dashes[1] and gaps[0] <= m["gap_m"] <= gaps[1]
    # Spread: each knob reaches well into both halves of its range, curves bend both ways, every count shows up.
    spread = {"horizon": (0.2, 0.4), "fov_deg": (55, 90), "camera_height_m": (1.5, 2.6), "lane_width_m": (3.0, 3.8),
              "roll": (-3, 3), "aspect": (1.6, 2.5)}
    for key, (below, above) in spread.items():
        assert min(seen[key]) < below and max(seen[key]) > above, (key, min(seen[key]), max(seen[key]))
    assert set(seen["markings"]) == {2, 3, 4, 5, 6}
    assert min(seen["curvature"]) < 0 < max(seen["curvature"]) and min(seen["change"]) < 0 < max(seen["change"])


def test_wide_lanes_lie_on_the_painted_markings():
    roads = [render_road(seed, 640, 360, options=WIDE_CLEAN, n_rows=73) for seed in range(8)]
    assert {r.scene["pixel_aspect"] for r in roads} != {1.0}, "some cameras of other aspects among them"
    _check_on_paint(roads)


def test_distorted_lanes_lie_on_the_painted_markings():
    """The lens moves the lanes through the exact inverse of the map the image went through."""
    options = replace(WIDE_CLEAN, distortion=1.0, distortion_k=(0.2, 0.25), dashed=0, double=0, roll=0)
    roads = [render_road(seed, 640, 360, options=options, n_rows=73) for seed in range(6)]
    assert all(r.scene["distortion_k"] >= 0.18 for r in roads)
    _check_on_paint(roads, resampled=True, mean_error=0.5)
    # Barrel distortion bends a straight road's lines: its lanes are not those of the pinhole camera.
    pinhole = render_road(0, 640, 360, options=replace(options, distortion=0), n_rows=73)
    assert not all(len(a) == len(b) and np.allclose(a, b) for a, b in zip(pinhole.lanes, roads[0].lanes))


def _resized(road: RoadSample, width: int, height: int) -> RoadSample:
    """``road`` scaled to width x height the way a model's input is (a plain stretch), its lanes and camera with it."""
    sx, sy = width / road.image.shape[1], height / road.image.shape[0]
    image = np.asarray(Image.fromarray(road.image).resize((width, height), Image.Resampling.BILINEAR))
    scene = dict(road.scene, width=width, height=height, horizon_y=road.scene["horizon_y"] * sy,
                 focal_px=road.scene["focal_px"] * sx, pixel_aspect=road.scene["pixel_aspect"] * sy / sx)
    lanes = [lane * [sx, sy] for lane in road.lanes]
    return RoadSample(image=image, lanes=lanes, rows=road.rows * sy, scene=scene)


@pytest.mark.parametrize("size", [(1640, 590), (1280, 400)])
def test_culane_size_and_wide_crops_keep_their_truth_at_640x360(size):
    """A CULane-size (or wide-crop) picture scaled to the model's 640x360 keeps its lanes on its paint; drawing at
    640x360 with that camera's aspect (what training does, for a fifth of the pixels) gives the same lanes."""
    width, height = size
    native = replace(WIDE_CLEAN, camera_aspects=())
    squeezed = replace(WIDE_CLEAN, camera_aspects=(width / height,))
    roads, gaps = [], []
    for seed in range(4):
        big = _resized(render_road(seed, width, height, options=native, n_rows=73), 640, 360)
        small = render_road(seed, 640, 360, options=squeezed, n_rows=73)
        assert abs(small.scene["pixel_aspect"] - big.scene["pixel_aspect"]) < 1e-9
        roads.append(big)
        for marking, same in zip(big.scene["markings"], small.scene["markings"]):
            if marking["lane_index"] is None or same["lane_index"] is None:
                continue
            a, b = big.lanes[marking["lane_index"]], small.lanes[same["lane_index"]]
            rows = np.intersect1d(np.round(a[:, 1], 6), np.round(b[:, 1], 6))
            at = [np.isin(np.round(lane[:, 1], 6), rows) for lane in (a, b)]
            gaps.extend(np.abs(a[at[0], 0] - b[at[1], 0]))
    # A plain stretch puts pixel centres up to 0.3 px off where a resampling filter puts them: hence 0.45.
    _check_on_paint(roads, mean_error=0.45)
    assert len(gaps) > 200 and np.percentile(gaps, 95) < 0.6, "the same lanes, to pixel-centre conventions"


def test_training_data_versions():
    old_image, old_lanes = training_road("synth-v1", 42)
    road = render_road(42, 640, 360, options=SynthOptions())
    assert old_image.tobytes() == road.bgr().tobytes() and len(old_lanes) == len(road.lanes)
    counts = []
    for seed in range(30):
        road = render_road(seed, 640, 360, options=WIDE_STYLE)
        kept = nearest_lanes(road)
        counts.append((len(road.lanes), len(kept)))
        assert len(kept) == min(4, len(road.lanes))
        xs = [m["x_m"] for m in road.scene["markings"] if m["lane_index"] is not None]
        kept_x = sorted(abs(m["x_m"]) for m in road.scene["markings"]
                        if m["lane_index"] is not None and any(lane is road.lanes[m["lane_index"]] for lane in kept))
        assert kept_x == sorted(abs(x) for x in xs)[:len(kept)], "the lines nearest the car"
        assert [lane[0, 0] for lane in kept] == sorted(lane[0, 0] for lane in kept)
    assert any(total > 4 for total, _ in counts)
    with pytest.raises(LaneError) as caught:
        training_road("wide-v9", 0)
    assert "wide-v1" in caught.value.hint


def test_wide_roads_without_the_photographs_are_refused_with_the_way_out(monkeypatch):
    from orinkit.lanes import synth_photo

    synth_photo.photo_folder.cache_clear()
    monkeypatch.setattr(synth_photo.importlib.util, "find_spec", lambda name: None)
    try:
        with pytest.raises(LaneError) as caught:
            render_road(0, 160, 90, options=replace(WIDE_STYLE, photo=1e-9))
        assert "scikit-learn" in caught.value.hint
        render_road(0, 160, 90, options=replace(WIDE_STYLE, photo=0))   # no photographs wanted, none needed
    finally:
        synth_photo.photo_folder.cache_clear()


def test_augmentation_strength_scales_how_often_and_ramps_by_image():
    """Strength 1 is the usual augmentation, 0 none, 2 more often; the ramp is by image index (a resumed run
    draws what it would have drawn), and an option that cannot apply is refused."""
    from orinkit.lanes.augment import augment, augment_strength
    from orinkit.lanes.train_options import TrainOptions

    road = render_road(3, 320, 180, options=WIDE_STYLE)
    image = np.ascontiguousarray(road.image)
    changed = {}
    for strength in (0.0, 1.0, 2.0):
        count = 0
        for seed in range(40):
            out, lanes = augment(image, road.lanes, np.random.default_rng(seed), strength)
            count += not np.array_equal(out, image)
            if strength == 0.0:
                assert all(np.array_equal(a, b) for a, b in zip(lanes, road.lanes))
        changed[strength] = count
    assert changed[0.0] == 0 and 0 < changed[1.0] < changed[2.0] == 40, changed
    again, _ = augment(image, road.lanes, np.random.default_rng(5), 1.0)
    assert np.array_equal(again, augment(image, road.lanes, np.random.default_rng(5))[0])  # 1 is the default
    assert augment_strength(0, 2.0, 1000) == 0.0 and augment_strength(500, 2.0, 1000) == 1.0
    assert augment_strength(5000, 2.0, 1000) == 2.0 and augment_strength(7, 1.5) == 1.5
    from orinkit.lanes.train_data import training_pair

    # The schedule reaches the data by the image's index: image 0 of a ramp is the road as drawn (and mirrored).
    ramped, bare = training_pair(0, 5, strength=2.0, ramp=1000), training_pair(0, 5, strength=0.0)
    assert np.array_equal(ramped[0], bare[0]) and np.array_equal(ramped[1], bare[1])
    with pytest.raises(LaneError, match="out of range"):
        TrainOptions(augment_strength=-1)
    with pytest.raises(LaneError, match="nothing to scale"):
        TrainOptions(augment=False, augment_ramp=100)
