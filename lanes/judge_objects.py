"""The judge renderer's things that stand on the ground (rails, barriers, walls, buildings, trees, poles, an
overpass, cars ahead), drawn far to near with Pillow over the shaded ground, and the camera's flaws.

Roadside things come from 40 m cells of road (one generator each), so a drive passes the same ones.
"""

from __future__ import annotations

import io
import math

import numpy as np

from orinkit.lanes.judge_ground import CELL
from orinkit.lanes.judge_scene import JUDGE_TAG, Scene
from orinkit.lanes.judge_view import View

FAR = 250.0  # metres: things farther away are a few pixels and are left to the horizon's land


class _Shapes:
    """Shapes with their distance; drawn farthest first, hazed by their distance."""

    def __init__(self, view: View) -> None:
        self.view, self.items = view, []
        self.near, self.far = 1.5, min(FAR, view.z_end)

    def _rgb(self, colour, z: float) -> tuple[int, int, int]:
        fog = 1 - math.exp(-z / self.view.scene.haze)
        sky = self.view.scene.sky[0]
        return tuple(int(255 * np.clip(c + (h - c) * fog, 0, 1)) for c, h in zip(colour, sky))

    def quad(self, r, z, up, colour, depth=None, layer=1) -> None:
        """A polygon of road-frame corners (sequences ``r``, ``z``, ``up``), every corner in view. Layers are
        drawn in turn (0: building fronts, 0.5: their windows, 1: the rest), each farthest first."""
        z = np.asarray(z, float)
        if z.min() < self.near or z.max() > self.far:
            return
        x, y = self.view.project(r, z, up)
        depth = float(z.mean()) if depth is None else depth
        self.items.append((layer, depth, "polygon", list(zip(x.tolist(), y.tolist())), self._rgb(colour, depth)))

    def band(self, r, z0, z1, low, high, colour, steps=None, layer=1) -> None:
        """A vertical band along the road at ``r`` from ``z0`` to ``z1``, ``low`` to ``high`` above the ground."""
        z0, z1 = max(z0, self.near), min(z1, self.far)
        if z1 <= z0:
            return
        cuts = np.geomspace(z0, z1, steps or max(2, int(8 * math.log(z1 / z0)) + 2))
        for a, b in zip(cuts[:-1], cuts[1:]):
            self.quad([r, r, r, r], [a, b, b, a], [low, low, high, high], colour, layer=layer)

    def stick(self, r, z, low, high, thick, colour) -> None:
        if not self.near <= z <= self.far:
            return
        x, y = self.view.project([r, r], [z, z], [low, high])
        width = max(1, round(self.view.f * thick / z))
        self.items.append((1, z, "line", (list(zip(x.tolist(), y.tolist())), width), self._rgb(colour, z)))

    def blob(self, r, z, up, radius, colour) -> None:
        if not self.near <= z <= self.far:
            return
        x, y = self.view.project(r, z, up)
        size = self.view.f * radius / z
        self.items.append((1, z, "ellipse", [float(x) - size, float(y) - size * 0.9, float(x) + size,
                                          float(y) + size * 0.9], self._rgb(colour, z)))

    def draw(self, picture) -> None:
        from PIL import ImageDraw

        pen = ImageDraw.Draw(picture)
        for _, _, kind, shape, fill in sorted(self.items, key=lambda item: (item[0], -item[1])):
            if kind == "polygon":
                pen.polygon(shape, fill=fill)
            elif kind == "line":
                pen.line(shape[0], fill=fill, width=shape[1])
            else:
                pen.ellipse(shape, fill=fill)


def _outer(scene: Scene, side: int) -> float:
    """r of the far edge of the pavement beside the road on ``side`` (0 left, 1 right)."""
    walk = sum(w for w, m in scene.sides[side] if m in ("kerb", "sidewalk"))
    return scene.paved[0] - walk if side == 0 else scene.paved[1] + walk


def _structures(scene: Scene, shapes: _Shapes, view: View) -> None:
    m = scene.materials
    for side, kind in enumerate(scene.structures):
        sign = -1 if side == 0 else 1
        if kind == "rail":
            r = scene.paved[side] + sign * 0.4
            shapes.band(r, 0, FAR, 0.5, 0.8, m["rail"])
            for s in np.arange(math.ceil(view.travel / 4) * 4, view.travel + 80, 4.0):
                shapes.stick(r + sign * 0.1, s - view.travel, 0.0, 0.62, 0.12, np.asarray(m["rail"]) * 0.6)
        elif kind == "barrier":
            r = scene.paved[side] + sign * 0.3
            shapes.band(r, 0, FAR, 0.0, 0.35, np.asarray(m["barrier"]) * 0.8)
            shapes.band(r + sign * 0.12, 0, FAR, 0.35, 0.85, m["barrier"])
        elif kind == "wall":
            shapes.band(_outer(scene, side) + sign * 0.2, 0, FAR, 0.0, 2.2, m["wall"], layer=0)


def _roadside(scene: Scene, shapes: _Shapes, view: View) -> None:
    m = scene.materials
    for cell in range(int(view.travel // CELL), int((view.travel + FAR) // CELL) + 1):
        for side in (0, 1):
            sign = -1 if side == 0 else 1
            rng = np.random.default_rng([JUDGE_TAG, scene.seed, 9, cell, side])
            if scene.buildings:
                s, end = cell * CELL + rng.uniform(0, 3), (cell + 1) * CELL
                while s < end - 4:
                    length = rng.uniform(8, 25)
                    tall = rng.uniform(6, 25)
                    r = _outer(scene, side) + sign * rng.uniform(0.3, 1.5)
                    colour = np.asarray(rng.choice([(0.7, 0.62, 0.5), (0.55, 0.3, 0.22), (0.8, 0.8, 0.76),
                                                    (0.45, 0.45, 0.48), (0.6, 0.55, 0.45)]))
                    colour = colour * rng.uniform(0.75, 1.05) * (0.85 if side else 1.0)
                    z0, z1 = s - view.travel, min(s + length, end) - view.travel
                    shapes.band(r, z0, z1, 0, tall, colour, steps=4, layer=0)
                    if 0 < z0 < 90:
                        window = colour * 0.35 + np.asarray((0.1, 0.13, 0.18))
                        for floor in np.arange(3.5, tall - 1.5, 3.0):
                            for w in np.arange(z0 + 1.0, z1 - 1.5, rng.uniform(2.5, 4.0)):
                                shapes.quad([r - sign * 0.01] * 4, [w, w + 1.2, w + 1.2, w],
                                            [floor, floor, floor + 1.5, floor + 1.5], window, layer=0.5)
                    s += length + rng.uniform(0, 4)
            for _ in range(rng.poisson(scene.trees)):
                s = cell * CELL + rng.uniform(0, CELL)
                r = _outer(scene, side) + (sign * rng.uniform(1.0, 12.0) if not scene.buildings else
                                           -sign * rng.uniform(0.6, 1.2))
                tall = rng.uniform(5, 12)
                crown = tall * rng.uniform(0.25, 0.4)
                z = s - view.travel
                shapes.stick(r, z, 0, tall - crown, 0.3, m["trunk"])
                for k in range(3):
                    shade = np.asarray(m["tree"]) * rng.uniform(0.7, 1.3)
                    shapes.blob(r + rng.normal(0, crown * 0.3), z - 0.01 * k, tall - crown * rng.uniform(0.6, 1.1),
                                crown * rng.uniform(0.6, 1.0), shade)
            if scene.poles and (side == 1 or scene.kind == "urban"):
                for s in np.arange(cell * CELL, (cell + 1) * CELL, scene.poles) + rng.uniform(0, scene.poles):
                    r, z, tall = _outer(scene, side) + sign * 0.4, s - view.travel, rng.uniform(7, 10)
                    shapes.stick(r, z, 0, tall, 0.2, m["pole"])
                    if scene.kind != "rural":
                        shapes.quad([r, r - sign * 2.2, r - sign * 2.2, r], [z, z, z, z],
                                    [tall, tall - 0.1, tall - 0.25, tall - 0.15], m["pole"])


def _bridge(scene: Scene, shapes: _Shapes, view: View) -> None:
    z = scene.travel + scene.bridge - view.travel
    left, right = scene.paved[0] - 30, scene.paved[1] + 30
    grey = np.asarray(scene.materials["barrier"]) * 0.75
    shapes.quad([left, right, right, left], [z + 9, z + 9, z, z], [5.2] * 4, grey * 0.45, depth=z + 9)
    for r in (scene.paved[0] - 1.2, scene.paved[1] + 1.2):
        shapes.quad([r - 0.5, r + 0.5, r + 0.5, r - 0.5], [z + 4] * 4, [0, 0, 5.2, 5.2], grey * 0.8, depth=z + 4)
    shapes.quad([left, right, right, left], [z] * 4, [5.2, 5.2, 6.8, 6.8], grey, depth=z)


def _car(scene: Scene, shapes: _Shapes, car, z: float) -> None:
    r, w, h, body = car.r, car.width, car.height, np.asarray(car.colour)
    a, b = r - w / 2, r + w / 2
    dark = np.asarray(scene.asphalt) * 0.35
    shapes.quad([a - 0.1, b + 0.1, b + 0.1, a - 0.1], [z - 0.3, z - 0.3, z + car.length, z + car.length],
                [0.0] * 4, dark, depth=z + car.length)
    side = a if r > shapes.view.car_r + w / 2 else b if r < shapes.view.car_r - w / 2 else None
    if side is not None:
        top = h if car.truck else h * 0.6
        shapes.quad([side] * 4, [z, z + car.length, z + car.length, z], [0.3, 0.3, top, top], body * 0.7,
                    depth=z + 0.01)
    for wheel in (a + 0.05, b - 0.35):
        shapes.quad([wheel, wheel + 0.3, wheel + 0.3, wheel], [z + 0.3] * 4, [0, 0, 0.4, 0.4], (0.04, 0.04, 0.04),
                    depth=z + 0.005)
    if car.truck:
        shapes.quad([a, b, b, a], [z] * 4, [0.3, 0.3, 0.55, 0.55], (0.08, 0.08, 0.08), depth=z)
        shapes.quad([a, b, b, a], [z] * 4, [0.55, 0.55, h, h], body, depth=z)
    else:
        shapes.quad([a, b, b, a], [z] * 4, [0.3, 0.3, h * 0.6, h * 0.6], body, depth=z)
        inset = w * 0.1
        shapes.quad([a + inset, b - inset, b - inset * 1.5, a + inset * 1.5], [z + 0.5] * 4,
                    [h * 0.6, h * 0.6, h, h], body * 0.9, depth=z - 0.001)
        shapes.quad([a + inset * 1.4, b - inset * 1.4, b - inset * 1.8, a + inset * 1.8], [z + 0.45] * 4,
                    [h * 0.64, h * 0.64, h * 0.94, h * 0.94], (0.1, 0.12, 0.15), depth=z - 0.002)
        shapes.quad([a, b, b, a], [z - 0.05] * 4, [0.3, 0.3, 0.45, 0.45], body * 0.5, depth=z - 0.003)
    for light in (a + 0.05, b - 0.3):
        shapes.quad([light, light + 0.25, light + 0.25, light], [z - 0.02] * 4, [h * 0.5, h * 0.5, h * 0.58, h * 0.58],
                    (0.75, 0.08, 0.06), depth=z - 0.004)
    shapes.quad([r - 0.25, r + 0.25, r + 0.25, r - 0.25], [z - 0.02] * 4, [0.5, 0.5, 0.62, 0.62],
                (0.85, 0.85, 0.8), depth=z - 0.004)


def draw_objects(view: View, picture, time_s: float = 0.0) -> None:
    """Draw the scene's upright things on ``picture`` (a Pillow RGB image of the shaded ground and sky)."""
    scene = view.scene
    shapes = _Shapes(view)
    _structures(scene, shapes, view)
    _roadside(scene, shapes, view)
    if scene.bridge:
        _bridge(scene, shapes, view)
    for car in scene.cars:
        _car(scene, shapes, car, car.z + car.swing * math.sin(2 * math.pi * time_s / car.period))
    shapes.draw(picture)


def finish(scene: Scene, rgb: np.ndarray, rng: np.random.Generator, *, jpeg: bool) -> np.ndarray:
    """The camera: glare, exposure and tint, vignetting, blur, sensor noise, JPEG. ``rgb`` [H, W, 3] in 0..1;
    returns uint8 BGR."""
    from PIL import Image, ImageFilter

    height, width = rgb.shape[:2]
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    if scene.glare[2]:
        gx, gy, strength = scene.glare[0] * width, scene.glare[1] * height, scene.glare[2]
        d2 = (x - gx) ** 2 + (y - gy) ** 2
        halo = strength * (np.exp(-d2 / (2 * (0.25 * width) ** 2)) + 0.8 * np.exp(-d2 / (2 * (0.04 * width) ** 2)))
        rgb = rgb + halo[..., None] * np.asarray((1.0, 0.95, 0.85))
    rgb = np.clip(rgb * scene.exposure * np.asarray(scene.tint), 0, 1) ** scene.gamma
    if scene.vignette:
        d2 = ((x - width / 2) / (width / 2)) ** 2 + ((y - height / 2) / (height / 2)) ** 2
        rgb = rgb * (1 - scene.vignette * 0.5 * d2)[..., None]
    picture = Image.fromarray(np.clip(rgb * 255 + 0.5, 0, 255).astype(np.uint8))
    radius = scene.blur * height / 720
    if radius > 0.2:
        picture = picture.filter(ImageFilter.GaussianBlur(radius))
    pixels = np.asarray(picture, dtype=np.float32)
    grain = scene.noise * (rng.standard_normal((height, width, 1), dtype=np.float32)
                           + 0.4 * rng.standard_normal((height, width, 3), dtype=np.float32))
    pixels = np.clip(pixels + grain + 0.5, 0, 255).astype(np.uint8)
    if jpeg and scene.jpeg:
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "JPEG", quality=scene.jpeg)
        pixels = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    return np.ascontiguousarray(pixels[..., ::-1])
