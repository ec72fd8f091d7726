"""What lies on and beside a road of the wide data and is not a lane: tar seams, cracks and ghosts of removed
markings that run along the lanes; zebra crossings and stop lines; arrows and words painted in the lanes; snow and
sand drifting onto the asphalt; sidewalks, guard rails and the buildings of a city street.

None of it is annotated (CULane annotates lane markings only), and much of it looks like a lane marking to a model
that learned "a bright or dark line running to the vanishing point": that is the point.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from orinkit.lanes.synth_camera import _chance, _mix, _rgb

# A 5x7 block font for the words painted on roads (drawn here, so no font file and no FreeType are needed): each
# glyph is its seven rows of five, top row first.
_GLYPHS = {
    "S": " #####    #     ###     #    ##### ", "T": "#####  #    #    #    #    #    #  ",
    "O": " ### #   ##   ##   ##   ##   # ### ", "P": "#### #   ##   ##### #    #    #    ",
    "L": "#    #    #    #    #    #    #####", "W": "#   ##   ##   ## # ## # ### ###   #",
    "B": "#### #   ##   ##### #   ##   ##### ", "U": "#   ##   ##   ##   ##   ##   # ### ",
    "N": "#   ###  ## # ##  ###   ##   ##   #", "Y": "#   ##   # # #   #    #    #    #  ",
    "A": " ### #   ##   #######   ##   ##   #", "X": "#   ##   # # #   #   # # #   ##   #",
    "I": "#####  #    #    #    #    #  #####", "G": " #####    #    #  ###   ##   # ####",
    "K": "#   ##  # # #  ##   # #  #  # #   #", "E": "######    #    #### #    #    #####",
    "3": "####     #    # ###     #    ##### ", "5": "######    #    ####     #    ##### ",
    "0": " ### #   ##  ### # ###  ##   # ### ",
}
_WORDS = ("STOP", "SLOW", "BUS", "ONLY", "TAXI", "XING", "KEEP", "30", "50")
# Arrows on the ground, (lateral, along) in units of their width and length.
_ARROWS = {
    "ahead": [(-0.12, 0.0), (0.12, 0.0), (0.12, 0.62), (0.5, 0.62), (0.0, 1.0), (-0.5, 0.62), (-0.12, 0.62)],
    "left": [(0.02, 0.0), (0.26, 0.0), (0.26, 0.62), (-0.12, 0.8), (-0.02, 0.95), (-0.5, 0.82), (-0.3, 0.5),
             (-0.22, 0.62), (0.02, 0.5)],
}


class _ClutterMixin:
    """Methods of :class:`~orinkit.lanes.synth_render._Renderer`."""

    def _ground_xy(self, xs, zs, up=0.0) -> np.ndarray:
        """[..., 2] image points of road-relative points (``xs`` from the road's line through the camera)."""
        cam = self.cam
        zs = np.maximum(np.asarray(zs, dtype=np.float64), 0.3)
        x, y = cam.point(cam.lateral(np.asarray(xs, dtype=np.float64), zs), zs, up)
        return np.clip(np.stack([x, y], axis=-1), -1e5, 1e5)

    def _ground_points(self, xs, zs, up=0.0) -> list[float]:
        return self._ground_xy(xs, zs, up).ravel().tolist()

    def _road_clutter(self, draw: ImageDraw.ImageDraw) -> None:
        c, o = self.rng["clutter"], self.opt
        seams, walk, signs = _chance(c, o.seams), _chance(c, o.crosswalk), _chance(c, o.road_signs)
        rails = _chance(c, o.guard_rail)
        seeds = c.integers(0, 2**63, size=6)
        self.roadside_plan = (rails, seeds[4], seeds[5])
        kind = self.scene["surroundings"]
        listed: dict = {"seams": 0, "crosswalk": False, "signs": [], "guard_rails": rails}
        if kind == "city":
            self._sidewalks(draw, np.random.default_rng(seeds[3]))
        if kind in ("snow", "sand"):
            self._drifts(draw, np.random.default_rng(seeds[3]))
        if seams:
            listed["seams"] = self._seams(draw, np.random.default_rng(seeds[0]))
        if walk:
            listed["crosswalk"] = self._crosswalk(draw, np.random.default_rng(seeds[1]))
        if signs:
            listed["signs"] = self._signs(draw, np.random.default_rng(seeds[2]))
        self.scene["clutter"] = listed

    # -- on the road ---------------------------------------------------------------------------------------------

    def _seams(self, draw: ImageDraw.ImageDraw, rng: np.random.Generator) -> int:
        """Lines along the road that are not lanes: tar-sealed joints and cracks (darker than the asphalt) and the
        ghosts of removed markings (lighter), often right beside a marking."""
        left, right = self.road_edges
        count = int(rng.integers(1, 7))
        for _ in range(count):
            kind = ("tar", "crack", "ghost")[int(rng.integers(0, 3))]
            marks = self.x_marks
            if rng.random() < 0.6:
                x = marks[int(rng.integers(0, len(marks)))] + rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 0.9)
            else:
                x = rng.uniform(left, right)
            # A camera pitched up may see no road nearer than 30 m: the seam then starts where the road does (numpy
            # refuses a range given backwards, and a data-loading worker that raises ends the training run).
            near = max(self.z_near, 3.0)
            z0 = rng.uniform(near, max(near, 30.0))
            z1 = min(z0 + rng.uniform(10.0, 90.0), self.z_end)
            wiggle, wave, phase = rng.uniform(0.0, 0.15), rng.uniform(0.2, 1.2), rng.uniform(0, 2 * np.pi)
            width = {"tar": rng.uniform(0.03, 0.12), "crack": rng.uniform(0.01, 0.04), "ghost": rng.uniform(0.1, 0.2)}
            shade = {"tar": self.asphalt * rng.uniform(0.2, 0.55), "crack": self.asphalt * rng.uniform(0.4, 0.7),
                     "ghost": _mix(self.asphalt, (235, 235, 230), rng.uniform(0.1, 0.3))}[kind]
            dash, gap = rng.uniform(2.0, 4.0), rng.uniform(3.0, 9.0)
            if z1 <= z0 + 1.0:
                continue
            zs = np.geomspace(z0, z1, 32)
            xs = x + wiggle * np.sin(wave * zs + phase)
            points = np.asarray(self._ground_points(xs, zs)).reshape(-1, 2)
            for i in range(len(zs) - 1):
                if kind == "ghost" and (0.5 * (zs[i] + zs[i + 1]) - z0) % (dash + gap) > dash:
                    continue
                pixels = self.cam.f * width[kind] / zs[i]
                draw.line([tuple(points[i]), tuple(points[i + 1])], fill=_rgb(shade) + (int(min(1.0, pixels) * 255),),
                          width=max(1, round(pixels)))
        # Cracks across the lanes.
        for _ in range(int(rng.integers(0, 4))):
            near = max(self.z_near, 4.0)
            z = rng.uniform(near, max(near, 40.0))  # as for the seams: at the road's start when it begins past 40 m
            if z < self.z_end:
                xs = np.linspace(rng.uniform(left, right), rng.uniform(left, right), 6)
                zs = z + rng.uniform(-0.3, 0.3, 6)
                draw.line(self._ground_points(xs, zs), fill=_rgb(self.asphalt * 0.5), width=1)
        return count

    def _paint(self, rng: np.random.Generator) -> tuple[int, ...]:
        return _rgb(np.full(3, rng.uniform(200, 240)) + rng.uniform(-5, 5, 3))

    def _crosswalk(self, draw: ImageDraw.ImageDraw, rng: np.random.Generator) -> bool:
        """Zebra stripes across the whole road (each stripe a bar along the road: lines again) and a stop line."""
        left, right = self.road_edges
        z0, depth = rng.uniform(7.0, 35.0), rng.uniform(2.5, 4.5)
        stripe, gap = rng.uniform(0.4, 0.6), rng.uniform(0.4, 0.8)
        stop_gap, stop_depth = rng.uniform(1.0, 3.0), rng.uniform(0.3, 0.5)
        colour = self._paint(rng)
        if z0 + depth >= self.z_end:
            return False
        x = left + rng.uniform(0.0, gap)
        while x + stripe < right:
            draw.polygon(self._ground_points([x, x + stripe, x + stripe, x], [z0, z0, z0 + depth, z0 + depth]),
                         fill=colour)
            x += stripe + gap
        zs = z0 - stop_gap - np.array([stop_depth, stop_depth, 0.0, 0.0])
        xs = np.array([left, self.x_marks[-1], self.x_marks[-1], left]) if rng.random() < 0.5 else \
            np.array([left, right, right, left])
        if zs.min() > self.z_near:
            draw.polygon(self._ground_points(xs, zs), fill=colour)
        return True

    def _signs(self, draw: ImageDraw.ImageDraw, rng: np.random.Generator) -> list[str]:
        """Arrows and words painted in the middle of lanes, long along the road as road paint is."""
        drawn = []
        for _ in range(int(rng.integers(1, 4))):
            lane = int(rng.integers(0, len(self.x_marks) - 1))
            centre = 0.5 * (self.x_marks[lane] + self.x_marks[lane + 1]) + rng.uniform(-0.2, 0.2)
            z0, colour = rng.uniform(5.0, 40.0), self._paint(rng)
            kind = ("ahead", "left", "right", "word")[int(rng.integers(0, 4))]
            word = _WORDS[int(rng.integers(0, len(_WORDS)))]
            length, width = rng.uniform(3.5, 6.0), rng.uniform(0.7, 1.1)
            if z0 + length >= self.z_end:
                continue
            if kind == "word":
                self._word(draw, word, centre, z0, length, min(2.4, 0.45 * len(word)), colour)
                drawn.append(word)
                continue
            shape = np.array(_ARROWS["left" if kind == "right" else kind])
            xs = centre + shape[:, 0] * width * (-1.0 if kind == "right" else 1.0)
            draw.polygon(self._ground_points(xs, z0 + shape[:, 1] * length), fill=colour)
            drawn.append(kind)
        return drawn

    def _word(self, draw: ImageDraw.ImageDraw, word: str, centre: float, z0: float, length: float, width: float,
              colour: tuple) -> None:
        cell_w, cell_h = width / (6 * len(word) - 1), length / 7.0
        cells = [(index * 6 + col, row) for index, letter in enumerate(word) for row in range(7) for col in range(5)
                 if _GLYPHS[letter][row * 5 + col] == "#"]
        if not cells:
            return
        col, row = np.array(cells, dtype=np.float64).T
        x = centre - width / 2 + col * cell_w
        z_far = z0 + length - row * cell_h
        quads = self._ground_xy(np.stack([x, x + cell_w, x + cell_w, x], axis=1),
                                np.stack([z_far - cell_h, z_far - cell_h, z_far, z_far], axis=1))
        for quad in quads:
            draw.polygon(quad.ravel().tolist(), fill=colour)

    def _drifts(self, draw: ImageDraw.ImageDraw, rng: np.random.Generator) -> None:
        """Snow or sand blown over the road's edges, ragged."""
        left, right = self.road_edges
        zs = np.geomspace(max(self.z_near * 0.9, 1.0), max(self.z_end, 2.0), 40)
        for edge, inwards in ((left, 1.0), (right, -1.0)):
            if rng.random() < 0.3:
                continue
            reach = np.clip(rng.uniform(0.1, 1.6) + 0.5 * np.sin(rng.uniform(0.1, 0.6) * zs + rng.uniform(0, 6))
                            + rng.uniform(-0.2, 0.2, zs.size), 0.0, None)
            xs = np.r_[np.full(zs.size, edge - inwards * 0.5), (edge + inwards * reach)[::-1]]
            draw.polygon(self._ground_points(xs, np.r_[zs, zs[::-1]]), fill=_rgb(self.verge * rng.uniform(0.92, 1.0)))

    def _sidewalks(self, draw: ImageDraw.ImageDraw, rng: np.random.Generator) -> None:
        left, right = self.road_edges
        near, far = self.z_near * 0.98, self.z_end if self.short else 4.0 * self.z_end
        self.setbacks = rng.uniform(2.0, 6.0, 2)
        kerb = np.full(3, rng.uniform(140, 200))
        walk = _mix(self.verge, kerb, rng.uniform(0.0, 0.5))
        draw.polygon(self._ground_polygon(left - self.setbacks[0], left, near, far, 32), fill=_rgb(walk))
        draw.polygon(self._ground_polygon(right, right + self.setbacks[1], near, far, 32), fill=_rgb(walk))
        for x in (left - 0.2, right):
            draw.polygon(self._ground_polygon(x, x + 0.2, near, far, 32), fill=_rgb(kerb))

    # -- beside the road -----------------------------------------------------------------------------------------

    def _roadside(self, image: Image.Image) -> None:
        rails, rail_seed, house_seed = self.roadside_plan
        if not rails and self.scene["surroundings"] != "city":
            return
        draw = ImageDraw.Draw(image)
        if self.scene["surroundings"] == "city":
            self._buildings(draw, np.random.default_rng(house_seed))
        if rails:
            self._guard_rails(draw, np.random.default_rng(rail_seed))

    def _guard_rails(self, draw: ImageDraw.ImageDraw, rng: np.random.Generator) -> None:
        """Steel rails on posts just off the road's edge: two long bright lines running to the vanishing point."""
        left, right = self.road_edges
        sides = [(left - rng.uniform(0.3, 1.2), -1.0), (right + rng.uniform(0.3, 1.2), 1.0)]
        keep = [sides[i] for i in ((0, 1), (0,), (1,))[int(rng.integers(0, 3))]]
        metal = np.full(3, rng.uniform(120, 205)) + rng.uniform(-6, 6, 3)
        spacing, low, high = rng.uniform(2.0, 4.0), rng.uniform(0.4, 0.55), rng.uniform(0.7, 0.85)
        z0 = max(self.z_near * 0.6, 1.0)
        z1 = min(self.z_end, 150.0)
        if z1 <= z0:
            return
        for x, _ in keep:
            zs = np.geomspace(z0, z1, 48)
            posts = np.arange(np.ceil(z0 / spacing) * spacing, z1, spacing)
            ends = self._ground_xy(np.full((posts.size, 2), x), np.repeat(posts[:, None], 2, axis=1),
                                   up=np.array([0.0, high]))
            for z, end in zip(posts[::-1], ends[::-1]):
                draw.line(end.ravel().tolist(), fill=_rgb(metal * 0.45), width=max(1, round(self.cam.f * 0.1 / z)))
            face = self._ground_points(np.full(2 * zs.size, x), np.r_[zs, zs[::-1]],
                                       up=np.r_[np.full(zs.size, high), np.full(zs.size, low)])
            draw.polygon(face, fill=_rgb(metal))
            middle = self._ground_points(np.full(zs.size, x), zs, up=np.full(zs.size, 0.5 * (low + high)))
            draw.line(middle, fill=_rgb(metal * 0.75), width=1)

    def _buildings(self, draw: ImageDraw.ImageDraw, rng: np.random.Generator) -> None:
        """House fronts along both sides of a city street, far ones first, with a line at every floor."""
        left, right = self.road_edges
        setbacks = getattr(self, "setbacks", (3.0, 3.0))
        faces = []
        for side, edge, setback in ((-1.0, left, setbacks[0]), (1.0, right, setbacks[1])):
            x, z = edge + side * setback, rng.uniform(2.0, 12.0)
            while z < min(self.z_end, 160.0):
                length, tall, depth = rng.uniform(6.0, 25.0), rng.uniform(5.0, 35.0), rng.uniform(5.0, 15.0)
                colour = np.array([rng.uniform(90, 210), rng.uniform(80, 190), rng.uniform(70, 180)])
                colour = _mix(colour, np.full(3, colour.mean()), rng.uniform(0.5, 1.0))
                if rng.random() > 0.15:
                    faces.append((z, x, side, length, tall, depth, colour))
                z += length + (rng.uniform(6.0, 14.0) if rng.random() < 0.2 else 0.0)
        for z, x, side, length, tall, depth, colour in sorted(faces, key=lambda face: -face[0]):
            up = np.array([0.0, 0.0, tall, tall])
            draw.polygon(self._ground_points([x, x + side * depth, x + side * depth, x], [z] * 4, up),
                         fill=_rgb(colour * 0.8))
            draw.polygon(self._ground_points([x] * 4, [z, z + length, z + length, z], up), fill=_rgb(colour))
            floors = np.arange(3.0, tall, 3.0)
            if floors.size:
                lines = self._ground_xy(np.full((floors.size, 2), x), np.tile([z, z + length], (floors.size, 1)),
                                        up=np.repeat(floors[:, None], 2, axis=1))
                for line in lines:
                    draw.line(line.ravel().tolist(), fill=_rgb(colour * 0.6), width=1)
