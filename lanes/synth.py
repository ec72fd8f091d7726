"""Procedural road images with exact lane ground truth, drawn with numpy and Pillow (nothing is downloaded).

A road is a flat ground plane seen by a pinhole camera at height ``h`` whose pitch puts the horizon at image row
``horizon``. A ground point ``(X lateral, Z forward)`` relative to the camera projects to::

    u = cx + f * X / Z        v = horizon + f * h / Z

and a lane marking follows ``X(Z) = X0 + yaw * Z + curvature * Z**2 / 2``. Camera roll turns ``(u, v)`` about the
image centre. Everything, ground truth included, is computed in the unrolled frame and turned into the image before
it is drawn, so the image needs no resampling (Pillow's bilinear rotation alone would cost a third of an image's
time budget and blur it) and every corner is filled.

Each lane marking is one lane, annotated the way CULane does it: the line the marking follows, sampled on the
LaneATT rows ``lane_rows(height)`` (bottom row first) and continued through dash gaps and occluding vehicles.
Markings are rasterised here rather than by ``ImageDraw``: Pillow truncates polygon vertices to whole pixels, which
would move a marking's centre by up to half a pixel off its ground truth; the coverage below is exact (area of each
pixel under the marking), so the painted centre is the ground truth to a small fraction of a pixel.

``render_road(seed, ...)`` is a pure function of its arguments. Each aspect of a scene (geometry, markings,
appearance, scenery, vehicles, shadows, lighting, sensor) draws from its own generator spawned from ``seed``, so
switching an effect off (``SynthOptions.clean()``) leaves every other aspect, in particular the road itself, unchanged.
"""

from __future__ import annotations

import functools
import io
import math
import operator
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

from orinkit.lanes.errors import LaneError

__all__ = ["RoadSample", "SynthOptions", "lane_rows", "render_road", "road_stream"]

MIN_SIZE = 64
MAX_SIZE = 8192
_MAX_SEED = 2**128 - 1
# Pieces per pixel row when rasterising markings: the coverage of a row is exact for a straight piece of marking,
# dash ends within a row are counted by the share of paint, and a curve is straight over one row.
_SUBROWS = 1
# A marking stops where it runs flatter than this (|dx/dy| in the image): beyond, one image row would cut it over a
# long stretch and the per-row annotation (one x per row) stops meaning anything.
_MAX_SLOPE = 25.0
_TILE = 256          # noise tiles; repeats of fine noise at this period are invisible

_STREAMS = ("geometry", "markings", "appearance", "scenery", "vehicles", "shadows", "lighting", "sensor")

_PROBABILITIES = ("curve", "roll", "shadows", "vehicles", "worn", "noise", "blur", "jpeg", "lighting", "short_road",
                  "scenery", "road_wear", "kerb", "yellow", "dashed")
_RANGES = ("lane_width_m", "camera_height_m", "horizon", "fov_deg", "curvature", "draw_distance_m", "short_road_m",
           "marking_width_m", "dash_m", "gap_m", "noise_sigma", "blur_radius", "jpeg_quality", "brightness",
           "contrast", "gamma", "temperature")


@dataclass(frozen=True)
class SynthOptions:
    """What varies between roads. Effects are probabilities per image (``True``/``False`` mean always/never);
    ranges are ``(low, high)`` drawn uniformly."""

    # Effects.
    curve: float = 0.7           # a curved road (left or right, equally); else straight
    roll: float = 0.85           # camera roll, uniform in +-roll_max_deg
    shadows: float = 0.5         # tree, bridge and building shadows across the road
    vehicles: float = 0.5        # 1..max_vehicles vehicles ahead, standing in lanes
    worn: float = 0.3            # per marking: faded colour and broken patches
    noise: float = 0.85          # sensor noise
    blur: float = 0.25           # Gaussian blur
    jpeg: float = 0.35           # JPEG encode/decode
    lighting: float = 1.0        # brightness, contrast, gamma and colour temperature away from neutral
    short_road: float = 0.15     # the road ends early behind a rise with trees
    scenery: float = 0.7         # trees and buildings on the horizon
    road_wear: float = 0.5       # repair patches, cracks and tyre tracks on the asphalt
    kerb: float = 0.4            # concrete kerbs along the road edges
    yellow: float = 0.2          # per marking: yellow instead of white
    dashed: float = 0.7          # per inner marking: dashed (edge markings: a third of this)
    # Counts.
    min_markings: int = 2
    max_markings: int = 4
    max_vehicles: int = 3
    # Ranges (metres, degrees, fractions of the image height, 1/m).
    lane_width_m: tuple[float, float] = (3.0, 3.9)
    camera_height_m: tuple[float, float] = (1.2, 1.8)
    horizon: tuple[float, float] = (0.35, 0.55)       # horizon row / image height, at the image centre
    fov_deg: tuple[float, float] = (50.0, 70.0)       # horizontal field of view
    roll_max_deg: float = 3.0
    yaw_max_deg: float = 1.2                          # heading of the car against the road
    cam_offset_m: float = 0.6                         # lateral offset of the car from its lane's centre, at most
    curvature: tuple[float, float] = (0.001, 0.006)   # |1/radius| of a curved road
    draw_distance_m: tuple[float, float] = (60.0, 140.0)
    short_road_m: tuple[float, float] = (25.0, 55.0)
    marking_width_m: tuple[float, float] = (0.10, 0.20)
    dash_m: tuple[float, float] = (2.5, 3.5)
    gap_m: tuple[float, float] = (5.5, 9.0)
    noise_sigma: tuple[float, float] = (1.5, 8.0)     # grey levels (four strengths spread over the range)
    blur_radius: tuple[float, float] = (0.5, 1.6)     # pixels at 640 wide (scaled with the width)
    jpeg_quality: tuple[int, int] = (30, 95)
    brightness: tuple[float, float] = (0.65, 1.3)
    contrast: tuple[float, float] = (0.75, 1.25)
    gamma: tuple[float, float] = (0.75, 1.35)
    temperature: tuple[float, float] = (-0.12, 0.12)  # red gain +t, blue gain -t

    def __post_init__(self) -> None:
        for name in _PROBABILITIES:
            value = getattr(self, name)
            if not isinstance(value, (int, float, np.integer, np.floating)) or not 0.0 <= float(value) <= 1.0:
                raise LaneError(f"SynthOptions.{name}={value!r} is not a probability",
                                hint="give a number in [0, 1], or True/False for always/never")
        for name in _RANGES:
            value = getattr(self, name)
            try:
                low, high = (float(v) for v in value)
            except (TypeError, ValueError):
                raise LaneError(f"SynthOptions.{name}={value!r} is not a (low, high) pair",
                                hint="give two numbers, e.g. " + repr(getattr(SynthOptions, name))) from None
            if not (math.isfinite(low) and math.isfinite(high) and low <= high):
                raise LaneError(f"SynthOptions.{name}={value!r} is not an increasing range",
                                hint="give (low, high) with low <= high")
        positive = ("lane_width_m", "camera_height_m", "fov_deg", "draw_distance_m", "short_road_m",
                    "marking_width_m", "dash_m", "gap_m", "brightness", "contrast", "gamma")
        for name in positive:
            if float(getattr(self, name)[0]) <= 0:
                raise LaneError(f"SynthOptions.{name}={getattr(self, name)!r} must be above 0",
                                hint="give positive values")
        if not (0.0 < self.horizon[0] and self.horizon[1] < 0.9):
            raise LaneError(f"SynthOptions.horizon={self.horizon!r} leaves no road in the image",
                            hint="give fractions of the height in (0, 0.9), e.g. (0.35, 0.55)")
        if self.fov_deg[1] >= 150:
            raise LaneError(f"SynthOptions.fov_deg={self.fov_deg!r} is too wide for a pinhole camera",
                            hint="stay below 150 degrees")
        if not (1 <= self.jpeg_quality[0] and self.jpeg_quality[1] <= 100):
            raise LaneError(f"SynthOptions.jpeg_quality={self.jpeg_quality!r} is outside 1..100",
                            hint="e.g. (30, 95)")
        if min(self.noise_sigma[0], self.blur_radius[0], self.curvature[0]) < 0 or self.curvature[1] > 0.05:
            raise LaneError("SynthOptions: noise_sigma, blur_radius and curvature must not be negative "
                            f"(curvature at most 0.05), got {self.noise_sigma}, {self.blur_radius}, "
                            f"{self.curvature}", hint="give ranges of non-negative values")
        for name, low, high in (("roll_max_deg", 0.0, 20.0), ("yaw_max_deg", 0.0, 10.0),
                                ("cam_offset_m", 0.0, 2.0)):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not low <= value <= high:
                raise LaneError(f"SynthOptions.{name}={value!r} is outside [{low}, {high}]",
                                hint=f"give a number in [{low}, {high}]")
        for name in ("min_markings", "max_markings", "max_vehicles"):
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), (int, np.integer)):
                raise LaneError(f"SynthOptions.{name}={getattr(self, name)!r} is not an integer",
                                hint="give a whole number")
        if not 2 <= self.min_markings <= self.max_markings <= 6:
            raise LaneError(f"SynthOptions markings {self.min_markings}..{self.max_markings} are not within 2..6",
                            hint="use 2 <= min_markings <= max_markings <= 6")
        if not 0 <= self.max_vehicles <= 8:
            raise LaneError(f"SynthOptions.max_vehicles={self.max_vehicles} is outside 0..8", hint="e.g. 3")

    @classmethod
    def clean(cls) -> SynthOptions:
        """The same roads (same seed, same geometry, markings and lighting) with no roll, shadows, vehicles,
        wear, noise, blur or JPEG."""
        return cls(roll=0.0, shadows=0.0, vehicles=0.0, worn=0.0, noise=0.0, blur=0.0, jpeg=0.0)


@dataclass(frozen=True, eq=False)
class RoadSample:
    """One drawn road: the image, its lanes on the sample rows, and what was drawn.

    ``scene`` holds plain values (JSON-able): ``seed``, ``width``, ``height``; the camera: ``horizon_y`` (the
    horizon's row at the image's centre column), ``roll_deg`` (about the image centre, positive: the horizon rises
    to the right), ``focal_px``, ``fov_deg``, ``camera_height_m``; the road: ``curvature`` (1/m, negative bends
    left), ``yaw_deg``, ``lane_count`` (markings), ``driving_lanes``, ``ego_lane`` (0 = leftmost), ``lane_width_m``,
    ``cam_offset`` (metres right of the ego lane's centre), ``draw_distance_m``, ``short_road``, ``road``;
    ``markings`` left to right on the ground, each with ``colour`` ("white"/"yellow"), ``dashed``, ``worn``,
    ``x_m``, ``width_m``, ``dash_m``/``gap_m``/``phase_m`` (dashed ones: paint where (z - phase) mod (dash + gap)
    < dash), ``z_start_m``/``z_end_m`` (where drawn), ``rgb`` (its colour in the image before texture and
    noise) and ``lane_index`` (its lane in ``lanes``, or None when not in the image); ``vehicles`` (``kind``,
    ``lane``, ``z_m``, ``x_m``, sizes, ``colour``, ``box`` in image pixels); ``shadows`` (``kind``, ``strength``);
    ``lighting``; ``blur_radius``, ``noise_sigma``, ``jpeg_quality`` (None when not applied).
    """

    image: np.ndarray                      # [H, W, 3] uint8 RGB
    lanes: list[np.ndarray]                # each [M, 2] float64 (x, y) on `rows`, bottom row first; left to right
    rows: np.ndarray                       # lane_rows(H, n_rows)
    scene: dict[str, Any] = field(default_factory=dict)

    def bgr(self) -> np.ndarray:
        """The image in BGR order (what LaneATT and cv2 use)."""
        return np.ascontiguousarray(self.image[..., ::-1])

    def encode(self, format: str = "PNG", quality: int = 95) -> bytes:
        """The image as PNG or JPEG (``quality`` 1..100) bytes."""
        kind = str(format).upper()
        kind = "JPEG" if kind == "JPG" else kind
        if kind not in ("PNG", "JPEG"):
            raise LaneError(f"cannot encode a road as {format!r}", hint="use 'PNG' or 'JPEG'")
        if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or not 1 <= quality <= 100:
            raise LaneError(f"JPEG quality {quality!r} is outside 1..100", hint="e.g. 95")
        buffer = io.BytesIO()
        picture = Image.fromarray(self.image)
        if kind == "JPEG":
            picture.save(buffer, "JPEG", quality=int(quality))
        else:
            picture.save(buffer, "PNG")
        return buffer.getvalue()


def lane_rows(height: int, n_rows: int = 72) -> np.ndarray:
    """The LaneATT sample rows in pixels: ``y_i = (1 - i/(n_rows-1)) * height``, from the bottom edge (y = height)
    up to the top (y = 0)."""
    height = _whole(height, "height", 1, MAX_SIZE, "give the image height in pixels")
    n_rows = _whole(n_rows, "n_rows", 2, 100_000, "LaneATT uses 72")
    return (1.0 - np.arange(n_rows, dtype=np.float64) / (n_rows - 1)) * height


def road_stream(seed: int, count: int | None = None, **render_args) -> Iterator[RoadSample]:
    """Roads from seeds ``seed, seed + 1, ...``; ``count`` of them, or without end. ``render_args`` go to
    :func:`render_road`. Arguments are checked here, before the first road is drawn."""
    seed = _whole(seed, "seed", 0, _MAX_SEED, "give a non-negative integer")
    if count is not None:
        count = _whole(count, "count", 0, _MAX_SEED, "give a non-negative integer, or None for no end")
    width = render_args.get("width", 1280)
    height = render_args.get("height", 720)
    _check_size(width, height)
    unknown = set(render_args) - {"width", "height", "options", "n_rows"}
    if unknown:
        raise LaneError(f"road_stream got unknown arguments {sorted(unknown)}",
                        hint="render_road takes width, height, options and n_rows")
    return _stream(seed, count, render_args)


def _stream(seed: int, count: int | None, render_args: dict) -> Iterator[RoadSample]:
    index = 0
    while count is None or index < count:
        yield render_road(seed + index, **render_args)
        index += 1


def render_road(seed: int, width: int = 1280, height: int = 720, *, options: SynthOptions = SynthOptions(),
                n_rows: int = 72) -> RoadSample:
    """Draw the road of ``seed``: the same arguments give byte-identical images and the same lanes."""
    seed = _whole(seed, "seed", 0, _MAX_SEED, "give a non-negative integer")
    width, height = _check_size(width, height)
    n_rows = _whole(n_rows, "n_rows", 2, 100_000, "LaneATT uses 72")
    if not isinstance(options, SynthOptions):
        raise LaneError(f"options is a {type(options).__name__}, not SynthOptions",
                        hint="pass SynthOptions(...) or SynthOptions.clean()")
    rngs = {name: np.random.default_rng(child)
            for name, child in zip(_STREAMS, np.random.SeedSequence(seed).spawn(len(_STREAMS)))}
    return _Renderer(seed, width, height, options, n_rows, rngs).render()


# ---------------------------------------------------------------------------------------------------------------
# Argument checks


def _whole(value, name: str, low: int, high: int, hint: str) -> int:
    if isinstance(value, bool):
        raise LaneError(f"{name}={value!r} is not an integer", hint=hint)
    try:
        number = operator.index(value)
    except TypeError:
        raise LaneError(f"{name}={value!r} is not an integer", hint=hint) from None
    if not low <= number <= high:
        raise LaneError(f"{name}={number} is outside {low}..{high}", hint=hint)
    return number


def _check_size(width, height) -> tuple[int, int]:
    hint = f"give width and height as integers in {MIN_SIZE}..{MAX_SIZE}, e.g. 640, 360"
    return (_whole(width, "width", MIN_SIZE, MAX_SIZE, hint), _whole(height, "height", MIN_SIZE, MAX_SIZE, hint))


# ---------------------------------------------------------------------------------------------------------------
# Noise tiles: made once per process from fixed seeds and cut at random offsets. Drawing fresh noise for every pixel
# of every image would cost more than the rest of the image; a fixed tile keeps render_road a pure function.

_TEXTURES = ((3.5, 2.0), (3.5, 4.5), (7.0, 2.0), (7.0, 4.5))   # ground: (grain sigma, blotch amplitude)
_NOISE_LEVELS = 4    # sensor noise strengths per range of sigmas: each costs a cached tile


@functools.lru_cache(maxsize=1)
def _gaussian_tile() -> np.ndarray:
    """[T, T, 3] float32 standard Gaussian noise."""
    return np.random.default_rng(0x5EED).standard_normal((_TILE, _TILE, 3)).astype(np.float32)


def _centred(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(128.0 + values), 0, 255).astype(np.uint8)


@functools.lru_cache(maxsize=16)
def _tile(kind: str, variant: float) -> np.ndarray:
    """Noise around 128 (uint8): ``texture`` [T, T] (variant: index into _TEXTURES), fine grain and soft blotches of
    worn and repaired asphalt; ``noise`` [T, T, 3] (variant: sigma), sensor noise. Strengths are baked in, so that
    adding noise to an image is one Pillow operation."""
    if kind == "noise":
        return _centred(_gaussian_tile() * variant)
    sigma, blotch = _TEXTURES[int(variant)]
    coarse = np.random.default_rng(0x5EEE).integers(0, 256, size=(_TILE // 8, _TILE // 8), dtype=np.uint8)
    soft = np.asarray(Image.fromarray(coarse).resize((_TILE, _TILE), Image.Resampling.BICUBIC), dtype=np.float32)
    return _centred(_gaussian_tile()[..., 0] * sigma + (soft - 127.5) / 80.0 * blotch)


@functools.lru_cache(maxsize=32)
def _tiled(kind: str, variant: float, rows: int, cols: int) -> Image.Image:
    tile = _tile(kind, variant)
    return Image.fromarray(np.tile(tile, (rows, cols) + (1,) * (tile.ndim - 2)))


def _noise_crop(kind: str, variant: float, rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A width x height cut of a noise tile at a random offset."""
    big = _tiled(kind, variant, -(-(height + _TILE) // _TILE), -(-(width + _TILE) // _TILE))
    oy, ox = (int(v) for v in rng.integers(0, _TILE, size=2))
    return big.crop((ox, oy, ox + width, oy + height))


# ---------------------------------------------------------------------------------------------------------------
# Camera


@dataclass(frozen=True)
class _Camera:
    """Pinhole camera over flat ground. ``u, v`` are the unrolled image (pixel centres at integers, horizon on row
    ``hz``); roll turns them about the image centre ``(cx, cy)`` into image coordinates ``x, y``."""

    f: float            # focal length, pixels
    h: float            # height above the ground, metres
    hz: float           # horizon row of the unrolled image
    cx: float
    cy: float
    yaw: float          # heading of the road against the camera, radians (small)
    curvature: float    # 1/m
    roll: float         # radians; positive: the horizon rises to the right

    @property
    def cos(self) -> float:
        return math.cos(self.roll)

    @property
    def sin(self) -> float:
        return math.sin(self.roll)

    def lateral(self, x0, z):
        """Lateral position at distance ``z`` of the road line that is ``x0`` from the camera at z = 0."""
        return x0 + self.yaw * z + 0.5 * self.curvature * z * z

    def unrolled(self, x, z, up=0.0):
        z = np.asarray(z, dtype=np.float64)
        return self.cx + self.f * np.asarray(x) / z, self.hz + self.f * (self.h - up) / z

    def to_image(self, u, v):
        u, v = np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64)
        if self.roll == 0.0:
            return u, v
        du, dv = u - self.cx, v - self.cy
        return self.cx + self.cos * du + self.sin * dv, self.cy - self.sin * du + self.cos * dv

    def point(self, x, z, up=0.0):
        """Image coordinates of the point ``x`` metres lateral, ``z`` ahead, ``up`` above the ground."""
        return self.to_image(*self.unrolled(x, z, up))

    def z_of_v(self, v):
        return self.f * self.h / (np.asarray(v, dtype=np.float64) - self.hz)

    def horizon_y(self, x):
        """The image row of the horizon at column ``x``."""
        return self.cy + (self.hz - self.cy - self.sin * (np.asarray(x, dtype=np.float64) - self.cx)) / self.cos


def _flat(x, y, scale: float = 1.0) -> list[float]:
    """Polygon vertices as Pillow takes them (far-off points clipped: they only matter as directions)."""
    return np.clip(np.stack([np.ravel(x), np.ravel(y)], axis=1) * scale, -1e5, 1e5).ravel().tolist()


# ---------------------------------------------------------------------------------------------------------------
# Marking rasteriser


def _ramp2(t: np.ndarray) -> np.ndarray:
    t = np.maximum(t, 0.0)
    return 0.5 * t * t


def _coverage(cols: np.ndarray, xa: np.ndarray, xb: np.ndarray, hw: np.ndarray) -> np.ndarray:
    """Mean over a sub-row of how much of pixel column ``cols`` a band of half-width ``hw`` covers, its centre
    moving linearly from ``xa`` to ``xb`` over the sub-row.

    The overlap of pixel [i-1/2, i+1/2] with [x-hw, x+hw] is a trapezoid in d = x - i (two boxes convolved); its
    mean over x in [xa, xb] is a difference of the trapezoid's antiderivative, sums of max(t, 0)^2 / 2."""
    knots = (hw + 0.5, hw - 0.5, -hw + 0.5, -hw - 0.5)
    signs = (1.0, -1.0, -1.0, 1.0)
    da, db = xa - cols, xb - cols
    span = db - da
    steep = np.abs(span) < 1e-3
    total = sum(sign * (_ramp2(db + knot) - _ramp2(da + knot)) for knot, sign in zip(knots, signs))
    mean = total / np.where(steep, 1.0, span)
    if steep.any():
        mid = 0.5 * (da + db)
        trapezoid = sum(sign * np.maximum(mid + knot, 0.0) for knot, sign in zip(knots, signs))
        mean = np.where(steep, trapezoid, mean)
    return np.clip(mean, 0.0, 1.0)


@dataclass
class _Marking:
    x0: float                   # lateral offset from the camera at z = 0, metres
    width: float
    colour: np.ndarray          # RGB as painted (worn ones faded towards the asphalt)
    yellow: bool
    dashed: bool
    dash: float
    gap: float
    phase: float
    worn: bool
    wear: tuple                 # (amplitudes, wavenumbers, phases, bias) of the broken patches
    fade: float                 # how far a worn marking's colour has gone towards the asphalt
    z_lo: float = 0.0           # drawn from z_lo to z_hi (metres ahead); not drawn when equal
    z_hi: float = 0.0
    track: tuple | None = None  # dense (x, y, z, u, v), near to far, of its centre line where drawn
    lane_index: int | None = None

    def painted(self, near: np.ndarray, far: np.ndarray) -> np.ndarray:
        """Metres of paint between ``near`` and ``far`` (>= near) along the marking."""
        if not self.dashed:
            return far - near
        period = self.dash + self.gap

        def cumulative(z):
            shifted = z - self.phase
            whole = np.floor(shifted / period)
            return whole * self.dash + np.minimum(shifted - whole * period, self.dash)

        return cumulative(far) - cumulative(near)

    def wear_factor(self, z: np.ndarray) -> np.ndarray | float:
        if not self.worn:
            return 1.0
        amplitudes, waves, phases, bias = self.wear
        wave = sum(a * np.sin(k * z + p) for a, k, p in zip(amplitudes, waves, phases))
        return np.clip(0.5 + bias + 2.0 * wave, 0.0, 1.0)

    def gt_far_end(self) -> float:
        """Where the annotation of the marking ends: the far end of its last dash."""
        if not self.dashed:
            return self.z_hi
        period = self.dash + self.gap
        start = self.phase + math.floor((self.z_hi - self.phase) / period) * period
        return min(start + self.dash, self.z_hi)


def _blocks(spans: np.ndarray, budget: int = 32768) -> Iterator[tuple[slice, int]]:
    """Runs of rows whose windows, padded to the widest, hold at most ``budget`` pixels: one numpy pass per run,
    without padding the thin far rows to the width of the near ones."""
    start, widest = 0, 0
    for index, span in enumerate(spans.tolist()):
        widest_with = max(widest, span)
        if index > start and widest_with * (index + 1 - start) > budget:
            yield slice(start, index), widest
            start, widest_with = index, span
        widest = widest_with
    if start < spans.size:
        yield slice(start, spans.size), widest


def _paint_marking(canvas: np.ndarray, marking: _Marking, focal: float) -> None:
    """Blend ``marking`` into ``canvas`` ([H, W, 3] uint8) with the exact share of every pixel it covers."""
    height, width = canvas.shape[:2]
    x, y, z, u, v = marking.track
    first = max(math.floor(y[-1] - 0.5), 0)
    last = min(math.ceil(y[0] + 0.5), height - 1)
    if last < first:
        return
    rows = np.arange(first, last + 1, dtype=np.float64)
    edges = rows[:, None] - 0.5 + np.arange(_SUBROWS + 1)[None, :] / _SUBROWS       # [R, S+1], downwards
    flat_edges, rising = edges.ravel(), y[::-1]

    def along(values):
        return np.interp(flat_edges, rising, values[::-1]).reshape(edges.shape)

    xe, ue, ve = along(x), along(u), along(v)
    ze = 1.0 / along(1.0 / z)                 # 1/z is linear in the row; z is not
    far, near = ze[:, :-1], ze[:, 1:]
    extent = far - near
    share = np.where(extent > 1e-9, marking.painted(near, far) / np.maximum(extent, 1e-9), 0.0)
    middle = 0.5 * (far + near)
    xa, xb = xe[:, :-1], xe[:, 1:]
    # f*w/z is the marking's width along an unrolled row; along an image row (turned by the roll) it is cut at
    # another slant: scale by the ratio of the two cuts of the same band.
    du, dv = ue[:, 1:] - ue[:, :-1], ve[:, 1:] - ve[:, :-1]
    slope_image = (xb - xa) * _SUBROWS
    slope_unrolled = du / np.where(np.abs(dv) > 1e-12, dv, 1.0)
    cut = np.where(np.abs(dv) > 1e-12, np.sqrt((1.0 + slope_image ** 2) / (1.0 + slope_unrolled ** 2)), 1.0)
    true_hw = 0.5 * focal * marking.width / middle * cut
    hw = np.maximum(true_hw, 0.5)
    # Thinner than a pixel: draw one pixel wide, as faint as the paint it stands for (but still visible).
    weight = share * np.clip(true_hw / hw, 0.4, 1.0) * marking.wear_factor(middle)
    left = np.floor(np.minimum(xa, xb) - hw - 1.0).min(axis=1)
    right = np.ceil(np.maximum(xa, xb) + hw + 1.0).max(axis=1)
    keep = (weight.max(axis=1) > 0) & (right >= 0) & (left <= width - 1)
    if not keep.any():
        return
    rows, xa, xb, hw, weight, left, right = (a[keep] for a in (rows, xa, xb, hw, weight, left, right))
    flat = canvas.reshape(-1, 3)
    colour = np.asarray(marking.colour, dtype=np.float32)
    for block, span in _blocks((right - left + 1).astype(int)):
        cols = left[block][:, None] + np.arange(span)[None, :]                              # [r, w]
        cover = _coverage(cols[:, None, :], xa[block][..., None], xb[block][..., None], hw[block][..., None])
        alpha = (cover * weight[block][..., None]).sum(axis=1) / _SUBROWS                   # [r, w]
        inside = (cols >= 0) & (cols <= width - 1) & (alpha > 2e-3)
        if not inside.any():
            continue
        index = (rows[block][:, None].astype(np.int64) * width + cols.astype(np.int64))[inside]
        a = alpha[inside].astype(np.float32)[:, None]
        pixels = flat[index].astype(np.float32)
        flat[index] = np.rint(pixels + (colour - pixels) * a).astype(np.uint8)


# ---------------------------------------------------------------------------------------------------------------
# The renderer


def _mix(a, b, t):
    return np.asarray(a, dtype=np.float64) * (1.0 - t) + np.asarray(b, dtype=np.float64) * t


def _rgb(colour) -> tuple[int, ...]:
    return tuple(round(float(c)) for c in np.clip(colour, 0, 255))


def _chance(rng: np.random.Generator, probability: float) -> bool:
    # Drawn whatever the probability, so that an option never shifts the numbers that follow in its stream.
    return bool(rng.random() < float(probability))


def _blur_kernel(sigma: float) -> ImageFilter.Kernel:
    taps = np.exp(-0.5 * (np.arange(-1, 2) / sigma) ** 2)
    weights = np.outer(taps, taps)
    return ImageFilter.Kernel((3, 3), (weights / weights.sum()).ravel().tolist(), scale=1.0)


class _Renderer:
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
        self._road(draw)
        canvas = np.array(image)
        for marking in self.markings:
            if marking.worn:
                marking.colour = _mix(marking.colour, self.asphalt, marking.fade)
            if marking.track is not None:
                _paint_marking(canvas, marking, self.cam.f)
        image = Image.fromarray(canvas)
        self._haze_and_texture(image)
        self._shadows(image, vehicles)
        self._draw_vehicles(image, vehicles)
        image = image.point(lut.ravel().tolist())
        pixels = self._sensor(image)

        self.scene["markings"] = [
            {"colour": "yellow" if m.yellow else "white", "dashed": m.dashed, "worn": m.worn,
             "x_m": float(m.x0), "width_m": float(m.width), "dash_m": float(m.dash) if m.dashed else None,
             "gap_m": float(m.gap) if m.dashed else None, "phase_m": float(m.phase) if m.dashed else None,
             "z_start_m": float(m.z_lo), "z_end_m": float(m.z_hi),
             "rgb": [int(lut[c, round(float(np.clip(m.colour[c], 0, 255)))]) for c in range(3)],
             "lane_index": m.lane_index}
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
        shoulders = g.uniform(0.5, 2.5, size=2)

        f = 0.5 * self.width / math.tan(math.radians(fov) / 2.0)
        cx, cy = (self.width - 1) / 2.0, (self.height - 1) / 2.0
        roll_rad = math.radians(roll)
        # The horizon crosses the image's centre column at row `horizon`.
        hz = cy + math.cos(roll_rad) * (horizon - cy)
        self.cam = _Camera(f=f, h=cam_height, hz=hz, cx=cx, cy=cy, yaw=math.radians(yaw), curvature=curvature,
                           roll=roll_rad)
        self.z_end = min(short_far, far) if short else far
        # The lowest unrolled row the image reaches (at y = height, the first sample row), and a little more.
        v_bottom = cy + abs(math.sin(roll_rad)) * cx + math.cos(roll_rad) * (self.height - cy) + 2.0
        self.z_near = f * cam_height / (v_bottom - hz)
        self.x_marks = [(k - ego - 0.5) * lane_width - offset for k in range(n)]
        self.road_edges = (self.x_marks[0] - shoulders[0], self.x_marks[-1] + shoulders[1])
        self.short = short
        self.scene.update({
            "horizon_y": float(horizon), "roll_deg": float(roll), "curvature": float(curvature),
            "yaw_deg": float(yaw), "lane_count": n, "driving_lanes": n - 1, "ego_lane": ego,
            "lane_width_m": float(lane_width), "cam_offset": float(offset), "camera_height_m": float(cam_height),
            "focal_px": float(f), "fov_deg": float(fov), "draw_distance_m": float(self.z_end), "short_road": short,
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

    def _ground_truth(self) -> list[np.ndarray]:
        """Fix where each marking is drawn and sample it on the LaneATT rows of the image."""
        cam, width, height = self.cam, self.width, self.height
        rows = lane_rows(height, self.n_rows)
        for marking in self.markings:
            marking.z_lo = marking.z_hi = self.z_near       # not drawn unless there is something to annotate
        if self.z_end <= self.z_near * 1.01:
            return []                                     # the road ends before the image's lowest row
        v_far, v_near = cam.hz + cam.f * cam.h / self.z_end, cam.hz + cam.f * cam.h / self.z_near
        count = int(4 * (v_near - v_far)) + 16
        # Uniform in the unrolled row: a dense polyline wherever the marking is seen.
        z = cam.z_of_v(np.linspace(v_near, v_far, count))
        z[0], z[-1] = self.z_near, self.z_end
        lanes: list[tuple[float, np.ndarray, _Marking]] = []
        for marking in self.markings:
            u, v = cam.unrolled(cam.lateral(marking.x0, z), z)
            x, y = cam.to_image(u, v)
            seen = (x >= 0) & (x <= width - 1) & (y >= 0) & (y <= height)
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
            if end <= start:
                continue
            marking.z_lo, marking.z_hi = float(z[start]), float(z[end])
            z_gt = marking.gt_far_end()
            stop = max(min(int(np.searchsorted(z, z_gt, side="left")), end + 1), start)   # samples nearer than z_gt
            x_end, y_end = cam.point(cam.lateral(marking.x0, z_gt), z_gt)
            xs, ys = np.append(x[start:stop], x_end), np.append(y[start:stop], y_end)
            chosen = (rows <= ys[0]) & (rows >= ys[-1])
            gx = np.interp(rows[chosen], ys[::-1], xs[::-1])
            keep = (gx >= 0) & (gx <= width - 1)
            points = np.stack([gx[keep], rows[chosen][keep]], axis=1)
            if len(points) < 2:
                marking.z_hi = marking.z_lo
                continue
            part = slice(start, end + 1)
            marking.track = (x[part], y[part], z[part], u[part], v[part])
            lanes.append((float(points[0, 0]), points, marking))
        lanes.sort(key=lambda item: item[0])
        for index, (_, _, marking) in enumerate(lanes):
            marking.lane_index = index
        return [points for _, points, _ in lanes]

    # -- the ground and what stands on it ------------------------------------------------------------------------

    def _palette(self) -> None:
        a = self.rng["appearance"]
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
        grey = a.uniform(50, 120)
        self.asphalt = np.clip(grey + a.uniform(-6, 6, size=3) + np.array([0, 0, a.uniform(-4, 6)]), 0, 255)
        self.kerb_colour = np.full(3, a.uniform(135, 180)) + a.uniform(-5, 5, size=3)
        self.texture = int(a.integers(0, len(_TEXTURES)))
        self.haze = a.uniform(0.0, 0.45)

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
        z = cam.z_of_v(np.linspace(cam.hz + cam.f * cam.h / z_lo, cam.hz + cam.f * cam.h / z_hi, count))
        left = cam.point(cam.lateral(x_left, z), z)
        right = cam.point(cam.lateral(x_right, z), z)
        return _flat(np.r_[left[0], right[0][::-1]], np.r_[left[1], right[1][::-1]])

    def _scenery(self, draw: ImageDraw.ImageDraw) -> None:
        a, cam = self.rng["scenery"], self.cam
        show = _chance(a, self.opt.scenery)
        scale = self.width / 640.0
        count = 64
        kinds = a.integers(0, 3, size=count)          # 0 nothing, 1 trees, 2 a building
        spans, talls = a.uniform(15, 90, size=count) * scale, a.uniform(4, 32, size=count) * scale
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
        top = cam.hz + cam.f * cam.h / self.z_end - 0.5
        ridge = cam.hz - a.uniform(5, 25) * scale
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
        draw = ImageDraw.Draw(image, "RGBA")
        bands = 5
        # Nested bands from the horizon down, whose alphas add up towards the horizon.
        reach = cam.hz + cam.f * cam.h / self.z_near * 0.4 * (np.arange(1, bands + 1) / bands) ** 2
        us = np.array([-2.0, self.width + 1.0, self.width + 1.0, -2.0])
        xs, ys = cam.to_image(np.broadcast_to(us, (bands, 4)),
                              np.stack([np.full(bands, cam.hz)] * 2 + [reach] * 2, axis=1))
        fill = _rgb(self.sky_low) + (int(255 * self.haze / bands),)
        for x, y in zip(xs, ys):
            draw.polygon(_flat(x, y), fill=fill)
        texture = _noise_crop("texture", self.texture, self.rng["appearance"], self.width, self.height)
        ImageDraw.Draw(texture).polygon(self._horizon_polygon(below=False), fill=128)
        image.paste(ImageChops.add(image, Image.merge("RGB", (texture, texture, texture)), 1.0, -128))

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
            strength = s.uniform(0.3, 0.65)
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
        x_far = x + (cam.yaw + cam.curvature * z) * length       # it points along the road

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
