"""Scenery on the horizon, shadows across the road, and vehicles standing in its lanes: the first renderer's."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

from orinkit.lanes.synth_camera import _chance, _flat, _mix, _rgb


class _SceneryMixin:
    """Methods of :class:`~orinkit.lanes.synth_render._Renderer` (they use its camera, road and generators)."""

    def _scenery(self, draw: ImageDraw.ImageDraw) -> None:
        a, cam = self.rng["scenery"], self.cam
        show = _chance(a, self.opt.scenery)
        scale = self.width / 640.0
        count = 64
        kinds = a.integers(0, 3, size=count)          # 0 nothing, 1 trees, 2 a building
        spans, talls = a.uniform(15, 90, size=count) * scale, a.uniform(4, 32, size=count) * scale * cam.sy
        steps = a.uniform(0.5, 1.0, size=count)
        greens = np.stack([a.uniform(25, 70, count), a.uniform(40, 85, count), a.uniform(25, 60, count)], axis=1)
        greys = np.repeat(a.uniform(60, 140, count)[:, None], 3, axis=1)
        shades = _mix(np.where((kinds == 1)[:, None], greens, greys), self.sky_low,
                      a.uniform(0.2, 0.6, count)[:, None])
        crowns = a.uniform(0, 1, size=(count, 3, 2))
        starts = -20.0 * scale + np.concatenate([[0.0], np.cumsum(spans * steps)[:-1]])
        for kind, u, span, tall, shade, crown in zip(kinds, starts, spans, talls, shades, crowns):
            if not show or u > self.width + 20 * scale:
                break
            if kind == 1:
                for offset, size in crown:
                    r = tall * (0.35 + 0.35 * size)
                    x, y = cam.to_image(u + offset * span, cam.hz - tall + r * 0.35)
                    draw.ellipse([x - r, y - r * 0.65, x + r, y + r * 0.65 + tall * 0.5], fill=_rgb(shade))
            elif kind == 2:
                xs = np.array([u, u + span * 0.8, u + span * 0.8, u])
                vs = cam.hz + 1.0 - np.array([0, 0, tall * 1.4, tall * 1.4])
                draw.polygon(_flat(*cam.to_image(xs, vs)), fill=_rgb(shade))
        # A short road runs over a rise: a wooded hill hides everything beyond its end.
        top = cam.hz + cam.fy * cam.h / self.z_end - 0.5
        ridge = cam.hz - a.uniform(5, 25) * scale * cam.sy
        colour = _mix(self.verge * 0.8, self.sky_low, 0.25)
        us = np.linspace(-0.1 * self.width, 1.1 * self.width, 24)
        crest = ridge + a.uniform(-4, 4, size=us.size) * scale
        trees = [(a.uniform(0, self.width), a.uniform(6, 18) * scale, a.uniform(-3, 3) * scale,
                  a.uniform(0.75, 0.95)) for _ in range(16)]
        if self.short:
            draw.polygon(_flat(*cam.to_image(np.r_[us, us[::-1]], np.r_[crest, np.full(us.size, top)])),
                         fill=_rgb(colour))
            for centre, r, dy, dim in trees:
                x, y = cam.to_image(centre, crest.mean() + dy)
                draw.ellipse([x - r, y - r, x + r, y + r], fill=_rgb(colour * dim))

    def _shadows(self, image: Image.Image, vehicles: list[dict]) -> None:
        s, o, cam = self.rng["shadows"], self.opt, self.cam
        on = _chance(s, o.shadows)
        kinds = [("tree", "band", "side")[int(s.integers(0, 3))] for _ in range(int(s.integers(1, 4)))]
        quarter = 0.25
        mask = Image.new("L", (-(-self.width // 4), -(-self.height // 4)), 255)
        draw = ImageDraw.Draw(mask)
        left, right = self.road_edges

        def ground(xs, zs, curved=True):
            zs = np.maximum(zs, 0.5)
            return _flat(*cam.point(cam.lateral(xs, zs) if curved else xs, zs), scale=quarter)

        listed = []
        for kind in kinds:
            strength = s.uniform(*o.shadow_strength)
            value = round(255 * (1.0 - strength))
            if kind == "tree":
                for _ in range(int(s.integers(3, 10))):
                    xc, zc, r = s.uniform(left - 6, right + 6), s.uniform(5, 45), s.uniform(1.0, 4.0)
                    t = np.linspace(0, 2 * np.pi, 12, endpoint=False)
                    radius = r * s.uniform(0.7, 1.2, size=t.size)
                    if on:
                        draw.polygon(ground(xc + radius * np.cos(t), zc + 1.5 * radius * np.sin(t)), fill=value)
            elif kind == "band":
                z1, depth, skew = s.uniform(8, 60), s.uniform(3, 15), s.uniform(-0.15, 0.15)
                xs = np.array([-60.0, 60.0, 60.0, -60.0])
                if on:
                    draw.polygon(ground(xs, np.array([z1, z1, z1 + depth, z1 + depth]) + skew * xs, False),
                                 fill=value)
            else:
                side = -1.0 if s.random() < 0.5 else 1.0
                edge = (left if side < 0 else right) - side * s.uniform(-3.0, 2.0)
                z1, z2, lean = s.uniform(4, 20), s.uniform(30, 90), s.uniform(-0.1, 0.1)
                if on:
                    draw.polygon(ground(np.array([edge, edge + lean * (z2 - z1), side * 80.0, side * 80.0]),
                                        np.array([z1, z2, z2, z1])), fill=value)
            listed.append({"kind": kind, "strength": float(strength)})
        # Vehicles darken the road under and just behind them.
        for car in vehicles:
            xs = car["x_m"] + np.array([-0.5, 0.5, 0.5, -0.5]) * (car["width_m"] + 0.3)
            zs = car["z_m"] + np.array([-0.3, -0.3, car["length_m"], car["length_m"]])
            draw.polygon(ground(xs, zs, False), fill=64)
        self.scene["shadows"] = listed if on else []
        if not on and not vehicles:
            return
        # Shadows lie on the ground: only the rows below the horizon's highest point are touched.
        top = int(np.clip(math.floor(self.cam.horizon_y(np.array([0.0, self.width - 1.0])).min()), 0,
                          self.height - 1))
        box = (0, top, self.width, self.height)
        mask = mask.filter(ImageFilter.BoxBlur(0.6)).resize((self.width, self.height - top), Image.Resampling.BILINEAR,
                                                            box=(0, top * quarter, mask.width, mask.height))
        image.paste(ImageChops.multiply(image.crop(box), Image.merge("RGB", (mask, mask, mask))), box)

    def _plan_vehicles(self) -> list[dict]:
        v, o, cam = self.rng["vehicles"], self.opt, self.cam
        on = _chance(v, o.vehicles)
        wanted = int(v.integers(1, max(o.max_vehicles, 1) + 1))
        palette = [(235, 235, 235), (25, 25, 30), (150, 152, 158), (110, 20, 25), (30, 50, 110), (190, 190, 195),
                   (70, 75, 80), (200, 170, 60), (40, 80, 55)]
        count = 8
        lanes = v.integers(0, len(self.x_marks) - 1, size=count)
        zs = v.uniform(7.0, 60.0, count)
        trucks = v.random(count) < 0.2
        widths = np.where(trucks, v.uniform(2.35, 2.55, count), v.uniform(1.65, 1.95, count))
        talls = np.where(trucks, v.uniform(2.8, 3.8, count), v.uniform(1.35, 1.8, count))
        lengths = np.where(trucks, v.uniform(8, 14, count), v.uniform(3.8, 5.0, count))
        jitters = v.uniform(-0.3, 0.3, count)
        colours = np.array(palette)[v.integers(0, len(palette), count)] * v.uniform(0.85, 1.1, count)[:, None]
        planned = [{"kind": "truck" if truck else "car", "lane": int(lane), "z_m": float(z), "width_m": float(w),
                    "height_m": float(tall), "length_m": float(length), "colour": list(_rgb(colour)),
                    "jitter": float(jitter)}
                   for lane, z, truck, w, tall, length, jitter, colour
                   in zip(lanes, zs, trucks, widths, talls, lengths, jitters, colours)]
        chosen: list[dict] = []
        for car in planned if on else []:
            if len(chosen) == wanted:
                break
            if car["z_m"] + car["length_m"] > self.z_end - 2:
                continue
            if any(c["lane"] == car["lane"] and abs(c["z_m"] - car["z_m"]) < c["length_m"] + car["length_m"] + 3
                   for c in chosen):
                continue
            centre = 0.5 * (self.x_marks[car["lane"]] + self.x_marks[car["lane"] + 1]) + car.pop("jitter")
            car["x_m"] = float(cam.lateral(centre, car["z_m"]))
            chosen.append(car)
        return chosen

    def _draw_vehicles(self, image: Image.Image, vehicles: list[dict]) -> None:
        draw = ImageDraw.Draw(image)
        for car in sorted(vehicles, key=lambda c: -c["z_m"]):        # far to near: the nearer hides the farther
            self._draw_vehicle(draw, car)

    def _draw_vehicle(self, draw: ImageDraw.ImageDraw, car: dict) -> None:
        """A vehicle seen from behind (boxes: body, cabin, window, bumper, tyres, lights), its roof and side."""
        cam = self.cam
        z, x, w, tall, length = car["z_m"], car["x_m"], car["width_m"], car["height_m"], car["length_m"]
        colour = np.asarray(car["colour"], dtype=np.float64)
        truck = car["kind"] == "truck"
        far = z + length
        x_far = x + cam.heading(z) * length       # it points along the road

        def face(lateral, depth, heights):
            """Vertices of a polygon given as lateral positions, distances and heights (metres)."""
            return _flat(*cam.point(np.asarray(lateral, dtype=np.float64), np.asarray(depth, dtype=np.float64),
                                    np.asarray(heights, dtype=np.float64)))

        def rear(x0, x1, y0, y1):
            return face([x + x0, x + x1, x + x1, x + x0], [z] * 4, [y0, y0, y1, y1])

        # The roof shows when the camera is above it, and the side that faces the camera shows.
        if tall < cam.h:
            draw.polygon(face([x - w / 2, x + w / 2, x_far + w / 2, x_far - w / 2], [z, z, far, far], [tall] * 4),
                         fill=_rgb(colour * 1.08 + 10))
        side = w / 2 if x < 0 else -w / 2
        if abs(x) > w / 2:
            draw.polygon(face([x + side, x_far + side, x_far + side, x + side], [z, far, far, z],
                              [0.2, 0.2, tall, tall]), fill=_rgb(colour * 0.72))
        draw.polygon(rear(-w / 2 + 0.1, w / 2 - 0.1, 0.0, 0.35), fill=(18, 18, 20))                 # underbody
        for x0 in (-w / 2 + 0.05, w / 2 - 0.33):
            draw.polygon(rear(x0, x0 + 0.28, 0.0, 1.0 if truck else 0.6), fill=(22, 22, 24))       # tyres
        if truck:
            draw.polygon(rear(-w / 2 + 0.3, w / 2 - 0.3, 0.45, 1.0), fill=(35, 35, 38))             # chassis
            draw.polygon(rear(-w / 2, w / 2, 1.0, tall), fill=_rgb(colour))
            draw.polygon(rear(-w / 2 + 0.05, w / 2 - 0.05, 1.0, 1.15), fill=(50, 50, 55))
            lights = (1.0, 1.15)
        else:
            body = 0.62 * tall
            inset = 0.14 * w
            draw.polygon(rear(-w / 2, w / 2, 0.3, body), fill=_rgb(colour))
            draw.polygon(face([x - w / 2 + 0.03, x + w / 2 - 0.03, x + w / 2 - inset, x - w / 2 + inset], [z] * 4,
                              [body, body, tall, tall]), fill=_rgb(colour * 0.95))                  # cabin
            draw.polygon(rear(-w / 2 + inset + 0.06, w / 2 - inset - 0.06, body + 0.05, tall - 0.07),
                         fill=(40, 46, 55))                                                         # window
            draw.polygon(rear(-w / 2, w / 2, 0.3, 0.5), fill=_rgb(colour * 0.55))                  # bumper
            draw.polygon(rear(-0.26, 0.26, 0.42, 0.55), fill=(225, 225, 215))                      # plate
            lights = (0.7 * body, 0.92 * body)
        for x0 in (-w / 2 + 0.04, w / 2 - 0.3):
            draw.polygon(rear(x0, x0 + 0.26, *lights), fill=(200, 30, 30))
        xs, ys = cam.point(np.array([x - w / 2, x + w / 2] * 2), np.full(4, z), np.array([0.0, 0.0, tall, tall]))
        car["box"] = [float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())]

    # -- camera --------------------------------------------------------------------------------------------------
