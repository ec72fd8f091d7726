"""Procedural road images with exact lane ground truth, drawn with numpy and Pillow (nothing is downloaded).

A road is a flat ground plane seen by a pinhole camera at height ``h`` whose pitch puts the horizon at image row
``horizon``. A ground point ``(X lateral, Z forward)`` relative to the camera projects to::

    u = cx + f * X / Z        v = horizon + f * h / Z

and a lane marking follows ``X(Z) = X0 + yaw * Z + curvature * Z**2 / 2`` (plus ``curvature_change * Z**3 / 6``
on an S-bend). Camera roll turns ``(u, v)`` about the image centre. Everything, ground truth included, is computed
in the unrolled frame and turned into the image before it is drawn, so the image needs no resampling (Pillow's
bilinear rotation alone would cost a third of an image's time budget and blur it) and every corner is filled.

Each lane marking is one lane, annotated the way CULane does it: the line the marking follows (the line between
the two of a double line), sampled on the LaneATT rows ``lane_rows(height)`` (bottom row first) and continued
through dash gaps and occluding vehicles. Markings are rasterised exactly (:mod:`~orinkit.lanes.synth_paint`), so
the painted centre is the ground truth to a small fraction of a pixel.

``render_road(seed, ...)`` is a pure function of its arguments. Each aspect of a scene (geometry, markings,
appearance, scenery, vehicles, shadows, lighting, sensor, and the wide data's shape, look, clutter and optics)
draws from its own generator spawned from ``seed``, so switching an effect off (``SynthOptions.clean()``) leaves
every other aspect, in particular the road itself, unchanged.

Two distributions: ``SynthOptions()`` is the first renderer's (the data of the first shipped models, and of the
held-out and stress sets); :data:`WIDE_STYLE` is the wide one (domain randomisation: other cameras, roads,
surroundings, clutter and lenses), what new training runs draw (``orinkit.lanes.augment.training_road``).

The modules: :mod:`~orinkit.lanes.synth_options` (options, the sample, argument checks),
:mod:`~orinkit.lanes.synth_camera`, :mod:`~orinkit.lanes.synth_paint`, :mod:`~orinkit.lanes.synth_render` (the
renderer), :mod:`~orinkit.lanes.synth_scenery`, and for the wide data :mod:`~orinkit.lanes.synth_wide`,
:mod:`~orinkit.lanes.synth_clutter`, :mod:`~orinkit.lanes.synth_photo` and :mod:`~orinkit.lanes.synth_optics`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from orinkit.lanes.errors import LaneError
from orinkit.lanes.synth_options import (
    _MAX_SEED,
    SURROUNDINGS,
    RoadSample,
    SynthOptions,
    _check_size,
    _whole,
    lane_rows,
)
from orinkit.lanes.synth_render import _STREAMS, _Renderer

__all__ = ["FIRST_STYLE", "RoadSample", "SynthOptions", "SURROUNDINGS", "WIDE_STYLE", "lane_rows", "render_road",
           "road_stream"]
# Names other modules of the package reach for (road_video subclasses the renderer).
_INTERNALS = (_MAX_SEED, _STREAMS, _Renderer, _check_size, _whole)

# The first renderer's roads (SynthOptions' defaults).
FIRST_STYLE = SynthOptions()
# The wide data: every range of the first renderer opened up, and everything it never drew switched on.
WIDE_STYLE = SynthOptions(
    curve=0.75, roll=0.85, shadows=0.55, vehicles=0.6, worn=0.35, noise=0.85, blur=0.35, jpeg=0.5, lighting=1.0,
    short_road=0.12, scenery=0.8, road_wear=0.55, kerb=0.45, yellow=0.25, dashed=0.65,
    s_curve=0.3, merge=0.15, double=0.12, dots=0.1, flat=0.25, photo=0.4, guard_rail=0.3, crosswalk=0.12,
    road_signs=0.3, seams=0.5, vignette=0.35, distortion=0.3, low_res=0.2,
    min_markings=2, max_markings=6, max_vehicles=5,
    lane_width_m=(2.5, 4.3), camera_height_m=(0.9, 3.2), horizon=(0.05, 0.55), fov_deg=(35.0, 110.0),
    roll_max_deg=6.0, yaw_max_deg=4.0, cam_offset_m=1.3, curvature=(0.0005, 0.014), draw_distance_m=(35.0, 200.0),
    short_road_m=(20.0, 60.0), marking_width_m=(0.08, 0.35), dash_m=(0.8, 6.0), gap_m=(0.8, 12.0),
    noise_sigma=(1.5, 14.0), blur_radius=(0.4, 2.4), jpeg_quality=(15, 95), brightness=(0.45, 1.6),
    contrast=(0.6, 1.4), gamma=(0.6, 1.6), temperature=(-0.2, 0.2), shoulder_m=(0.2, 4.5),
    asphalt_grey=(18.0, 150.0), shadow_strength=(0.3, 0.85),
    camera_aspects=(4 / 3, 1.5, 1.6, 16 / 9, 16 / 9, 2.0, 2.2, 2.4, 1640 / 590, 1640 / 590, 3.2),
    surroundings=SURROUNDINGS,
)


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


def render_road(seed: int, width: int = 1280, height: int = 720, *, options: SynthOptions = FIRST_STYLE,
                n_rows: int = 72) -> RoadSample:
    """Draw the road of ``seed``: the same arguments give byte-identical images and the same lanes."""
    seed = _whole(seed, "seed", 0, _MAX_SEED, "give a non-negative integer")
    width, height = _check_size(width, height)
    n_rows = _whole(n_rows, "n_rows", 2, 100_000, "LaneATT uses 72")
    if not isinstance(options, SynthOptions):
        raise LaneError(f"options is a {type(options).__name__}, not SynthOptions",
                        hint="pass SynthOptions(...), SynthOptions.clean() or WIDE_STYLE")
    rngs = {name: np.random.default_rng(child)
            for name, child in zip(_STREAMS, np.random.SeedSequence(seed).spawn(len(_STREAMS)))}
    return _Renderer(seed, width, height, options, n_rows, rngs).render()
