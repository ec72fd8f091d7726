"""The moving objects of :func:`orinkit.detect.scenes.moving_scene`: paths that cross, drawn frame by frame.

Kept apart from the still scenes' module for its size; it draws with that module's painter, so a moving object
looks like a still one (the shipped detector finds both).
"""

from __future__ import annotations

import math

import numpy as np

from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError
from orinkit.detect.scenes import (
    CLASSES,
    MovingScene,
    _background,
    _camera,
    _contrasting,
    _finish,
    _generators,
    _object_count,
    _paint,
    _place,
    _random_shape,
    _Shape,
    _visible_box,
)


def _path(rng: np.random.Generator, through: np.ndarray, at: float, frames: int, width: int, heading: float | None):
    """[frames, 2] centres of a path that is at ``through`` at frame ``at``: straight, or bent (a parabola),
    crossing 0.3-0.8 widths of the view over the clip."""
    heading = rng.uniform(-np.pi, np.pi) if heading is None else heading
    speed = rng.uniform(0.3, 0.8) * width / max(frames - 1, 1)
    direction = np.array([math.cos(heading), math.sin(heading)])
    across = np.array([-direction[1], direction[0]])
    t = np.arange(frames, dtype=np.float64) - at
    bend = rng.uniform(-1, 1) * 0.25 * width / max(frames / 2, 1) ** 2 if rng.random() < 0.5 else 0.0
    return through + np.outer(speed * t, direction) + np.outer(bend * t * t, across)


def _meetings(centres: np.ndarray, sizes: np.ndarray, width: int, height: int) -> list[tuple[int, int, int]]:
    """(frame, a, b) at each closest approach, inside the image, of two objects near enough to overlap."""
    found = []
    inside = (centres[..., 0] >= 0) & (centres[..., 0] < width) & (centres[..., 1] >= 0) & (centres[..., 1] < height)
    for a in range(len(centres)):
        for b in range(a + 1, len(centres)):
            distance = np.linalg.norm(centres[a] - centres[b], axis=1)
            close = (distance < (sizes[a] + sizes[b]) / 4) & inside[a] & inside[b]
            edges = np.flatnonzero(np.diff(np.concatenate([[0], close.astype(np.int8), [0]])))
            for first, last in zip(edges[::2], edges[1::2]):
                found.append((int(first + np.argmin(distance[first:last])), a, b))
    return sorted(found)


def draw_moving(seed: int, frames: int, width: int, height: int, objects: int | None, fps: float) -> MovingScene:
    """See :func:`orinkit.detect.scenes.moving_scene`."""
    if isinstance(frames, bool) or not isinstance(frames, (int, np.integer)) or not 2 <= frames <= 10000:
        raise DetectInputError(f"frames must be a whole number in 2..10000, got {frames!r}", hint="e.g. frames=60")
    if not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise DetectInputError(f"fps must be a positive number, got {fps!r}", hint="e.g. fps=30")
    background_rng, object_rng, finish_rng = _generators(seed, width, height, 1 + int(frames))
    count = int(object_rng.integers(2, 7)) if objects is None else _object_count(object_rng, objects)
    if count < 2:
        raise DetectInputError(f"a moving scene needs at least 2 objects to cross, got {count}",
                               hint="objects=2 or more")
    background = _background(background_rng, width, height)
    centre = np.array([width, height], np.float64) / 2
    shapes, paths, spins = [], [], []
    for index in range(count):
        shape = _random_shape(object_rng, sizes=(28, 110))
        if index == 0:
            path = _path(object_rng, centre + object_rng.uniform(-0.15, 0.15, 2) * (width, height),
                         (frames - 1) / 2, frames, width, None)
        else:
            for _ in range(20):  # meet an earlier object where it is well inside the view
                partner = int(object_rng.integers(index))
                at = int(object_rng.uniform(0.25, 0.75) * (frames - 1))
                point = paths[partner][at]
                if 0.15 * width < point[0] < 0.85 * width and 0.15 * height < point[1] < 0.85 * height:
                    break
            step = paths[partner][min(at + 1, frames - 1)] - paths[partner][max(at - 1, 0)]
            heading = math.atan2(step[1], step[0]) + object_rng.choice([-1, 1]) * object_rng.uniform(np.pi / 4, np.pi)
            path = _path(object_rng, point, at, frames, width, heading)
        local = background[np.clip(path[:, 1].astype(int), 0, height - 1),
                           np.clip(path[:, 0].astype(int), 0, width - 1)]
        colour = _contrasting(object_rng, local.mean(axis=0))
        edge = shape.edge if np.linalg.norm(shape.edge - colour) >= 60 else (255 - colour).astype(np.float32)
        shapes.append(_Shape(**{**shape.__dict__, "colour": colour, "edge": edge}))
        paths.append(path)
        spins.append(0.0 if shape.kind == 0 else float(object_rng.uniform(-0.03, 0.03)))
    camera = _camera(finish_rng)
    images, truths, visible = [], [], np.zeros((count, frames), np.float32)
    for frame in range(frames):
        canvas = background.copy()
        labels = np.zeros((height, width), np.uint8)
        placed = []
        for index, (shape, path) in enumerate(zip(shapes, paths)):
            turned = _Shape(**{**shape.__dict__, "angle": shape.angle + spins[index] * frame})
            placed.append(_place(turned, float(path[frame, 0]), float(path[frame, 1])))
            _paint(canvas, labels, placed[-1], index + 1)
        boxes, ids = [], []
        for index, item in enumerate(placed):
            box, shown = _visible_box(labels, index + 1, item)
            visible[index, frame] = shown / max(item.area, 1)
            if visible[index, frame] >= 0.3 and min(box[2] - box[0], box[3] - box[1]) >= 6:
                boxes.append(box)
                ids.append(index)
        images.extend(_finish(finish_rng, [canvas], camera))
        truths.append(Detections(np.asarray(boxes, np.float32).reshape(-1, 4), np.ones(len(ids), np.float32),
                                 np.array([shapes[i].kind for i in ids], np.int32), CLASSES,
                                 np.array(ids, np.int64)))
    centres = np.stack(paths).astype(np.float32)
    sizes = np.array([s.size for s in shapes])
    return MovingScene(frames=images, truth=truths, times=np.arange(frames) / float(fps), centres=centres,
                       classes=np.array([s.kind for s in shapes], np.int32), visible=visible,
                       crossings=_meetings(centres, sizes, width, height))
