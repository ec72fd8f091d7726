"""The judge renderer's roads as numbers: what one seed puts in front of the camera, before any pixel is drawn.

A seed picks a kind of road (a highway of 2-4 lanes one way, an urban street, a rural two-lane road), its lanes
and their paint, the car's place and heading in its lane, the camera (height, field of view, where the horizon
falls, roll), how the road bends and climbs along its length, its surface, what stands beside it, the cars ahead,
the light and the camera's flaws. Everything is drawn from ``numpy.random.default_rng([JUDGE_TAG, seed])``, so a
scene is a pure function of its seed and none of its streams coincides with a training generator's.

Lengths are metres. The road frame: ``r`` across the road (0 at its leftmost lane boundary, + to the right),
``s`` along it from an arbitrary origin; the car is at ``s = travel``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

JUDGE_TAG = 0x4A554447  # "JUDG"

Colour = tuple[float, float, float]  # RGB, 0..1


@dataclass(frozen=True)
class Paint:
    """One lane-line marking (one lane of the truth): a solid or dashed stroke, or two strokes side by side."""

    r: float                  # centre of the marking (of the pair, for a double line)
    width: float              # of one stroke
    colour: Colour
    dash: float = 0.0         # painted length of a dash; 0: solid
    gap: float = 0.0
    phase: float = 0.0
    double: float = 0.0       # centre-to-centre distance of a double line's strokes; 0: single
    fade: float = 0.0         # 0: fresh paint; near 1: worn almost away in places


@dataclass(frozen=True)
class Car:
    r: float                  # lateral centre
    z: float                  # distance of its rear from the camera, metres
    width: float
    height: float
    length: float
    colour: Colour
    truck: bool
    swing: float              # how far it drifts forward and back over a video, metres
    period: float             # of that drift, seconds


@dataclass(frozen=True)
class Scene:
    seed: int
    kind: str                                     # "highway", "urban" or "rural"
    paints: tuple[Paint, ...]
    lane_centres: tuple[float, ...]
    paved: tuple[float, float]                    # the asphalt's left and right edges (r)
    car_r: float
    yaw: float                                    # the car's heading relative to the road, radians (+ right)
    speed: float                                  # m/s, for videos
    sway: float                                   # the car's weave in its lane over a video, metres
    travel: float                                 # s of the car
    cam_height: float
    hfov: float                                   # horizontal field of view, degrees
    horizon: float                                # row of the horizon as a share of the image height
    roll: float                                   # radians
    bends: tuple[tuple[float, float, float], ...]  # curvature(s) = sum a sin(2 pi s / L + phi): (a, L, phi)
    hills: tuple[tuple[float, float, float], ...]  # the same for vertical curvature
    asphalt: Colour
    concrete: float                               # joint spacing of a concrete road; 0: asphalt
    grain: float
    tracks: float                                 # tyre tracks: > 0 darker, < 0 polished lighter
    patches: float                                # repaired patches per 40 m
    cracks: float                                 # tar seams and cracks per 40 m
    sides: tuple[tuple[tuple[float, str], ...], tuple[tuple[float, str], ...]]  # left, right: (width, material)
    materials: dict
    structures: tuple[str, str]                   # "rail", "barrier", "wall" or "" on the left and right
    trees: float                                  # trees per 40 m of roadside
    poles: float                                  # pole spacing, metres; 0: none
    buildings: bool
    cars: tuple[Car, ...]
    light: str                                    # "day", "overcast" or "dusk"
    sky: tuple[Colour, Colour]                    # at the horizon, at the top
    clouds: float
    background: str                               # "trees", "hills", "city" or "open"
    haze: float                                   # visibility, metres
    shadow: float                                 # light left in a shadow (1: no shadows)
    dapple: float                                 # share of the road under tree shadows
    pole_shadows: bool
    bridge: float                                 # distance ahead of an overpass; 0: none
    glare: tuple[float, float, float]             # sun glare (x, y as image shares, strength); strength 0: none
    exposure: float
    gamma: float
    tint: Colour
    noise: float
    blur: float                                   # Gaussian radius at 720 rows
    jpeg: int                                     # quality; 0: none
    vignette: float
    margin: float                                 # truth stops this many pixels below the road's far end


def _white(rng) -> Colour:
    v = rng.uniform(0.78, 0.96)
    return (v, v * rng.uniform(0.98, 1.01), v * rng.uniform(0.95, 1.02))


def _yellow(rng) -> Colour:
    return (rng.uniform(0.82, 0.96), rng.uniform(0.62, 0.76), rng.uniform(0.08, 0.3))


def _dashes(rng, kind: str) -> tuple[float, float]:
    if kind == "urban":
        return rng.uniform(1.5, 3.0), rng.uniform(3.0, 6.0)
    paint, gap = [(3.0, 9.0), (4.5, 7.5), (6.0, 12.0), (3.0, 6.0), (2.0, 7.0)][rng.integers(5)]
    return paint * rng.uniform(0.9, 1.1), gap * rng.uniform(0.9, 1.1)


def _line(rng, r, colour, *, width=None, dashes=None, double=0.0, fade=0.4) -> Paint:
    dash, gap = dashes or (0.0, 0.0)
    return Paint(r, width or rng.uniform(0.10, 0.20), colour, dash, gap, rng.uniform(0.0, dash + gap), double,
                 rng.uniform(0.0, fade))


def _highway(rng):
    n = int(rng.choice([2, 3, 3, 4]))
    width = rng.uniform(3.4, 3.8)
    dashes = _dashes(rng, "highway")
    thin = rng.uniform(0.12, 0.18)
    left = _yellow(rng) if rng.random() < 0.35 else _white(rng)
    paints = [_line(rng, 0.0, left, width=rng.uniform(0.12, 0.2))]
    paints += [_line(rng, k * width, _white(rng), width=thin, dashes=dashes) for k in range(1, n)]
    paints.append(_line(rng, n * width, _white(rng), width=rng.uniform(0.14, 0.2)))
    paved = (-rng.uniform(0.5, 1.5), n * width + rng.uniform(1.0, 3.0))
    ours = list(range(n))
    sides = (((rng.uniform(3, 12), "grass"),), ((rng.uniform(0.3, 1.5), "gravel"), (50.0, "grass")))
    structures = ("barrier" if rng.random() < 0.45 else "", "rail" if rng.random() < 0.55 else "")
    return paints, width, n, ours, paved, sides, structures


def _urban(rng):
    theirs, ours_n = int(rng.choice([0, 1, 1, 2])), int(rng.choice([1, 2, 2]))
    n, width = theirs + ours_n, rng.uniform(2.8, 3.3)
    dashes = _dashes(rng, "urban")
    paints = []
    edge_lines = rng.random() < 0.4 or n == 1  # a one-lane street with no paint at all holds no lane to find
    if edge_lines:
        paints.append(_line(rng, 0.0, _white(rng), width=rng.uniform(0.1, 0.15)))
    for k in range(1, n):
        if k == theirs:
            style = rng.random()
            if style < 0.45:
                paints.append(_line(rng, k * width, _yellow(rng), width=0.11, double=rng.uniform(0.2, 0.3)))
            elif style < 0.65:
                paints.append(_line(rng, k * width, _white(rng)))
            else:
                paints.append(_line(rng, k * width, _white(rng), dashes=dashes))
        else:
            paints.append(_line(rng, k * width, _white(rng), dashes=dashes))
    if edge_lines:
        paints.append(_line(rng, n * width, _white(rng), width=rng.uniform(0.1, 0.15)))
    gutter = rng.uniform(0.4, 2.2)
    paved = (-gutter, n * width + gutter)
    walk = lambda: ((0.18, "kerb"), (rng.uniform(2.0, 5.0), "sidewalk"), (50.0, "concrete"))  # noqa: E731
    structures = ("wall" if rng.random() < 0.15 else "", "wall" if rng.random() < 0.15 else "")
    return paints, width, n, list(range(theirs, n)), paved, (walk(), walk()), structures


def _rural(rng):
    width = rng.uniform(2.9, 3.5)
    style = rng.random()
    if style < 0.45:
        centre = _line(rng, width, _yellow(rng), width=rng.uniform(0.1, 0.13), double=rng.uniform(0.2, 0.3),
                       fade=0.6)
    elif style < 0.65:
        centre = _line(rng, width, _yellow(rng), dashes=(rng.uniform(3, 4), rng.uniform(6, 9)), fade=0.6)
    else:
        centre = _line(rng, width, _white(rng), dashes=(rng.uniform(3, 4), rng.uniform(6, 9)), fade=0.6)
    paints = [centre]
    if rng.random() < 0.75:
        paints.insert(0, _line(rng, 0.0, _white(rng), width=rng.uniform(0.1, 0.15), fade=0.7))
    if rng.random() < 0.75:
        paints.append(_line(rng, 2 * width, _white(rng), width=rng.uniform(0.1, 0.15), fade=0.7))
    paved = (-rng.uniform(0.1, 0.6), 2 * width + rng.uniform(0.1, 0.6))
    shoulder = "dirt" if rng.random() < 0.5 else "gravel"
    side = lambda: ((rng.uniform(0.3, 1.5), shoulder), (50.0, "grass" if rng.random() < 0.8 else "dirt"))  # noqa: E731
    return paints, width, 2, [1], paved, (side(), side()), ("", "rail" if rng.random() < 0.15 else "")


def _materials(rng) -> dict:
    def jitter(colour, amount=0.03):  # brighter or darker, and only a slight change of hue
        gain = 1 + rng.uniform(-3, 3) * amount
        return tuple(float(np.clip(v * gain + rng.normal(0, 0.012), 0, 1)) for v in colour)

    return {"grass": jitter((0.3, 0.36, 0.2), 0.04), "dirt": jitter((0.45, 0.38, 0.28), 0.05),
            "gravel": jitter((0.5, 0.48, 0.45)), "sidewalk": jitter((0.62, 0.6, 0.57)),
            "kerb": jitter((0.72, 0.71, 0.68)), "concrete": jitter((0.55, 0.54, 0.52)),
            "rail": jitter((0.68, 0.7, 0.72)), "barrier": jitter((0.7, 0.69, 0.65)), "wall": jitter((0.55, 0.5, 0.45)),
            "tree": jitter((0.16, 0.26, 0.12), 0.04), "trunk": jitter((0.25, 0.2, 0.15)),
            "pole": (0.45, 0.46, 0.48) if rng.random() < 0.6 else jitter((0.35, 0.27, 0.2), 0.02)}


def _cars(rng, kind: str, centres, ours) -> tuple[Car, ...]:
    count = int(rng.choice([0, 1, 1, 2, 3, 4] if kind != "rural" else [0, 0, 1, 1, 2]))
    palette = [(0.9, 0.9, 0.9), (0.08, 0.08, 0.09), (0.6, 0.62, 0.64), (0.55, 0.08, 0.07), (0.1, 0.2, 0.45),
               (0.3, 0.32, 0.3), (0.75, 0.72, 0.6)]
    cars, taken = [], []
    for _ in range(count):
        lane = int(rng.integers(len(centres))) if rng.random() < 0.4 else int(rng.choice(ours))
        z = rng.uniform(10.0, 90.0)
        if any(lane == other and abs(z - z2) < 14 for other, z2 in taken):
            continue
        taken.append((lane, z))
        truck = rng.random() < 0.15
        colour = tuple(float(np.clip(c * rng.uniform(0.85, 1.1), 0, 1)) for c in palette[rng.integers(len(palette))])
        cars.append(Car(centres[lane] + rng.normal(0, 0.2), z, rng.uniform(2.3, 2.55) if truck else
                        rng.uniform(1.7, 1.95), rng.uniform(3.0, 3.8) if truck else rng.uniform(1.35, 1.7),
                        rng.uniform(8, 14) if truck else rng.uniform(4.0, 4.8), colour, truck,
                        min(rng.uniform(0, 12), z - 9.0), rng.uniform(6, 20)))
    return tuple(cars)


def _light(rng) -> dict:
    light = str(rng.choice(["day", "overcast", "dusk"], p=[0.55, 0.3, 0.15]))
    if light == "day":
        blue = rng.uniform(0.55, 0.85)
        sky = ((0.75, 0.82, 0.9), (0.35 * blue, 0.55 * blue, 0.95 * blue + 0.05))
        return dict(light=light, sky=sky, clouds=rng.uniform(0, 0.6), shadow=rng.uniform(0.35, 0.7),
                    exposure=rng.uniform(0.85, 1.2), tint=(1.0, 1.0, 1.0), noise=rng.uniform(0.5, 3.5),
                    glare=(rng.uniform(0.1, 0.9), rng.uniform(-0.1, 0.3), rng.uniform(0.2, 0.6))
                    if rng.random() < 0.25 else (0.0, 0.0, 0.0))
    if light == "overcast":
        grey = rng.uniform(0.6, 0.85)
        return dict(light=light, sky=((grey, grey, grey * 1.02), (grey * 0.85, grey * 0.87, grey * 0.92)),
                    clouds=rng.uniform(0.2, 0.8), shadow=rng.uniform(0.85, 1.0), exposure=rng.uniform(0.85, 1.15),
                    tint=(1.0, 1.0, rng.uniform(1.0, 1.06)), noise=rng.uniform(1.0, 4.0), glare=(0.0, 0.0, 0.0))
    return dict(light=light, sky=((0.95, 0.62, 0.38), (0.25, 0.3, 0.5)), clouds=rng.uniform(0, 0.5),
                shadow=rng.uniform(0.6, 0.9), exposure=rng.uniform(0.6, 0.85),
                tint=(1.1, rng.uniform(0.88, 0.95), rng.uniform(0.7, 0.85)), noise=rng.uniform(2.5, 6.0),
                glare=(rng.uniform(0.2, 0.8), rng.uniform(0.0, 0.35), rng.uniform(0.2, 0.5))
                if rng.random() < 0.3 else (0.0, 0.0, 0.0))


def sample_scene(seed: int) -> Scene:
    rng = np.random.default_rng([JUDGE_TAG, seed])
    kind = str(rng.choice(["highway", "urban", "rural"], p=[0.4, 0.3, 0.3]))
    paints, width, n, ours, paved, sides, structures = {"highway": _highway, "urban": _urban,
                                                        "rural": _rural}[kind](rng)
    centres = tuple((k + 0.5) * width for k in range(n))
    ego = int(rng.choice(ours))
    drift = rng.normal(0, 0.15) if rng.random() < 0.85 else rng.choice([-1, 1]) * rng.uniform(0.4, 0.9)
    speed = {"highway": rng.uniform(22, 33), "urban": rng.uniform(8, 15), "rural": rng.uniform(14, 25)}[kind]
    straight = rng.random() < (0.6 if kind == "urban" else 0.3)
    peak = 1 / rng.uniform(3000, 8000) if straight else 1 / rng.uniform(300, 1500)
    if kind == "urban":
        peak = min(peak, 1 / 600)
    sign = rng.choice([-1.0, 1.0])
    bends = ((sign * peak, rng.uniform(500, 1500), rng.uniform(0, 2 * math.pi)),
             (rng.uniform(-0.4, 0.4) * peak, rng.uniform(200, 500), rng.uniform(0, 2 * math.pi)))
    hills = ((rng.choice([-1.0, 1.0]) / rng.uniform(2500, 8000), rng.uniform(400, 1200),
              rng.uniform(0, 2 * math.pi)),) if rng.random() < 0.3 else ()
    concrete = rng.uniform(4.5, 6.0) if kind != "rural" and rng.random() < 0.12 else 0.0
    grey = rng.uniform(0.5, 0.68) if concrete else rng.uniform(0.12, 0.52)
    tone = rng.normal(0, 0.02, 3)
    asphalt = tuple(float(np.clip(grey * (1 + t), 0, 1)) for t in tone)
    trees = {"highway": rng.uniform(0, 1.5), "urban": rng.uniform(0, 1.0) * (rng.random() < 0.5),
             "rural": rng.uniform(0.5, 4.0)}[kind]
    lit = _light(rng)
    return Scene(
        seed=seed, kind=kind, paints=tuple(paints), lane_centres=centres, paved=paved,
        car_r=float(centres[ego] + np.clip(drift, -0.9, 0.9)), yaw=math.radians(np.clip(rng.normal(0, 0.5), -1.5, 1.5)),
        speed=speed, sway=rng.uniform(0.05, 0.4), travel=rng.uniform(0, 5000), cam_height=rng.uniform(1.0, 2.0),
        hfov=rng.uniform(50, 85), horizon=rng.uniform(0.30, 0.55),
        roll=math.radians(np.clip(rng.normal(0, 1.2), -3, 3)), bends=bends, hills=hills, asphalt=asphalt,
        concrete=concrete, grain=rng.uniform(0.02, 0.09), tracks=rng.uniform(-0.05, 0.14),
        patches=rng.uniform(0, 1.5), cracks=rng.uniform(0, 3), sides=sides, materials=_materials(rng),
        structures=structures, trees=trees, poles=rng.uniform(25, 50) if rng.random() < 0.6 else 0.0,
        buildings=kind == "urban" and rng.random() < 0.85, cars=_cars(rng, kind, centres, ours),
        light=lit["light"], sky=lit["sky"], clouds=lit["clouds"],
        background=str(rng.choice(["trees", "hills", "city", "open"],
                                  p=[0.15, 0.15, 0.6, 0.1] if kind == "urban" else [0.4, 0.3, 0.1, 0.2])),
        haze=rng.uniform(250, 2000), shadow=lit["shadow"],
        dapple=rng.uniform(0, 0.45) if trees > 0.5 and lit["light"] == "day" else 0.0,
        pole_shadows=lit["light"] == "day" and rng.random() < 0.4,
        bridge=rng.uniform(30, 120) if rng.random() < 0.08 else 0.0, glare=lit["glare"],
        exposure=lit["exposure"], gamma=rng.uniform(0.9, 1.1), tint=lit["tint"], noise=lit["noise"],
        blur=rng.uniform(0.0, 1.3), jpeg=int(rng.integers(40, 96)) if rng.random() < 0.8 else 0,
        vignette=rng.uniform(0, 0.35), margin=rng.uniform(10, 20))
