"""What only the wide data draws: cameras of other aspects, S-bends, lanes that end or open, double lines and raised
dots, other surroundings (sand, snow, concrete, city), flat colours and photographs.

Every draw here comes from the wide data's own generators (``shape``, ``look``, ``optics``; clutter's in
:mod:`~orinkit.lanes.synth_clutter`), each decision drawn whatever the options, so that switching one effect off
changes nothing else, and with every wide option off a road is exactly the first renderer's.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from orinkit.lanes.synth_camera import _chance, _flat, _mix, _rgb
from orinkit.lanes.synth_clutter import _ClutterMixin
from orinkit.lanes.synth_optics import distort_image, source_points, vignette_mask

_ANY = 1 << 16       # an index drawn once and taken modulo the length of whatever list it picks from


class _WideMixin(_ClutterMixin):
    """Methods of :class:`~orinkit.lanes.synth_render._Renderer`."""

    # -- geometry ------------------------------------------------------------------------------------------------

    def _wide_geometry(self, curvature: float) -> tuple[float, float]:
        """The pixel aspect and the curvature's change along the road; the lens; plans for a merging lane."""
        s, o = self.rng["shape"], self.opt
        pick = int(s.integers(0, _ANY))
        aspect = o.camera_aspects[pick % len(o.camera_aspects)] if o.camera_aspects else None
        sy = aspect * self.height / self.width if aspect else 1.0
        bend, change = _chance(s, o.s_curve), s.uniform(*o.curvature_change)
        # Mostly an S-bend (the curvature turns against the bend the road starts with), else a tightening bend.
        against, either = s.random() < 0.7, s.random() < 0.5
        sign = (-1.0 if against else 1.0) * math.copysign(1.0, curvature) if curvature else (1.0 if either else -1.0)
        change = sign * change if bend else 0.0
        self.merge_plan = (_chance(s, o.merge), bool(s.random() < 0.5), s.uniform(8.0, 45.0), s.uniform(0.03, 0.1),
                           bool(s.random() < 0.5))
        p = self.rng["optics"]
        distort, k = _chance(p, o.distortion), p.uniform(*o.distortion_k)
        # In steps of 0.03: a few cached maps then serve every image.
        self.lens_k = round(round(float(k) / 0.03) * 0.03, 2) if distort else 0.0
        self.scene["distortion_k"] = self.lens_k or None
        return sy, change

    def _wide_markings(self) -> None:
        s, o = self.rng["shape"], self.opt
        n = len(self.markings)
        for k, marking in enumerate(self.markings):
            double, half = _chance(s, o.double), s.uniform(0.08, 0.15)
            dots, dash, gap, width = _chance(s, o.dots), s.uniform(0.1, 0.2), s.uniform(0.8, 2.0), s.uniform(0.1, 0.15)
            phase = s.uniform(0.0, 1.0)
            if double and 0 < k < n - 1:
                # Two solid lines whose lane (as CULane draws it) is the line between them.
                marking.double, marking.dashed = half + marking.width / 2.0, False
            elif dots and marking.dashed:
                marking.dots, marking.dash, marking.gap, marking.width = True, dash, gap, width
                marking.phase = phase * (dash + gap)
        on, ends, z0, rate, right_first = self.merge_plan
        ego = self.scene["ego_lane"]
        # Only a marking beyond the ego lane's own two moves: the lane next to the car ends or opens.
        candidates = [i for i, ok in ((n - 1, ego + 1 < n - 1), (0, ego > 0)) if ok]
        if not (on and candidates):
            return
        index = candidates[0] if right_first or len(candidates) == 1 else candidates[1]
        marking = self.markings[index]
        neighbour = self.markings[index - 1 if index else 1]
        apart = abs(marking.x0 - neighbour.x0)
        towards = math.copysign(1.0, neighbour.x0 - marking.x0)
        if ends:
            marking.merge, marking.z_max = (z0, rate, apart, towards), z0 + apart / rate
        else:
            marking.x0 = neighbour.x0
            marking.merge, marking.z_min = (z0, rate, apart, -towards), z0 + 0.25 / rate

    # -- appearance ----------------------------------------------------------------------------------------------

    def _wide_palette(self) -> None:
        look, o = self.rng["look"], self.opt
        if o.photo:
            from orinkit.lanes.synth_photo import photo_folder

            photo_folder()  # every road of these options fails without the photographs, not only those that use them
        pick = int(look.integers(0, _ANY))
        kind = o.surroundings[pick % len(o.surroundings)] if o.surroundings else None
        self.flat = _chance(look, o.flat)
        photo = _chance(look, o.photo)
        backdrop, ground, texture = bool(look.random() < 0.65), bool(look.random() < 0.5), bool(look.random() < 0.6)
        self.photo_plan = {"backdrop": photo and backdrop, "ground": photo and ground and kind not in ("snow", "city"),
                           "texture": photo and texture, "pick": int(look.integers(0, _ANY)),
                           "corner": look.random(2), "height": look.uniform(0.25, 1.0), "alpha": look.uniform(0.4, 0.9),
                           "mirror": bool(look.random() < 0.5)}
        verges = {
            "grass": [look.uniform(35, 110), look.uniform(75, 150), look.uniform(20, 70)],
            "dry": [look.uniform(120, 185), look.uniform(105, 160), look.uniform(60, 110)],
            "gravel": np.full(3, look.uniform(80, 150)) + look.uniform(-10, 10, size=3),
            "sand": [look.uniform(175, 230), look.uniform(150, 205), look.uniform(95, 150)],
            "snow": np.full(3, look.uniform(200, 250)) + np.array([-6.0, -2.0, 4.0]) * look.random(),
            "concrete": np.full(3, look.uniform(125, 195)) + look.uniform(-6, 6, size=3),
            "city": np.full(3, look.uniform(110, 180)) + look.uniform(-8, 8, size=3),
        }
        flat_sky = bool(look.random() < 0.3)
        sky = [look.uniform(60, 250), look.uniform(80, 250), look.uniform(110, 255)]
        tinted, tint = bool(look.random() < 0.25), look.uniform(-14, 14, size=3)
        photo_texture = int(look.integers(0, _ANY))
        self.texture_tile = ("texture", self.texture)
        if kind is not None:
            self.verge = np.clip(np.asarray(verges[kind], dtype=np.float64), 0, 255)
        if self.flat and flat_sky:
            self.sky_top = self.sky_low = np.asarray(sky)
        if tinted and o.surroundings:
            self.asphalt = np.clip(self.asphalt + tint, 0, 255)
        if self.photo_plan["texture"]:
            from orinkit.lanes.synth_photo import DETAIL_TILES

            self.texture_tile = ("photo", photo_texture % DETAIL_TILES)
        self.scene["surroundings"] = kind
        self.scene["look"] = {"flat": self.flat, "photo": {k: v for k, v in self.photo_plan.items()
                                                           if k in ("backdrop", "ground", "texture")}}

    def _surroundings(self, image: Image.Image, draw: ImageDraw.ImageDraw) -> None:
        """A photograph behind the horizon and on the verges, and a city's skyline (before the road is drawn)."""
        plan = self.photo_plan
        if plan["backdrop"] or plan["ground"]:
            from orinkit.lanes.synth_photo import backdrop, foliage

            above = Image.new("L", image.size, 0)
            if plan["backdrop"]:
                ImageDraw.Draw(above).polygon(self._horizon_polygon(below=False, margin=4.0), fill=255)
                top = max(float(self.cam.horizon_y(np.array([0.0, self.width - 1.0])).max()), 8.0)
                tall = max(int(top * (0.6 + 0.6 * plan["height"])), 8)
                picture = backdrop(plan["pick"], self.width, tall, plan["corner"], plan["mirror"])
                layer = image.copy()
                layer.paste(picture, (0, int(round(top)) - tall + 2))
                image.paste(layer, (0, 0), above)
            if plan["ground"]:
                below = Image.new("L", image.size, 0)
                ImageDraw.Draw(below).polygon(self._horizon_polygon(below=True), fill=int(255 * plan["alpha"]))
                picture = foliage(plan["pick"], self.width, self.height, plan["corner"], plan["mirror"])
                image.paste(picture, (0, 0), below)
        if self.scene["surroundings"] == "city":
            self._skyline(draw)

    def _skyline(self, draw: ImageDraw.ImageDraw) -> None:
        """Tall buildings standing on the horizon, far off."""
        look, cam = self.rng["look"], self.cam
        count = 24
        widths = look.uniform(0.04, 0.16, count) * self.width
        talls = look.uniform(0.1, 0.9, count) * max(float(cam.hz), 10.0)
        greys = look.uniform(0.35, 0.85, count)
        u = -0.05 * self.width
        for width, tall, grey in zip(widths, talls, greys):
            if u > self.width * 1.05:
                break
            xs = np.array([u, u + width, u + width, u])
            vs = cam.hz + 1.0 - np.array([0.0, 0.0, tall, tall])
            draw.polygon(_flat(*cam.to_image(xs, vs)), fill=_rgb(_mix(self.sky_low * grey, self.sky_low, 0.35)))
            u += width * 1.02

    # -- the camera ----------------------------------------------------------------------------------------------

    def _lens_points(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where pinhole image points land in the distorted image."""
        return source_points(x, y, self.width, self.height, self.lens_k, inverse=True)

    def _optics(self, image: Image.Image) -> Image.Image:
        """A low-resolution camera scaled up, the lens's barrel distortion and vignetting (before the sensor's
        blur, noise and JPEG)."""
        p, o = self.rng["optics"], self.opt
        small, scale = _chance(p, o.low_res), p.uniform(*o.low_res_scale)
        dark, strength, shift = _chance(p, o.vignette), p.uniform(*o.vignette_strength), p.uniform(-0.15, 0.15, 2)
        size = (max(16, round(self.width * scale)), max(16, round(self.height * scale)))
        if small and size != image.size:
            image = image.resize(size, Image.Resampling.BOX).resize(image.size, Image.Resampling.BILINEAR)
        if self.lens_k:
            image = distort_image(image, self.lens_k)
        if dark and strength > 0:
            mask = vignette_mask(self.width, self.height, float(strength), float(shift[0]), float(shift[1]))
            image = Image.composite(image, Image.new("RGB", image.size, 0), mask)
        self.scene.update({"low_res": float(scale) if small else None,
                           "vignette": float(strength) if dark and strength > 0 else None})
        return image
