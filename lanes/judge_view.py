"""The judge renderer's camera: a pinhole a few metres above a road that bends and climbs, and the true lanes it sees.

World frame of one view: ``Z`` ahead of the car along the road (metres), ``X`` to the right, height up. The road's
centre line runs ``bend(Z)`` to the right of the car's heading and ``rise(Z)`` above its tangent plane, both the
double integral of the road's curvature from the car onwards (so a drive along the road moves one road past the
camera). The camera sits ``cam_height`` above the road, pitched so that the flat horizon falls on the scene's row,
and rolled about the image centre.

Image coordinates: pixel ``(row i, column j)`` has its centre at ``(x, y) = (j, i)``. ``(u, v)`` are the same before
the roll.
"""

from __future__ import annotations

import math

import numpy as np

from orinkit.lanes.judge_scene import Scene

# Distances the road is tabulated at: geometric, so that every pixel row has several entries.
_Z = np.concatenate([[0.0], 0.4 * 1.004 ** np.arange(2300)])  # 0.4 m .. ~4000 m


def curvature(terms, s: np.ndarray) -> np.ndarray:
    """The road's curvature (1/m, + bending right) or slope change at ``s``, from the scene's sine terms."""
    return sum((a * np.sin(2 * math.pi * s / wavelength + phase) for a, wavelength, phase in terms),
               np.zeros_like(s))


def _twice_integrated(values: np.ndarray, z: np.ndarray) -> np.ndarray:
    step = np.diff(z)
    once = np.concatenate([[0.0], np.cumsum(0.5 * (values[1:] + values[:-1]) * step)])
    return np.concatenate([[0.0], np.cumsum(0.5 * (once[1:] + once[:-1]) * step)])


class View:
    """One frame's camera on the road of ``scene``: ``travel`` (the car's s), ``car_r`` and ``yaw`` (its heading
    right of the road's) as it drives."""

    def __init__(self, scene: Scene, width: int, height: int, *, travel: float, car_r: float, yaw: float) -> None:
        self.scene, self.width, self.height = scene, width, height
        self.travel, self.car_r, self.yaw = travel, car_r, yaw
        self.f = (width / 2) / math.tan(math.radians(scene.hfov) / 2)
        self.cx, self.cy = (width - 1) / 2, (height - 1) / 2
        self.horizon_v = scene.horizon * height
        self.pitch = math.atan((self.cy - self.horizon_v) / self.f)
        self.cos_roll, self.sin_roll = math.cos(scene.roll), math.sin(scene.roll)
        self.h = scene.cam_height
        s = travel + _Z
        self.bend = _twice_integrated(curvature(scene.bends, s), _Z) - _Z * math.tan(yaw)
        self.rise = _twice_integrated(curvature(scene.hills, s), _Z)
        v = self._v_of(_Z[1:], self.rise[1:])
        # Past a crest the road falls out of sight: it is seen up to where its rows stop climbing the image.
        climbing = np.diff(v) < 0
        end = int(np.argmin(climbing)) + 1 if not climbing.all() else len(v)
        self.z_table, self.v_table = _Z[1:end + 1], v[:end]
        self.z_end, self.v_end = float(self.z_table[-1]), float(self.v_table[-1])

    def _v_of(self, z, lift):
        down = self.h - lift
        cp, sp = math.cos(self.pitch), math.sin(self.pitch)
        return self.cy + self.f * (down * cp - z * sp) / (down * sp + z * cp)

    def _depth(self, z, lift):
        down = self.h - lift
        return down * math.sin(self.pitch) + z * math.cos(self.pitch)

    def bend_at(self, z):
        return np.interp(z, _Z, self.bend)

    def rise_at(self, z):
        return np.interp(z, _Z, self.rise)

    def project(self, r, z, up=0.0) -> tuple[np.ndarray, np.ndarray]:
        """Image (x, y) of road-frame points: ``r`` across the road, ``z`` ahead of the car, ``up`` above the road."""
        r, z, up = np.broadcast_arrays(np.asarray(r, float), np.asarray(z, float), np.asarray(up, float))
        lift = self.rise_at(z) + up
        x_world = r - self.car_r + self.bend_at(z)
        depth = np.maximum(self._depth(z, lift), 1e-3)
        u = self.cx + self.f * x_world / depth
        down = self.h - lift
        v = self.cy + self.f * (down * math.cos(self.pitch) - z * math.sin(self.pitch)) / depth
        return self.roll_out(u, v)

    def roll_out(self, u, v):
        du, dv = u - self.cx, v - self.cy
        return self.cx + du * self.cos_roll - dv * self.sin_roll, self.cy + du * self.sin_roll + dv * self.cos_roll

    def unroll(self, x, y):
        dx, dy = x - self.cx, y - self.cy
        return self.cx + dx * self.cos_roll + dy * self.sin_roll, self.cy - dx * self.sin_roll + dy * self.cos_roll

    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        """(u, v) of every pixel, each [H, W]."""
        y, x = np.mgrid[0:self.height, 0:self.width].astype(np.float64)
        return self.unroll(x, y)

    def ground(self, u: np.ndarray, v: np.ndarray) -> dict:
        """Road-frame coordinates of pixels (u, v) that see the road's ground: ``r``, ``s``, ``z``, and each
        pixel's footprint across (``across``) and along (``along``) the road in metres."""
        z = np.interp(v, self.v_table[::-1], self.z_table[::-1])
        lift = self.rise_at(z)
        depth = self._depth(z, lift)
        x_world = (u - self.cx) * depth / self.f
        slope = np.gradient(self.v_table, self.z_table)  # rows per metre, negative
        along = 1.0 / np.maximum(np.abs(np.interp(z, self.z_table, slope)), 1e-6)
        return {"r": x_world - self.bend_at(z) + self.car_r, "s": z + self.travel, "z": z,
                "across": depth / self.f, "along": along}

    def lane(self, r: float, margin: float, step: float = 10.0) -> np.ndarray | None:
        """The true lane of the marking at ``r``: its centre line where it is on the image, from where it enters
        at the bottom or a side up to ``margin`` pixels below the road's far end, one point per ``step`` rows,
        bottom first. None where it is not on the image (or too short to be a lane)."""
        stop = float(np.interp(self.v_end + margin, self.v_table[::-1], self.z_table[::-1]))
        z = np.concatenate([np.arange(0.8, 6.0, 0.05), np.geomspace(6.0, max(stop, 6.1), 600)])
        z = z[z <= stop]
        x, y = self.project(r, z)
        inside = (x >= 0) & (x <= self.width - 1) & (y >= 0) & (y <= self.height - 1)
        if not inside.any():
            return None
        first = int(np.argmax(inside))
        last = first + (int(np.argmin(inside[first:])) if not inside[first:].all() else len(z) - first)
        x, y = x[first:last], y[first:last]
        rising = np.diff(y) < 0  # rows must climb as the line goes away, or it is no lane a row at a time
        if not rising.all():
            cut = int(np.argmin(rising)) + 1
            x, y = x[:cut], y[:cut]
        if len(y) < 2 or y[0] - y[-1] < max(24.0, 0.05 * self.height):
            return None
        rows = np.arange(math.floor(y[0]), y[-1], -step)
        if y[-1] < rows[-1] - 2:
            rows = np.append(rows, y[-1])
        xs = np.clip(np.interp(rows, y[::-1], x[::-1]), 0.0, self.width - 1)
        return np.stack([xs, rows], axis=1)
