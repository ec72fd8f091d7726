"""The renderer: geometry, markings and their ground truth, the ground, and the camera's response.

Scenery, shadows and vehicles come from :mod:`~orinkit.lanes.synth_scenery`; what only the wide data draws
(surroundings, photographs, clutter on and beside the road, lens effects) from :mod:`~orinkit.lanes.synth_wide`.
Each aspect of a scene draws from its own generator, so switching an effect off leaves every other aspect
unchanged, and the wide data's generators are new ones: with their options off, a road is the first renderer's.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

from orinkit.lanes.synth_camera import _NOISE_LEVELS, _blur_kernel, _Camera, _chance, _flat, _mix, _noise_crop, _rgb
from orinkit.lanes.synth_options import RoadSample, SynthOptions, lane_rows
from orinkit.lanes.synth_paint import _Marking, _paint_marking
from orinkit.lanes.synth_scenery import _SceneryMixin
from orinkit.lanes.synth_wide import _WideMixin

# A marking stops where it runs flatter than this (|dx/dy| in the image): beyond, one image row would cut it over a
# long stretch and the per-row annotation (one x per row) stops meaning anything.
_MAX_SLOPE = 25.0
# The first eight are the first renderer's; the wide data's come after them (spawned children keep their order).
_STREAMS = ("geometry", "markings", "appearance", "scenery", "vehicles", "shadows", "lighting", "sensor",
            "shape", "look", "clutter", "optics")


class _Renderer(_SceneryMixin, _WideMixin):
    def __init__(self, seed: int, width: int, height: int, options: SynthOptions, n_rows: int,
                 rngs: dict[str, np.random.Generator]) -> None:
        self.width, self.height, self.opt, self.n_rows, self.rng = width, height, options, n_rows, rngs
        self.scene: dict[str, Any] = {"seed": seed, "width": width, "height": height}

    def render(self) -> RoadSample:
        self._geometry()
        self._markings()
        self._palette()
        lanes = self._ground_truth()
        vehicles = self._plan_vehicles()
        lut = self._lut()

        image = self._base()
        draw = ImageDraw.Draw(image, "RGBA")
        self._scenery(draw)
        self._surroundings(image, draw)
        self._road(draw)
        self._road_clutter(draw)
        canvas = np.array(image)
        skew = (self.cam.cos, self.cam.sy * self.cam.sin) if self.cam.sy != 1.0 else None
        for marking in self.markings:
            if marking.worn:
                marking.colour = _mix(marking.colour, self.asphalt, marking.fade)
            for track in marking.painted_tracks():
                _paint_marking(canvas, marking, self.cam.f, track, skew)
        image = Image.fromarray(canvas)
        self._haze_and_texture(image)
        self._shadows(image, vehicles)
        self._roadside(image)
        self._draw_vehicles(image, vehicles)
        image = image.point(lut.ravel().tolist())
        pixels = self._sensor(image)

        self.scene["markings"] = [
            {"colour": "yellow" if m.yellow else "white", "dashed": m.dashed, "worn": m.worn,
             "x_m": float(m.x0), "width_m": float(m.width), "dash_m": float(m.dash) if m.dashed else None,
             "gap_m": float(m.gap) if m.dashed else None, "phase_m": float(m.phase) if m.dashed else None,
             "z_start_m": float(m.z_lo), "z_end_m": float(m.z_hi),
             "rgb": [int(lut[c, round(float(np.clip(m.colour[c], 0, 255)))]) for c in range(3)],
             "lane_index": m.lane_index, "double": bool(m.double), "dots": m.dots,
             "merge": None if m.merge is None else {"z_m": m.merge[0], "rate": m.merge[1], "limit_m": m.merge[2],
                                                    "direction": m.merge[3]}}
            for m in self.markings]
        self.scene["vehicles"] = vehicles
        return RoadSample(image=pixels, lanes=lanes, rows=lane_rows(self.height, self.n_rows), scene=self.scene)

    # -- geometry ------------------------------------------------------------------------------------------------

    def _geometry(self) -> None:
        g, o = self.rng["geometry"], self.opt
        n = int(g.integers(o.min_markings, o.max_markings + 1))
        lane_width = g.uniform(*o.lane_width_m)
        ego = int(g.integers(0, n - 1))
        offset = g.uniform(-1.0, 1.0) * o.cam_offset_m
        cam_height = g.uniform(*o.camera_height_m)
        horizon = g.uniform(*o.horizon) * self.height
        fov = g.uniform(*o.fov_deg)
        rolled, roll = _chance(g, o.roll), g.uniform(-1.0, 1.0) * o.roll_max_deg
        roll = roll if rolled else 0.0
        yaw = g.uniform(-1.0, 1.0) * o.yaw_max_deg
        curved, left = _chance(g, o.curve), bool(g.random() < 0.5)
        magnitude = g.uniform(*o.curvature)
        curvature = (-magnitude if left else magnitude) if curved else 0.0
        far = g.uniform(*o.draw_distance_m)
        short, short_far = _chance(g, o.short_road), g.uniform(*o.short_road_m)
        shoulders = g.uniform(*o.shoulder_m, size=2)
        sy, change = self._wide_geometry(curvature)

        f = 0.5 * self.width / math.tan(math.radians(fov) / 2.0)
        cx, cy = (self.width - 1) / 2.0, (self.height - 1) / 2.0
        roll_rad = math.radians(roll)
        # The horizon crosses the image's centre column at row `horizon`.
        hz = cy + math.cos(roll_rad) * (horizon - cy)
        self.cam = _Camera(f=f, h=cam_height, hz=hz, cx=cx, cy=cy, yaw=math.radians(yaw), curvature=curvature,
                           roll=roll_rad, sy=sy, curvature_change=change)
        self.z_end = min(short_far, far) if short else far
        # The lowest unrolled row the image reaches (at y = height, the first sample row), and a little more.
        v_bottom = cy + sy * abs(math.sin(roll_rad)) * cx + math.cos(roll_rad) * (self.height - cy) + 2.0
        self.z_near = self.cam.fy * cam_height / (v_bottom - hz)
        self.x_marks = [(k - ego - 0.5) * lane_width - offset for k in range(n)]
        self.road_edges = (self.x_marks[0] - shoulders[0], self.x_marks[-1] + shoulders[1])
        self.short = short
        self.scene.update({
            "horizon_y": float(horizon), "roll_deg": float(roll), "curvature": float(curvature),
            "yaw_deg": float(yaw), "lane_count": n, "driving_lanes": n - 1, "ego_lane": ego,
            "lane_width_m": float(lane_width), "cam_offset": float(offset), "camera_height_m": float(cam_height),
            "focal_px": float(f), "fov_deg": float(fov), "draw_distance_m": float(self.z_end), "short_road": short,
            "pixel_aspect": float(sy), "curvature_change": float(change),
        })

    def _markings(self) -> None:
        m, o = self.rng["markings"], self.opt
        n = len(self.x_marks)
        self.markings: list[_Marking] = []
        for k, x0 in enumerate(self.x_marks):
            outer = k in (0, n - 1)
            yellow = _chance(m, o.yellow)
            dashed = _chance(m, o.dashed / 3.0 if outer else o.dashed)
            width = m.uniform(*o.marking_width_m)
            dash, gap = m.uniform(*o.dash_m), m.uniform(*o.gap_m)
            phase = m.uniform(0.0, dash + gap)
            white = m.uniform(215, 250) + m.uniform(-6, 6, size=3)
            amber = np.array([m.uniform(215, 245), m.uniform(165, 200), m.uniform(20, 70)])
            worn = _chance(m, o.worn)
            fade = m.uniform(0.15, 0.5)
            wear = (m.uniform(0.05, 0.2, size=3), m.uniform(0.25, 3.0, size=3), m.uniform(0, 2 * np.pi, size=3),
                    m.uniform(-0.15, 0.3))
            self.markings.append(_Marking(x0=x0, width=width, colour=amber if yellow else white, yellow=yellow,
                                          dashed=dashed, dash=dash, gap=gap, phase=phase, worn=worn, wear=wear,
                                          fade=fade))
        self._wide_markings()

    def _ground_truth(self) -> list[np.ndarray]:
        """Fix where each marking is drawn and sample it on the LaneATT rows of the image."""
        cam, width, height = self.cam, self.width, self.height
        rows = lane_rows(height, self.n_rows)
        for marking in self.markings:
            marking.z_lo = marking.z_hi = self.z_near       # not drawn unless there is something to annotate
        if self.z_end <= self.z_near * 1.01:
            return []                                     # the road ends before the image's lowest row
        v_far, v_near = cam.hz + cam.fy * cam.h / self.z_end, cam.hz + cam.fy * cam.h / self.z_near
        count = int(4 * (v_near - v_far)) + 16
        # Uniform in the unrolled row: a dense polyline wherever the marking is seen.
        z = cam.z_of_v(np.linspace(v_near, v_far, count))
        z[0], z[-1] = self.z_near, self.z_end
        lanes: list[tuple[float, np.ndarray, _Marking]] = []
        for marking in self.markings:
            lateral = cam.lateral(marking.x0, z)
            if marking.merge is not None:
                lateral = lateral + marking.shift(z)
            u, v = cam.unrolled(lateral, z)
            x, y = cam.to_image(u, v)
            seen = (x >= 0) & (x <= width - 1) & (y >= 0) & (y <= height)
            bounded = marking.z_min > 0 or marking.z_max < math.inf
            if bounded:
                seen &= (z >= marking.z_min) & (z <= marking.z_max)
            if not seen.any():
                continue
            first = int(np.argmax(seen))
            # One x per image row: the line must keep rising, and not run too flat, wherever it is annotated.
            dx, dy = np.diff(x), np.diff(y)
            bad = (dy >= 0) | (np.abs(dx) > _MAX_SLOPE * np.abs(dy))
            before = np.flatnonzero(bad[:first])
            start = int(before[-1]) + 1 if before.size else 0
            after = np.flatnonzero(bad[first:])
            end = first + int(after[0]) if after.size else count - 1
            if bounded:
                start = max(start, int(np.searchsorted(z, marking.z_min, side="left")))
                end = min(end, int(np.searchsorted(z, marking.z_max, side="right")) - 1)
            if end <= start:
                continue
            marking.z_lo, marking.z_hi = float(z[start]), float(z[end])
            z_gt = marking.gt_far_end()
            stop = max(min(int(np.searchsorted(z, z_gt, side="left")), end + 1), start)   # samples nearer than z_gt
            x_end, y_end = cam.point(cam.lateral(marking.x0, z_gt) + marking.shift(z_gt), z_gt)
            xs, ys = np.append(x[start:stop], x_end), np.append(y[start:stop], y_end)
            if self.lens_k:
                xs, ys = self._lens_points(xs, ys)
            chosen = (rows <= ys[0]) & (rows >= ys[-1])
            gx = np.interp(rows[chosen], ys[::-1], xs[::-1])
            keep = (gx >= 0) & (gx <= width - 1)
            points = np.stack([gx[keep], rows[chosen][keep]], axis=1)
            if len(points) < 2:
                marking.z_hi = marking.z_lo
                continue
            part = slice(start, end + 1)
            marking.track = (x[part], y[part], z[part], u[part], v[part])
            if marking.double:
                marking.bands = [self._band(lateral[part] + side * marking.double, z[part]) for side in (-1, 1)]
            lanes.append((float(points[0, 0]), points, marking))
        lanes.sort(key=lambda item: item[0])
        for index, (_, _, marking) in enumerate(lanes):
            marking.lane_index = index
        return [points for _, points, _ in lanes]

    def _band(self, lateral: np.ndarray, z: np.ndarray) -> tuple:
        u, v = self.cam.unrolled(lateral, z)
        x, y = self.cam.to_image(u, v)
        return (x, y, z, u, v)

    # -- the ground ----------------------------------------------------------------------------------------------

    def _palette(self) -> None:
        a, o = self.rng["appearance"], self.opt
        if a.random() < 0.3:                     # overcast
            top = np.full(3, a.uniform(150, 205)) + a.uniform(-8, 8, size=3)
            low = top + a.uniform(10, 35)
        else:
            top = np.array([a.uniform(40, 120), a.uniform(90, 160), a.uniform(170, 240)])
            low = _mix(top, [a.uniform(200, 245), a.uniform(205, 240), a.uniform(215, 250)], a.uniform(0.5, 0.9))
        self.sky_top, self.sky_low = top, low
        verges = [np.array([a.uniform(55, 95), a.uniform(85, 130), a.uniform(35, 65)]),      # grass
                  np.array([a.uniform(120, 160), a.uniform(110, 140), a.uniform(75, 105)]),   # dry grass, dirt
                  np.full(3, a.uniform(95, 135)) + a.uniform(-8, 8, size=3)]                   # gravel
        self.verge = verges[int(a.integers(0, 3))]
        grey = a.uniform(*o.asphalt_grey)
        self.asphalt = np.clip(grey + a.uniform(-6, 6, size=3) + np.array([0, 0, a.uniform(-4, 6)]), 0, 255)
        self.kerb_colour = np.full(3, a.uniform(135, 180)) + a.uniform(-5, 5, size=3)
        self.texture = int(a.integers(0, 4))
        self.haze = a.uniform(0.0, 0.45)
        self._wide_palette()

    def _horizon_polygon(self, below: bool, margin: float = 2.0) -> list[float]:
        """The image below (or above) the horizon line."""
        xs = np.array([-margin, self.width - 1 + margin])
        ys = self.cam.horizon_y(xs)
        edge = self.height + margin if below else -margin
        return _flat(np.r_[xs, xs[::-1]], np.r_[ys, edge, edge])

    def _base(self) -> Image.Image:
        cam = self.cam
        y = np.arange(self.height, dtype=np.float64)
        # The sky's gradient by rows: at a few degrees of roll nobody sees that it is not turned with the horizon.
        v = cam.cy + cam.cos * (y - cam.cy)
        above = np.clip((cam.hz - v) / max(cam.hz, 1.0), 0.0, 1.0)[:, None]
        sky = np.clip(np.rint(_mix(self.sky_low, self.sky_top, above ** 0.7)), 0, 255).astype(np.uint8)
        image = Image.fromarray(sky[:, None, :]).resize((self.width, self.height), Image.Resampling.NEAREST)
        ImageDraw.Draw(image).polygon(self._horizon_polygon(below=True), fill=_rgb(self.verge))
        return image

    def _ground_polygon(self, x_left: float, x_right: float, z_lo: float, z_hi: float, count: int = 48) -> list:
        cam = self.cam
        z = cam.z_of_v(np.linspace(cam.hz + cam.fy * cam.h / z_lo, cam.hz + cam.fy * cam.h / z_hi, count))
        left = cam.point(cam.lateral(x_left, z), z)
        right = cam.point(cam.lateral(x_right, z), z)
        return _flat(np.r_[left[0], right[0][::-1]], np.r_[left[1], right[1][::-1]])

    def _road(self, draw: ImageDraw.ImageDraw) -> None:
        a, cam = self.rng["appearance"], self.cam
        z_far = self.z_end if self.short else 4.0 * self.z_end
        near = self.z_near * 0.98
        left, right = self.road_edges
        draw.polygon(self._ground_polygon(left, right, near, z_far), fill=_rgb(self.asphalt))
        kerbs = _chance(a, self.opt.kerb)
        kerb_width = a.uniform(0.15, 0.3)
        if kerbs:
            for x in (left - kerb_width, right):
                draw.polygon(self._ground_polygon(x, x + kerb_width, near, z_far, 32), fill=_rgb(self.kerb_colour))
        worn_road = _chance(a, self.opt.road_wear)
        patches = [(a.uniform(left, right), a.uniform(6, 60), a.uniform(0.8, 3.5), a.uniform(1, 6),
                    a.uniform(-22, 18)) for _ in range(int(a.integers(0, 5)))]
        cracks = [(a.uniform(left, right), a.uniform(5, 40), a.uniform(-1, 1, size=(6, 2)))
                  for _ in range(int(a.integers(0, 6)))]
        tracks, track_alpha = _chance(a, 0.6), int(a.uniform(25, 70))
        if worn_road:
            for x, z, w, length, tone in patches:
                if z + length < self.z_end:
                    xs, zs = np.array([x, x + w, x + w, x]), np.array([z, z, z + length, z + length])
                    draw.polygon(_flat(*cam.point(cam.lateral(xs, zs), zs)), fill=_rgb(self.asphalt + tone))
            for x, z, wiggle in cracks:
                steps = np.cumsum(wiggle * [0.6, 1.2], axis=0)
                xs, zs = x + steps[:, 0], np.maximum(z + np.abs(steps[:, 1]) * 2, self.z_near)
                draw.line(_flat(*cam.point(cam.lateral(xs, zs), zs)), fill=_rgb(self.asphalt * 0.55),
                          width=max(1, round(self.width / 900)))
            if tracks:
                # Tyres darken two strips in every lane.
                for k in range(len(self.x_marks) - 1):
                    centre = 0.5 * (self.x_marks[k] + self.x_marks[k + 1])
                    for side in (-0.8, 0.8):
                        x = centre + side
                        draw.polygon(self._ground_polygon(x - 0.3, x + 0.3, near, min(z_far, 80.0), 24),
                                     fill=_rgb(self.asphalt * 0.7) + (track_alpha,))
        self.scene["road"] = {"kerbs": kerbs, "road_wear": worn_road,
                              "asphalt_rgb": [float(c) for c in self.asphalt]}

    def _haze_and_texture(self, image: Image.Image) -> None:
        """Air brightens the far ground towards the sky's colour; grain and blotches cover all of the ground."""
        cam = self.cam
        kind, variant = self.texture_tile
        texture = _noise_crop(kind, variant, self.rng["appearance"], self.width, self.height)
        if self.flat:
            return
        draw = ImageDraw.Draw(image, "RGBA")
        bands = 5
        # Nested bands from the horizon down, whose alphas add up towards the horizon.
        reach = cam.hz + cam.fy * cam.h / self.z_near * 0.4 * (np.arange(1, bands + 1) / bands) ** 2
        us = np.array([-2.0, self.width + 1.0, self.width + 1.0, -2.0])
        xs, ys = cam.to_image(np.broadcast_to(us, (bands, 4)),
                              np.stack([np.full(bands, cam.hz)] * 2 + [reach] * 2, axis=1))
        fill = _rgb(self.sky_low) + (int(255 * self.haze / bands),)
        for x, y in zip(xs, ys):
            draw.polygon(_flat(x, y), fill=fill)
        ImageDraw.Draw(texture).polygon(self._horizon_polygon(below=False), fill=128)
        image.paste(ImageChops.add(image, Image.merge("RGB", (texture, texture, texture)), 1.0, -128))

    # -- camera --------------------------------------------------------------------------------------------------

    def _lut(self) -> np.ndarray:
        rng, o = self.rng["lighting"], self.opt
        on = _chance(rng, o.lighting)
        values = {"brightness": rng.uniform(*o.brightness), "contrast": rng.uniform(*o.contrast),
                  "gamma": rng.uniform(*o.gamma), "temperature": rng.uniform(*o.temperature)}
        if not on:
            values = {"brightness": 1.0, "contrast": 1.0, "gamma": 1.0, "temperature": 0.0}
        x = np.arange(256, dtype=np.float64) / 255.0
        y = (x ** values["gamma"] - 0.5) * values["contrast"] + 0.5
        t = values["temperature"]
        gains = np.array([1.0 + t, 1.0, 1.0 - t])
        lut = np.clip(np.rint(y[None, :] * values["brightness"] * gains[:, None] * 255.0), 0, 255)
        self.scene["lighting"] = {k: float(v) for k, v in values.items()}
        return lut.astype(np.uint8)

    def _sensor(self, image: Image.Image) -> np.ndarray:
        n, o = self.rng["sensor"], self.opt
        blur, radius = _chance(n, o.blur), n.uniform(*o.blur_radius) * self.width / 640.0
        noise, level = _chance(n, o.noise), int(n.integers(0, _NOISE_LEVELS))
        sigma = float(np.linspace(*o.noise_sigma, _NOISE_LEVELS)[level])
        jpeg, quality = _chance(n, o.jpeg), int(n.integers(o.jpeg_quality[0], o.jpeg_quality[1] + 1))
        blur, noise = blur and radius > 0.05, noise and sigma > 0
        image = self._optics(image)
        if blur:
            # Pillow's GaussianBlur costs several times a 3x3 kernel; beyond what 3 taps hold, a box blur of the
            # same spread stands in for it.
            image = image.filter(_blur_kernel(radius) if radius <= 0.9 else ImageFilter.BoxBlur(radius * 1.2))
        if noise:
            image = ImageChops.add(image, _noise_crop("noise", sigma, n, self.width, self.height), 1.0, -128)
        if jpeg:
            buffer = io.BytesIO()
            image.save(buffer, "JPEG", quality=quality)
            buffer.seek(0)
            with Image.open(buffer) as decoded:
                image = decoded.convert("RGB")
        self.scene.update({"blur_radius": float(radius) if blur else None,
                           "noise_sigma": float(sigma) if noise else None,
                           "jpeg_quality": quality if jpeg else None})
        return np.array(image)
