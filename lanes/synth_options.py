"""What the road renderer varies (:class:`SynthOptions`), what it returns (:class:`RoadSample`), and its argument
checks. Every option added after the first renderer defaults to what that renderer drew, so that the roads of
``SynthOptions()`` (the data of earlier training runs and of the held-out and stress sets) stay byte-identical."""

from __future__ import annotations

import io
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from orinkit.lanes.errors import LaneError

MIN_SIZE = 64
MAX_SIZE = 8192
_MAX_SEED = 2**128 - 1

_PROBABILITIES = ("curve", "roll", "shadows", "vehicles", "worn", "noise", "blur", "jpeg", "lighting", "short_road",
                  "scenery", "road_wear", "kerb", "yellow", "dashed",
                  "s_curve", "merge", "double", "dots", "flat", "photo", "guard_rail", "crosswalk", "road_signs",
                  "seams", "vignette", "distortion", "low_res")
_RANGES = ("lane_width_m", "camera_height_m", "horizon", "fov_deg", "curvature", "draw_distance_m", "short_road_m",
           "marking_width_m", "dash_m", "gap_m", "noise_sigma", "blur_radius", "jpeg_quality", "brightness",
           "contrast", "gamma", "temperature",
           "shoulder_m", "asphalt_grey", "shadow_strength", "curvature_change", "vignette_strength",
           "distortion_k", "low_res_scale")
_POSITIVE = ("lane_width_m", "camera_height_m", "fov_deg", "draw_distance_m", "short_road_m", "marking_width_m",
             "dash_m", "gap_m", "brightness", "contrast", "gamma", "low_res_scale")
_NON_NEGATIVE = ("noise_sigma", "blur_radius", "curvature", "shoulder_m", "asphalt_grey", "curvature_change",
                 "vignette_strength", "distortion_k")
# Fractions of something (a shadow's darkening, a vignette's, a resolution): at most 1.
_FRACTIONS = ("shadow_strength", "vignette_strength", "low_res_scale")
SURROUNDINGS = ("grass", "dry", "gravel", "sand", "snow", "concrete", "city")


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
    # Effects of the wide data (off by default: the first renderer never drew them).
    s_curve: float = 0.0         # the curvature changes along the road (curvature_change), into an S-bend
    merge: float = 0.0           # an outer marking runs into its neighbour (a lane ends) or leaves it (a lane opens)
    double: float = 0.0          # per inner marking: a double line (its lane is the line between the two)
    dots: float = 0.0            # per dashed marking: raised dots instead of painted dashes
    flat: float = 0.0            # flat colours: no grain, blotches or haze on the ground
    photo: float = 0.0           # photographs (the images scikit-learn ships) as scenery and ground texture
    guard_rail: float = 0.0      # guard rails along the road's edges
    crosswalk: float = 0.0       # zebra stripes across the road (and a stop line)
    road_signs: float = 0.0      # arrows and words painted in the lanes
    seams: float = 0.0           # tar seams, cracks and ghosts of removed markings along the lanes
    vignette: float = 0.0        # darker image corners
    distortion: float = 0.0      # barrel distortion of a wide lens
    low_res: float = 0.0         # a low-resolution camera scaled up to the image size
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
    shoulder_m: tuple[float, float] = (0.5, 2.5)      # asphalt beyond the outer markings
    asphalt_grey: tuple[float, float] = (50.0, 120.0)
    shadow_strength: tuple[float, float] = (0.3, 0.65)
    curvature_change: tuple[float, float] = (2e-5, 1.5e-4)   # |d curvature / dz| of an S-bend, 1/m^2
    vignette_strength: tuple[float, float] = (0.15, 0.55)    # darkening in the corners
    distortion_k: tuple[float, float] = (0.04, 0.25)         # barrel: r_source = r (1 + k r^2) / (1 + k)
    low_res_scale: tuple[float, float] = (0.35, 0.8)         # the camera's resolution / the image's
    # Choices. camera_aspects: width / height of the camera whose picture was scaled to the image size (CULane's
    # 1640x590 is 2.78); empty: the image is the camera's own (square pixels). surroundings: what lies beside the
    # road (SURROUNDINGS); empty: the first renderer's grass, dirt and gravel.
    camera_aspects: tuple[float, ...] = ()
    surroundings: tuple[str, ...] = ()

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
        for name in _POSITIVE:
            if float(getattr(self, name)[0]) <= 0:
                raise LaneError(f"SynthOptions.{name}={getattr(self, name)!r} must be above 0",
                                hint="give positive values")
        for name in _NON_NEGATIVE:
            if float(getattr(self, name)[0]) < 0:
                raise LaneError(f"SynthOptions.{name}={getattr(self, name)!r} must not be negative",
                                hint="give a range of non-negative values")
        for name in _FRACTIONS:
            if float(getattr(self, name)[1]) > 1:
                raise LaneError(f"SynthOptions.{name}={getattr(self, name)!r} goes above 1",
                                hint="give fractions in [0, 1]")
        if not (0.0 < self.horizon[0] and self.horizon[1] < 0.9):
            raise LaneError(f"SynthOptions.horizon={self.horizon!r} leaves no road in the image",
                            hint="give fractions of the height in (0, 0.9), e.g. (0.35, 0.55)")
        if self.fov_deg[1] >= 150:
            raise LaneError(f"SynthOptions.fov_deg={self.fov_deg!r} is too wide for a pinhole camera",
                            hint="stay below 150 degrees")
        if not (1 <= self.jpeg_quality[0] and self.jpeg_quality[1] <= 100):
            raise LaneError(f"SynthOptions.jpeg_quality={self.jpeg_quality!r} is outside 1..100",
                            hint="e.g. (30, 95)")
        for name, most in (("curvature", 0.05), ("curvature_change", 1e-3), ("asphalt_grey", 255.0),
                           ("distortion_k", 1.0)):
            if float(getattr(self, name)[1]) > most:
                raise LaneError(f"SynthOptions.{name}={getattr(self, name)!r} goes above {most:g}",
                                hint=f"give a range up to {most:g}")
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
        aspects = self.camera_aspects
        if not isinstance(aspects, tuple) or not all(
                isinstance(a, (int, float)) and not isinstance(a, bool) and 0.25 <= a <= 8 for a in aspects):
            raise LaneError(f"SynthOptions.camera_aspects={aspects!r} is not a tuple of aspect ratios in 0.25..8",
                            hint="e.g. (1.78, 2.78) for 16:9 and CULane's 1640x590, or () for square pixels")
        kinds = self.surroundings
        if not isinstance(kinds, tuple) or not set(kinds) <= set(SURROUNDINGS):
            raise LaneError(f"SynthOptions.surroundings={kinds!r} names something the renderer cannot draw",
                            hint=f"choose from {', '.join(SURROUNDINGS)}, or () for the first renderer's verges")

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
    to the right), ``focal_px`` (horizontal), ``pixel_aspect`` (vertical focal length / horizontal: 1 for square
    pixels, ``camera_aspect`` * height / width for a camera of another aspect scaled to the image), ``fov_deg``,
    ``camera_height_m``, ``distortion_k`` (None when the lens is a pinhole); the road: ``curvature`` (1/m at the
    camera, negative bends left), ``curvature_change`` (1/m^2), ``yaw_deg``, ``lane_count`` (markings),
    ``driving_lanes``, ``ego_lane`` (0 = leftmost), ``lane_width_m``, ``cam_offset`` (metres right of the ego lane's
    centre), ``draw_distance_m``, ``short_road``, ``road``, ``surroundings``, ``look`` (flat colours, photographs),
    ``clutter`` (seams, crosswalk, painted signs, guard rails); ``markings`` left to right
    on the ground, each with ``colour`` ("white"/"yellow"), ``dashed``, ``double``, ``dots``, ``worn``, ``x_m``,
    ``width_m``, ``dash_m``/``gap_m``/``phase_m`` (dashed ones: paint where (z - phase) mod (dash + gap) < dash),
    ``merge`` (None, or how it leaves its place), ``z_start_m``/``z_end_m`` (where drawn), ``rgb`` (its colour in
    the image before texture and noise) and ``lane_index`` (its lane in ``lanes``, or None when not in the image);
    ``vehicles`` (``kind``, ``lane``, ``z_m``, ``x_m``, sizes, ``colour``, ``box`` in image pixels); ``shadows``
    (``kind``, ``strength``); ``lighting``; ``blur_radius``, ``noise_sigma``, ``jpeg_quality`` (None when not
    applied), ``vignette``, ``low_res`` (None when not applied).
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
