"""A constant-velocity Kalman filter for many boxes at once, in seconds rather than frames.

The state of a box is its centre, width and height (``cx, cy, w, h``) and their rates per SECOND. Each of the
four coordinates is filtered on its own (position and rate, a 2x2 covariance): the motion matrix, the measurement
(positions only) and the noise are all block-diagonal per coordinate, so the filter is exact in that form and every
step is a few elementwise numpy operations over ``[boxes, 4]`` arrays, with no per-box Python and no 8x8 inverse.

Noise follows ByteTrack's filter (``std`` proportional to the box's size) translated from "per frame at 30 fps" to
per second, so a step of ``dt`` seconds adds ``dt`` times the noise of one second: a frame that a latest-wins
video reader dropped is a longer step with a wider prediction, not a missed update.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# ByteTrack's weights at 30 fps: measurement std h/20, velocity std h/160 per frame. Per second, a random walk's
# variance rate is (std per frame)^2 * fps; the position's own random walk keeps ByteTrack's h/20 per frame.
_FPS = 30.0
MEASURE_STD = 1 / 20  # of the box's size: how far a detector's edge may sit from the object's
POSITION_RATE = (1 / 20) ** 2 * _FPS  # variance of the position's random walk per second, over size^2
VELOCITY_RATE = (1 / 160 * _FPS) ** 2 * _FPS  # variance of the velocity's random walk per second (px/s)^2/size^2
START_VELOCITY_STD = 10 / 160 * _FPS  # a new box's unknown speed, sizes per second (ByteTrack's 10x)


@dataclass(eq=False)
class BoxMotion:
    """The filtered state of N boxes: ``x`` [N, 4] cx cy w h, ``v`` [N, 4] their rates per second and the 2x2
    covariance of each coordinate as three arrays ``pxx`` (position), ``pxv`` and ``pvv`` (rate), each [N, 4]."""

    x: np.ndarray
    v: np.ndarray
    pxx: np.ndarray
    pxv: np.ndarray
    pvv: np.ndarray

    @classmethod
    def start(cls, xyxy: np.ndarray) -> BoxMotion:
        x = xyxy_to_state(xyxy)
        size = _sizes(x)
        return cls(x, np.zeros_like(x), (2 * MEASURE_STD * size) ** 2, np.zeros_like(x),
                   (START_VELOCITY_STD * size) ** 2)

    @classmethod
    def empty(cls) -> BoxMotion:
        return cls(*(np.zeros((0, 4)) for _ in range(5)))

    def __len__(self) -> int:
        return len(self.x)

    def select(self, index) -> BoxMotion:
        return BoxMotion(self.x[index], self.v[index], self.pxx[index], self.pxv[index], self.pvv[index])

    def extend(self, other: BoxMotion) -> BoxMotion:
        return BoxMotion(*(np.concatenate([a, b]) for a, b in zip(
            (self.x, self.v, self.pxx, self.pxv, self.pvv), (other.x, other.v, other.pxx, other.pxv, other.pvv))))

    def predict(self, dt: float, still_size: np.ndarray | None = None) -> None:
        """Moves every box ``dt`` seconds forward. ``still_size`` (booleans [N]): boxes whose width and height stop
        changing (lost ones, as ByteTrack does, so an unseen box does not grow or shrink without bound)."""
        if dt <= 0 or not len(self):
            return
        if still_size is not None and still_size.any():
            self.v[still_size, 2:] = 0.0
        size2 = _sizes(self.x) ** 2
        q_x, q_v = POSITION_RATE * size2, VELOCITY_RATE * size2
        # x' = x + v dt; P' = F P F^T + Q, with Q of white-noise velocity (a random walk of the rate) plus the
        # position's own random walk: Qxx = q_x dt + q_v dt^3/3, Qxv = q_v dt^2/2, Qvv = q_v dt.
        self.x += self.v * dt
        self.pxx += 2 * dt * self.pxv + dt * dt * self.pvv + q_x * dt + q_v * dt ** 3 / 3
        self.pxv += dt * self.pvv + q_v * dt * dt / 2
        self.pvv += q_v * dt
        np.maximum(self.x[:, 2:], 1.0, out=self.x[:, 2:])

    def correct(self, index: np.ndarray, xyxy: np.ndarray) -> None:
        """The boxes at ``index`` measured at ``xyxy`` [len(index), 4] (the standard update, per coordinate)."""
        if not len(index):
            return
        z = xyxy_to_state(xyxy)
        x, v, pxx, pxv, pvv = self.x[index], self.v[index], self.pxx[index], self.pxv[index], self.pvv[index]
        r = (MEASURE_STD * _sizes(x)) ** 2
        s = pxx + r
        k_x, k_v = pxx / s, pxv / s
        innovation = z - x
        self.x[index] = x + k_x * innovation
        self.v[index] = v + k_v * innovation
        self.pxx[index] = (1 - k_x) * pxx
        self.pxv[index] = (1 - k_x) * pxv
        self.pvv[index] = pvv - k_v * pxv

    def xyxy(self) -> np.ndarray:
        return state_to_xyxy(self.x)


def _sizes(state: np.ndarray) -> np.ndarray:
    """The size each coordinate's noise scales with: the width for cx and w, the height for cy and h."""
    return state[:, [2, 3, 2, 3]]


def xyxy_to_state(xyxy: np.ndarray) -> np.ndarray:
    xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4)
    wh = np.maximum(xyxy[:, 2:] - xyxy[:, :2], 1.0)
    return np.concatenate([(xyxy[:, :2] + xyxy[:, 2:]) / 2, wh], axis=1)


def state_to_xyxy(state: np.ndarray) -> np.ndarray:
    half = state[:, 2:] / 2
    return np.concatenate([state[:, :2] - half, state[:, :2] + half], axis=1)
