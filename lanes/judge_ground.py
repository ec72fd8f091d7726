"""The judge renderer's pixels of the ground and the sky, each computed from where the pixel looks.

Every ground pixel is shaded from its road-frame coordinates (``r`` across, ``s`` along): the surface, its wear,
patches, seams and cracks, the paint and the shadows all lie on the road, so a drive moves them past the camera
together. Sharp features (paint, seams, joints, shadow edges) are covered by the share of the pixel's footprint
they fill, so that far paint thins and fades as a camera would see it rather than flickering.
"""

from __future__ import annotations

import math

import numpy as np

from orinkit.lanes.judge_scene import JUDGE_TAG, Scene
from orinkit.lanes.judge_view import View

CELL = 40.0  # metres of road whose patches, seams and shadows come from one generator
MARKS_FAR = 250.0


def noise_table(seed: int, stream: int) -> np.ndarray:
    return np.random.default_rng([JUDGE_TAG, seed, stream]).uniform(-1.0, 1.0, (256, 256)).astype(np.float32)


def noise(table: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Smooth value noise in -1..1 with features one unit apart (float32: a hundredth of a unit is its grain)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = x - x0, y - y0
    fx, fy = fx * fx * (3 - 2 * fx), fy * fy * (3 - 2 * fy)
    i, j = x0.astype(np.int64) & 255, y0.astype(np.int64) & 255
    i1, j1 = (i + 1) & 255, (j + 1) & 255
    a, b, c, d = table[j, i], table[j, i1], table[j1, i], table[j1, i1]
    return a + (b - a) * fx + (c - a) * fy + (a - b - c + d) * fx * fy


def cover(distance: np.ndarray, footprint: np.ndarray) -> np.ndarray:
    """Share of a pixel covered by a feature, from the signed distance of its centre inside the feature."""
    return np.clip(0.5 + distance / footprint, 0.0, 1.0)


def _stripe(offset: np.ndarray, half: float, footprint: np.ndarray) -> np.ndarray:
    """Share of a pixel (``footprint`` wide, centred ``offset`` from a band's centre) that a band ``half`` wide on
    each side covers: a band thinner than a pixel fills only its share."""
    return np.clip((np.minimum(offset + footprint / 2, half) - np.maximum(offset - footprint / 2, -half))
                   / footprint, 0.0, 1.0)


def _mix(colour: np.ndarray, paint, amount: np.ndarray) -> np.ndarray:
    return colour + (np.asarray(paint, float) - colour) * amount[:, None]


def _dash_cover(s: np.ndarray, paint, along: np.ndarray) -> np.ndarray:
    period = paint.dash + paint.gap
    q = np.mod(s - paint.phase, period)
    inside = np.where(q < paint.dash, np.minimum(q, paint.dash - q), -np.minimum(q - paint.dash, period - q))
    sharp = cover(inside, along)
    duty = paint.dash / period
    return duty + (sharp - duty) * np.clip(1.5 - along / period, 0.0, 1.0)


def _cells(s: np.ndarray):
    return range(int(math.floor(s.min() / CELL)), int(math.floor(s.max() / CELL)) + 1)


def _side_colour(scene: Scene, r: np.ndarray, colour: np.ndarray, g: dict, table: np.ndarray) -> None:
    left, right = scene.paved
    for outward, bands in ((left - r, scene.sides[0]), (r - right, scene.sides[1])):
        start = 0.0
        for number, (width, material) in enumerate(bands):
            last = number == len(bands) - 1
            here = (outward > start) & ((outward <= start + width) | last)
            if here.any():
                base = np.asarray(scene.materials[material])
                texture = 1 + 0.12 * noise(table, r[here] / 1.3, g["s"][here] / 2.5) \
                    + 0.06 * noise(table, r[here] / 0.35 + 50, g["s"][here] / 0.8) * np.clip(
                        1.5 - g["along"][here] / 0.8, 0, 1)
                if material in ("sidewalk", "concrete"):
                    joint = _stripe(np.mod(g["s"][here] + 1.0, 2.0) - 1.0, 0.01, g["along"][here])
                    texture = texture * (1 - 0.25 * joint)
                colour[here] = base * texture[:, None]
            start += width


def ground_colour(view: View, g: dict) -> np.ndarray:
    """RGB (0..1) of ground pixels with road-frame coordinates ``g`` (from :meth:`View.ground`)."""
    scene = view.scene
    r, s, across, along = g["r"], g["s"], g["across"], g["along"]
    table = noise_table(scene.seed, 1)
    colour = np.empty((len(r), 3))
    colour[:] = scene.asphalt
    fine, middle = np.clip(1.5 - along / 0.6, 0.0, 1.0), np.clip(1.5 - along / 2.5, 0.0, 1.0)
    shade = 1 + scene.grain * (0.8 * noise(table, r / 3.0, s / 12.0) + 0.7 * noise(table, r / 0.8 + 70, s / 2.5)
                               * middle + noise(table, r / 0.25, s / 0.6) * fine)
    if scene.concrete:
        shade *= 1 - 0.35 * _stripe(np.mod(s + 0.5 * scene.concrete, scene.concrete) - 0.5 * scene.concrete,
                                    0.015, along)
    for centre in scene.lane_centres:
        for wheel in (-0.8, 0.8):
            shade *= 1 - scene.tracks * np.exp(-(((r - centre - wheel) / 0.35) ** 2))
    pick = _picker(s)
    _surface_marks(scene, r, s, across, along, shade, view.travel, pick)
    colour *= shade[:, None]
    _side_colour(scene, r, colour, g, table)
    wear_table = noise_table(scene.seed, 2)
    for index, paint in enumerate(scene.paints):
        strokes = (paint.r,) if not paint.double else (paint.r - paint.double / 2, paint.r + paint.double / 2)
        for k, centre in enumerate(strokes):
            near = np.abs(r - centre) < paint.width + 2 * across
            if not near.any():
                continue
            amount = _stripe(r[near] - centre, paint.width / 2, across[near])
            if paint.dash:
                amount *= _dash_cover(s[near], paint, along[near])
            worn = noise(wear_table, s[near] / 4.0 + 31 * index, 7.0 * k + 3 * index)
            speckle = noise(wear_table, s[near] / 0.3, (r[near] - centre) / 0.05 + 100 * index + 11)
            amount *= 1 - paint.fade * np.clip(0.6 + worn + 0.4 * speckle * np.clip(1.5 - along[near] / 0.4, 0, 1),
                                               0, 1)
            colour[near] = _mix(colour[near], paint.colour, amount)
    colour *= _shadow(scene, r, s, across, along, view.travel, pick)[:, None]
    fog = 1 - np.exp(-g["z"] / scene.haze)
    return _mix(colour, scene.sky[0], fog)


def _picker(s: np.ndarray):
    """``pick(low, high)``: the indices of the pixels whose ``s`` lies within ``low .. high`` (and a metre more)."""
    order = np.argsort(s, kind="stable")
    ordered = s[order]
    return lambda low, high: order[np.searchsorted(ordered, low - 1.0):np.searchsorted(ordered, high + 1.0)]


def _surface_marks(scene: Scene, r, s, across, along, shade, travel: float, pick) -> None:
    """Repair patches, tar-sealed seams (dark, thin, often along the lane lines) and cracks, per 40 m cell; only
    within ``MARKS_FAR`` of the car, past which they are below a pixel."""
    left, right = scene.paved
    for cell in _cells(np.array([travel, travel + MARKS_FAR])):
        rng = np.random.default_rng([JUDGE_TAG, scene.seed, 3, cell])
        start = cell * CELL
        for _ in range(rng.poisson(scene.patches)):
            r0 = rng.uniform(left, right - 1)
            r1 = min(right, r0 + rng.uniform(0.8, 4.0))
            s0 = start + rng.uniform(0, CELL)
            s1 = s0 + rng.uniform(1.5, 15.0)
            at = pick(s0, s1)
            inside = cover(np.minimum(r[at] - r0, r1 - r[at]), across[at]) * cover(
                np.minimum(s[at] - s0, s1 - s[at]), along[at])
            shade[at] *= 1 + inside * rng.uniform(-0.3, 0.25)
        for _ in range(rng.poisson(scene.cracks)):
            width, dark = rng.uniform(0.01, 0.04), rng.uniform(0.25, 0.55)
            wobble, wave, phase = rng.uniform(0.02, 0.1), rng.uniform(3.0, 12.0), rng.uniform(0, 2 * math.pi)
            s0 = start + rng.uniform(0, CELL)
            if rng.random() < 0.6:  # along the road, often beside a lane line where the paving joins
                lines = [p.r for p in scene.paints] or list(scene.lane_centres)
                r0 = float(rng.choice(lines)) + rng.choice([-1, 1]) * rng.uniform(0.15, 0.6) \
                    if rng.random() < 0.6 else rng.uniform(left, right)
                s1 = s0 + rng.uniform(5, 40)
                at = pick(s0, s1)
                offset = r[at] - r0 - wobble * np.sin(2 * math.pi * s[at] / wave + phase)
                amount = _stripe(offset, width / 2, across[at]) * cover(np.minimum(s[at] - s0, s1 - s[at]), along[at])
            else:
                slope = rng.uniform(-0.6, 0.6)
                r0, r1 = sorted(rng.uniform(left, right, 2))
                reach = abs(slope) * (right - left) + wobble
                at = pick(s0 - reach, s0 + reach)
                offset = s[at] - s0 - slope * (r[at] - left) - wobble * np.sin(2 * math.pi * r[at] / wave + phase)
                amount = _stripe(offset, width / 2, along[at]) * cover(np.minimum(r[at] - r0, r1 - r[at]), across[at])
            shade[at] *= 1 - dark * amount


def _shadow(scene: Scene, r, s, across, along, travel: float, pick) -> np.ndarray:
    light = np.ones(len(r))
    if scene.shadow >= 0.99:
        return light
    dark = 1 - scene.shadow
    if scene.dapple:
        table = noise_table(scene.seed, 4)
        field = noise(table, r / 3.0, s / 3.0) + 0.5 * noise(table, r / 1.2 + 40, s / 1.2)
        threshold = 1.2 - 2.4 * scene.dapple
        light *= 1 - dark * np.clip(0.5 + (field - threshold) / np.maximum(0.15, along / 3.0), 0, 1)
    if scene.pole_shadows and scene.poles:
        for cell in _cells(np.array([travel, travel + MARKS_FAR])):
            rng = np.random.default_rng([JUDGE_TAG, scene.seed, 5, cell])
            slope = math.tan(math.radians(rng.uniform(-60, 60)))
            for base in np.arange(cell * CELL, (cell + 1) * CELL, scene.poles) + rng.uniform(0, scene.poles):
                foot, length = scene.paved[1] + 1.5, rng.uniform(6, 14)
                at = pick(min(base, base + slope * length), max(base, base + slope * length))
                offset = (s[at] - base) - slope * (foot - r[at])
                reach = cover(np.minimum(foot - r[at], length - (foot - r[at])), across[at])
                light[at] *= 1 - dark * _stripe(offset, 0.12, along[at]) * reach
    if scene.bridge:
        start = scene.travel + scene.bridge + 2.0
        light *= 1 - dark * 1.1 * cover(np.minimum(s - start, start + 9.0 - s), along)
    return np.clip(light, 0.2, 1.0)


def sky_colour(view: View, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """RGB of pixels above the ground: the sky, and the land at the horizon (trees, hills, a city, or flat)."""
    scene, height = view.scene, view.height
    rise = (view.horizon_v - v) / height
    t = np.clip(rise / 0.6, 0, 1) ** 0.7
    low, high = np.asarray(scene.sky[0]), np.asarray(scene.sky[1])
    colour = low + (high - low) * t[..., None]
    if scene.clouds:
        table = noise_table(scene.seed, 6)
        scale = view.width / 6
        cloud = noise(table, u / scale, v / (scale * 0.35)) + 0.5 * noise(table, u / scale * 2.3, v / scale)
        amount = np.clip((cloud + 1.0 - 1.6 * scene.clouds) * 1.5, 0, 1) * scene.clouds * (rise > 0)
        white = np.asarray(scene.sky[0]) * 1.08
        colour = colour + (np.clip(white, 0, 1) - colour) * amount[..., None]
    rng = np.random.default_rng([JUDGE_TAG, scene.seed, 8])
    table = noise_table(scene.seed, 7)
    scale = height / 720
    if scene.background == "trees":
        tall = (14 + 10 * noise(table, u / (40 * scale), 0.5) + 5 * noise(table, u / (8 * scale), 3.5)) * scale
        land = np.asarray(scene.materials["tree"]) * 0.9
    elif scene.background == "hills":
        tall = (30 + 28 * noise(table, u / (260 * scale), 0.5) + 6 * noise(table, u / (50 * scale), 9.5)) * scale
        land = np.asarray((0.32, 0.38, 0.34))
    elif scene.background == "city":
        edges = np.cumsum(rng.uniform(15, 90, 200) * scale) - 2 * view.width
        heights = rng.uniform(10, 140, 200) * scale
        tall = heights[np.clip(np.searchsorted(edges, u), 0, 199)]
        land = np.asarray((0.5, 0.5, 0.52)) * rng.uniform(0.7, 1.1)
    else:
        tall = np.full_like(u, 2.0 * scale)
        land = np.asarray(scene.materials["grass"])
    haze = rng.uniform(0.25, 0.65)
    land = land + (low - land) * haze
    under = v > view.horizon_v - tall
    colour[under] = land * (1 + 0.05 * noise(table, u[under] / 3, v[under] / 3))[:, None]
    return colour
