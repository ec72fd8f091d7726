"""Drawn scenes with known objects: what a test needs when it must know every class and position exactly.

:func:`draw_scene` paints 1-12 discs, boxes and triangles (solid, outlined or bordered; 16-200 px; varied colours;
some cut by the image's edge, some partly covering others) over a background of gradients, low-frequency noise,
soft blobs, stray lines and crops of the two photographs scikit-learn ships (``china.jpg``, ``flower.jpg``; read
from the installed package, never downloaded). :func:`moving_scene` moves such objects over a still background
along straight and curved paths that cross, for trackers: ids are the objects' own.

Every scene is a pure function of its arguments (numpy's generator seeded by them, Pillow's aliased drawing), so a
seed names a scene. Truth boxes are the VISIBLE extent of each object (what is hidden under a later object or
outside the image is not in its box), as COCO annotates; an object keeps at least 60 % of its visible pixels under
later ones, and at least half of it lies inside the image. Without scikit-learn the photographs are replaced by more
gradients (other images for the same seed). The shipped detector ``weights/scenes_yolo.onnx`` was trained on these
scenes (``python -m orinkit.detect.train_scenes``).
"""

from __future__ import annotations

import functools
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError

CLASSES = ("disc", "box", "triangle")
STYLES = ("solid", "outline", "bordered")
SIZES = (16, 200)  # the longest side of an object's box, in pixels (its square root uniform: 30 % below 48 px)
MAX_OBJECTS = 12
_SALT = 0x5CE4E  # keeps these generators apart from any other seeded by the same integers
_PHOTOS = ("china.jpg", "flower.jpg")


@dataclass(eq=False)
class Scene:
    image: np.ndarray  # HxWx3 uint8 BGR
    truth: Detections  # visible boxes, score 1, names CLASSES
    background: np.ndarray | None  # the same image without its objects (same noise and blur)
    labels: np.ndarray  # HxW uint8: 0 background, k + 1 where object k (row k of truth) is visible


@dataclass(eq=False)
class MovingScene:
    frames: list[np.ndarray]  # HxWx3 uint8 BGR, one per frame
    truth: list[Detections]  # per frame; track_id = the object's id; objects mostly hidden or outside are left out
    times: np.ndarray  # seconds of each frame (frame / fps)
    centres: np.ndarray  # [objects, frames, 2] x, y of each object's shape centre (may lie outside the image)
    classes: np.ndarray  # [objects] class id of each object
    visible: np.ndarray  # [objects, frames] visible pixels / the object's whole area
    crossings: list[tuple[int, int, int]]  # (frame, id a, id b): frames where a path crosses another's


@dataclass(frozen=True)
class _Shape:
    kind: int  # class id
    size: float  # the longer side of its box as drawn (rotated)
    aspect: float  # width / height of the unrotated shape
    angle: float  # radians
    style: str
    colour: np.ndarray  # BGR float32 fill (or ring for "outline")
    edge: np.ndarray  # ring colour for "bordered"
    line: float  # ring width in pixels
    shade: np.ndarray  # fill gradient: (gx, gy) per pixel, added to every channel
    apex: float  # a triangle's top vertex along its base, 0..1


# ---------------------------------------------------------------- photographs

@functools.lru_cache(maxsize=1)
def _photo_folder() -> Path | None:
    # The files are found without importing scikit-learn (a second and a hundred megabytes per process).
    spec = importlib.util.find_spec("sklearn")
    folder = None if spec is None or spec.origin is None else Path(spec.origin).parent / "datasets" / "images"
    if folder is None or not all((folder / name).is_file() for name in _PHOTOS):
        return None
    return folder


@functools.lru_cache(maxsize=2)
def _photo(name: str) -> np.ndarray:
    with Image.open(_photo_folder() / name) as picture:
        return np.asarray(picture.convert("RGB"))[:, :, ::-1].copy()  # BGR


def photos_available() -> bool:
    return _photo_folder() is not None


# ---------------------------------------------------------------- background

def _resize(array: np.ndarray, width: int, height: int) -> np.ndarray:
    picture = Image.fromarray(np.ascontiguousarray(array))  # channel order is irrelevant to a resize
    return np.asarray(picture.resize((width, height), Image.Resampling.BILINEAR), np.float32)


def _smooth_noise(rng: np.random.Generator, width: int, height: int, cells: int, amplitude: float) -> np.ndarray:
    coarse = rng.normal(0, 1, (max(2, cells * height // width), cells, 3)).astype(np.float32)
    image = Image.fromarray(np.clip(128 + 40 * coarse, 0, 255).astype(np.uint8))
    smooth = np.asarray(image.resize((width, height), Image.Resampling.BICUBIC), np.float32)
    return (smooth - 128) * (amplitude / 40)


def _blob(rng: np.random.Generator, canvas: np.ndarray) -> None:
    """A soft irregular patch: its blurred edge tells it from the sharp-edged objects."""
    height, width = canvas.shape[:2]
    radius = rng.uniform(15, 0.35 * min(width, height) + 15)
    cx, cy = rng.uniform(0, width), rng.uniform(0, height)
    blur = rng.uniform(3, 0.4 * radius + 3)
    margin = int(radius * 1.4 + 3 * blur)
    x0, y0 = max(0, int(cx) - margin), max(0, int(cy) - margin)
    x1, y1 = min(width, int(cx) + margin), min(height, int(cy) + margin)
    if x1 - x0 < 8 or y1 - y0 < 8:
        return
    corners = int(rng.integers(5, 11))
    angles = np.sort(rng.uniform(0, 2 * np.pi, corners))
    radii = radius * rng.uniform(0.5, 1.3, corners)
    # drawn and blurred at a quarter of the size (the blur hides it), then enlarged
    points = [((cx - x0 + r * math.cos(a)) / 4, (cy - y0 + r * math.sin(a)) / 4) for a, r in zip(angles, radii)]
    mask = Image.new("L", ((x1 - x0 + 3) // 4, (y1 - y0 + 3) // 4), 0)
    ImageDraw.Draw(mask).polygon(points, fill=255)
    mask = mask.filter(ImageFilter.GaussianBlur(blur / 4)).resize((x1 - x0, y1 - y0), Image.Resampling.BILINEAR)
    alpha = np.asarray(mask, np.float32)[:, :, None] * np.float32(rng.uniform(0.25, 0.75) / 255)
    patch = canvas[y0:y1, x0:x1]
    patch += (rng.uniform(0, 255, 3).astype(np.float32) - patch) * alpha


def _lines(rng: np.random.Generator, canvas: np.ndarray) -> None:
    """Stray straight strokes (wires, seams): hard edges that are not objects."""
    height, width = canvas.shape[:2]
    picture = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(picture)
    colours = []
    for index in range(int(rng.integers(1, 4))):
        x, y = rng.uniform(0, width, 2), rng.uniform(0, height, 2)
        draw.line([(x[0], y[0]), (x[1], y[1])], fill=index + 1, width=int(rng.integers(1, 4)))
        colours.append(rng.uniform(0, 255, 3).astype(np.float32))
    labels = np.asarray(picture)
    for index, colour in enumerate(colours):
        canvas[labels == index + 1] = colour


def _background(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    kind = rng.choice(("gradient", "photo", "flat"), p=(0.35, 0.45, 0.2))
    if kind == "photo" and photos_available():
        photo = _photo(_PHOTOS[int(rng.integers(len(_PHOTOS)))])
        ph, pw = photo.shape[:2]
        # a crop of the photo's aspect ratio between a quarter and all of it, mirrored at random
        scale = rng.uniform(0.25, 1.0)
        aspect = width / height
        cw = int(min(pw, ph * aspect) * scale)
        ch = max(8, int(cw / aspect))
        x, y = int(rng.integers(0, pw - cw + 1)), int(rng.integers(0, ph - ch + 1))
        crop = photo[y:y + ch, x:x + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        canvas = _resize(crop, width, height) * rng.uniform(0.7, 1.3, 3).astype(np.float32)
    elif kind == "flat":
        canvas = np.broadcast_to(rng.uniform(0, 255, 3).astype(np.float32), (height, width, 3)).copy()
    else:
        first, second = rng.uniform(0, 255, (2, 3)).astype(np.float32)
        angle = rng.uniform(0, 2 * np.pi)
        ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
        t = xs * math.cos(angle) + ys * math.sin(angle)
        t = ((t - t.min()) / max(float(t.max() - t.min()), 1.0))[:, :, None]
        canvas = first + (second - first) * t
    canvas += _smooth_noise(rng, width, height, int(rng.integers(3, 24)), rng.uniform(0, 30))
    for _ in range(int(rng.integers(0, 9))):
        _blob(rng, canvas)
    if rng.random() < 0.5:
        _lines(rng, canvas)
    return canvas


# ---------------------------------------------------------------- objects

def _random_shape(rng: np.random.Generator, kind: int | None = None, sizes=SIZES) -> _Shape:
    kind = int(rng.integers(len(CLASSES))) if kind is None else kind
    size = float(rng.uniform(math.sqrt(sizes[0]), math.sqrt(sizes[1])) ** 2)
    aspect = float(np.exp(rng.uniform(math.log(0.8), math.log(1.25)))) if kind == 0 else \
        float(np.exp(rng.uniform(math.log(0.5), math.log(2.0))))
    style = STYLES[int(rng.choice(3, p=(0.55, 0.2, 0.25)))]
    if style == "outline" and size < 40:  # a 2-pixel ring under 40 px all but vanishes at a detector's 320 px
        style = "solid"
    line = float(rng.uniform(max(2.0, size * 0.06), max(3.0, size * 0.15)))
    return _Shape(kind=kind, size=size, aspect=aspect, angle=float(rng.uniform(-np.pi, np.pi)), style=style,
                  colour=np.zeros(3, np.float32), edge=rng.uniform(0, 255, 3).astype(np.float32), line=line,
                  shade=rng.normal(0, 0.25, 2).astype(np.float32), apex=float(rng.uniform(0.15, 0.85)))


def _outline(shape: _Shape, inset: float = 0.0) -> np.ndarray:
    """[K, 2] vertices around (0, 0) of the shape as drawn (its box's longer side ``shape.size`` whatever its
    rotation), moved ``inset`` pixels inwards."""
    outer = _unit_outline(shape)
    scale = shape.size / max(float(np.ptp(outer, axis=0).max()), 1e-6)
    return (_unit_outline(shape, inset / scale) if inset else outer) * scale


def _unit_outline(shape: _Shape, inset: float = 0.0) -> np.ndarray:
    """The shape rotated, its unrotated longer side 1, moved ``inset`` inwards."""
    w, h = (1.0, 1.0 / shape.aspect) if shape.aspect >= 1 else (shape.aspect, 1.0)
    if shape.kind < 2:  # a disc or a box: its half-axes, moved inwards
        a, b = w / 2 - inset, h / 2 - inset
        if a <= 0 or b <= 0:
            return np.zeros((0, 2))
        if shape.kind == 0:  # a polygon, so that it rotates with the disc's axes
            t = np.linspace(0, 2 * np.pi, max(16, min(96, int(shape.size))), endpoint=False)
            points = np.stack([a * np.cos(t), b * np.sin(t)], axis=1)
        else:
            points = np.array([[-a, -b], [a, -b], [a, b], [-a, b]])
    else:
        points = np.array([[-w / 2, h / 2], [w / 2, h / 2], [-w / 2 + shape.apex * w, -h / 2]])
        points -= points.mean(axis=0)
        if inset:  # scaled about the incentre, every side moves inwards by the same distance
            sides = np.linalg.norm(points[[1, 2, 0]] - points[[2, 0, 1]], axis=1)
            centre = (sides[:, None] * points).sum(axis=0) / sides.sum()
            area = abs(np.cross(points[1] - points[0], points[2] - points[0])) / 2
            inradius = 2 * area / sides.sum()
            if inradius <= inset:
                return np.zeros((0, 2))
            points = centre + (points - centre) * (1 - inset / inradius)
    rotation = np.array([[math.cos(shape.angle), -math.sin(shape.angle)],
                         [math.sin(shape.angle), math.cos(shape.angle)]])
    return points @ rotation.T


def _polygon_mask(points: np.ndarray, origin: tuple[int, int], size: tuple[int, int]) -> np.ndarray:
    picture = Image.new("1", size, 0)
    if len(points):
        ImageDraw.Draw(picture).polygon([(x - origin[0], y - origin[1]) for x, y in points], fill=1)
    return np.asarray(picture, bool)


@dataclass
class _Placed:
    shape: _Shape
    x0: int  # the patch's top-left corner in image pixels (may be negative)
    y0: int
    ring: np.ndarray  # bool patch: pixels of the outline ring (all of a solid shape)
    inner: np.ndarray  # bool patch: pixels inside the ring (empty for solid)
    area: int  # pixels of the whole object (ring + fill; ring only when outlined), inside the image or not


def _place(shape: _Shape, cx: float, cy: float) -> _Placed:
    outer = _outline(shape) + (cx, cy)
    x0, y0 = int(math.floor(outer[:, 0].min())), int(math.floor(outer[:, 1].min()))
    x1, y1 = int(math.ceil(outer[:, 0].max())) + 1, int(math.ceil(outer[:, 1].max())) + 1
    full = _polygon_mask(outer, (x0, y0), (x1 - x0, y1 - y0))
    if shape.style == "solid":
        ring, inner = full, np.zeros_like(full)
    else:
        inner = _polygon_mask(_outline(shape, shape.line) + (cx, cy), (x0, y0), (x1 - x0, y1 - y0)) & full
        ring = full & ~inner
        if shape.style == "outline":
            inner = np.zeros_like(full)
    return _Placed(shape, x0, y0, ring, inner, int(ring.sum() + inner.sum()))


def _window(placed: _Placed, width: int, height: int):
    """(image slice y, image slice x, patch slice y, patch slice x) of the patch's part inside the image."""
    h, w = placed.ring.shape
    ix0, iy0 = max(placed.x0, 0), max(placed.y0, 0)
    ix1, iy1 = min(placed.x0 + w, width), min(placed.y0 + h, height)
    if ix1 <= ix0 or iy1 <= iy0:
        return None
    return (slice(iy0, iy1), slice(ix0, ix1), slice(iy0 - placed.y0, iy1 - placed.y0),
            slice(ix0 - placed.x0, ix1 - placed.x0))


def _contrasting(rng: np.random.Generator, local: np.ndarray) -> np.ndarray:
    """A colour at least 90 levels (Euclidean, BGR) from the mean of what it is drawn over."""
    for _ in range(12):
        colour = rng.uniform(0, 255, 3).astype(np.float32)
        if np.linalg.norm(colour - local) >= 90:
            return colour
    return np.where(local < 128, 255.0, 0.0).astype(np.float32)


def _paint(canvas: np.ndarray, labels: np.ndarray | None, placed: _Placed, label: int) -> None:
    height, width = canvas.shape[:2]
    window = _window(placed, width, height)
    if window is None:
        return
    iy, ix, py, px = window
    shape = placed.shape
    ring, inner = placed.ring[py, px], placed.inner[py, px]
    region = canvas[iy, ix]
    ys, xs = np.mgrid[py, px].astype(np.float32)
    scale = 60.0 / max(shape.size, 1.0)  # a gentle gradient over the whole shape: lit from one side
    shading = ((xs - placed.ring.shape[1] / 2) * shape.shade[0] + (ys - placed.ring.shape[0] / 2) * shape.shade[1])
    shading = (shading * scale)[:, :, None]
    if shape.style == "bordered":
        region[ring] = shape.edge
        region[inner] = np.clip(shape.colour + shading[inner], 0, 255)
    else:
        region[ring] = np.clip(shape.colour + shading[ring], 0, 255)
    if labels is not None:
        labels[iy, ix][ring | inner] = label


def _visible_box(labels: np.ndarray, label: int, placed: _Placed | None = None) -> tuple[np.ndarray, int]:
    """The box [x1, y1, x2, y2) and count of ``label``'s pixels (searched in ``placed``'s window when given)."""
    x0 = y0 = 0
    if placed is not None:
        window = _window(placed, labels.shape[1], labels.shape[0])
        if window is None:
            return np.zeros(4, np.float32), 0
        labels = labels[window[0], window[1]]
        y0, x0 = window[0].start, window[1].start
    ys, xs = np.nonzero(labels == label)
    if not len(xs):
        return np.zeros(4, np.float32), 0
    return np.array([x0 + xs.min(), y0 + ys.min(), x0 + xs.max() + 1, y0 + ys.max() + 1], np.float32), len(xs)


def _box_iou(a: np.ndarray, b: np.ndarray) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(w, 0) * max(h, 0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


class _Layout:
    """The objects placed so far: their visible pixels (a label map), boxes and counts, and those at placement."""

    def __init__(self, width: int, height: int) -> None:
        self.labels = np.zeros((height, width), np.uint8)
        self.placed: list[_Placed] = []
        self.boxes: list[np.ndarray] = []
        self.counts: list[int] = []
        self.first_boxes: list[np.ndarray] = []
        self.first_counts: list[int] = []

    def hidden_by(self, placed: _Placed) -> tuple[np.ndarray, tuple] | None:
        """Pixels of each earlier object ``placed`` would cover and its window, or None if it would hide too much
        of one: every object keeps 60 % of the pixels it showed when placed and a box of IoU >= 0.8 with that."""
        height, width = self.labels.shape
        window = _window(placed, width, height)
        if window is None:
            return None
        iy, ix, py, px = window
        cover = placed.ring[py, px] | placed.inner[py, px]
        hidden = np.bincount(self.labels[iy, ix][cover], minlength=len(self.placed) + 1)[1:]
        if np.any(np.asarray(self.counts) - hidden < 0.6 * np.asarray(self.first_counts, float)):
            return None
        if np.any(hidden):
            trial = self.labels.copy()
            trial[iy, ix][cover] = 255
            for index in np.flatnonzero(hidden):
                if _box_iou(_visible_box(trial, index + 1, self.placed[index])[0], self.first_boxes[index]) < 0.8:
                    return None
        return hidden, window

    def add(self, placed: _Placed, hidden: np.ndarray) -> None:
        label = len(self.placed) + 1
        self.placed.append(placed)
        for index in np.flatnonzero(hidden):
            self.boxes[index], self.counts[index] = _visible_box(self.labels, index + 1, self.placed[index])
        box, count = _visible_box(self.labels, label, placed)
        self.boxes.append(box)
        self.counts.append(count)
        self.first_boxes.append(box)
        self.first_counts.append(count)


def _try_place(rng: np.random.Generator, canvas: np.ndarray, layout: _Layout, shape: _Shape) -> bool:
    """Paint ``shape`` where at least half of it is inside the image and every earlier object stays mostly
    visible; False when a few tries find no such place."""
    height, width = layout.labels.shape
    for _ in range(20):
        if rng.random() < 0.25:  # across an edge of the image
            side = int(rng.integers(4))
            along = rng.uniform(0, width if side < 2 else height)
            offset = rng.uniform(-0.35, 0.2) * shape.size
            cx, cy = ((along, offset), (along, height - offset), (offset, along), (width - offset, along))[side]
        else:
            cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        placed = _place(shape, cx, cy)
        found = layout.hidden_by(placed)
        if found is None:
            continue
        hidden, (iy, ix, py, px) = found
        cover = placed.ring[py, px] | placed.inner[py, px]
        inside = int(cover.sum())
        ys, xs = np.nonzero(cover)
        if inside < 0.5 * placed.area or inside < 40 or np.ptp(xs) < 9 or np.ptp(ys) < 9:
            continue
        colour = _contrasting(rng, canvas[iy, ix][cover].mean(axis=0))
        edge = shape.edge if shape.style != "bordered" or np.linalg.norm(shape.edge - colour) >= 60 \
            else (255 - colour).astype(np.float32)
        placed.shape = _Shape(**{**shape.__dict__, "colour": colour, "edge": edge})
        _paint(canvas, layout.labels, placed, len(layout.placed) + 1)
        layout.add(placed, hidden)
        return True
    return False


# ---------------------------------------------------------------- finishing

def _camera(rng: np.random.Generator) -> tuple[float, float]:
    """Sensor noise (a standard deviation in levels) and blur (a Gaussian radius in pixels, 0: none)."""
    sigma = rng.uniform(0, 6)
    return sigma, (rng.uniform(0.3, 1.0) if rng.random() < 0.3 else 0.0)


def _finish(rng: np.random.Generator, images: list[np.ndarray], camera: tuple[float, float]) -> list[np.ndarray]:
    """The same sensor noise and blur over each image (a scene and its background), then uint8 BGR."""
    height, width = images[0].shape[:2]
    sigma, blur = camera
    # uniform noise of that deviation: a third of the cost of normal draws over a whole frame
    noise = None
    if sigma > 0.5:
        noise = rng.random((height, width, 3), np.float32)
        noise -= np.float32(0.5)
        noise *= np.float32(sigma * math.sqrt(12))
    out = []
    for image in images:
        if noise is not None:
            image = image + noise
        pixels = np.clip(np.rint(image), 0, 255).astype(np.uint8)
        if blur:
            pixels = np.asarray(Image.fromarray(pixels).filter(ImageFilter.GaussianBlur(blur)))
        out.append(np.ascontiguousarray(pixels))
    return out


def _generators(seed: int, width: int, height: int, extra) -> list[np.random.Generator]:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DetectInputError(f"a scene seed must be a whole number >= 0, got {seed!r}", hint="e.g. seed=7")
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 32 <= value <= 8192:
            raise DetectInputError(f"the scene {name} must be a whole number of pixels in 32..8192, got {value!r}",
                                   hint="e.g. width=640, height=480")
    extra = [extra] if isinstance(extra, int) else [round(v * 1000) for v in extra]
    sequence = np.random.SeedSequence([_SALT, int(seed), int(width), int(height), *extra])
    return [np.random.default_rng(child) for child in sequence.spawn(3)]


def _check_sizes(sizes, width: int, height: int) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in sizes)
    except (TypeError, ValueError):
        low = high = math.nan
    if not 8 <= low <= high <= max(width, height):
        raise DetectInputError(f"sizes must be (smallest, largest) pixels with 8 <= smallest <= largest <= the image's "
                               f"longer side, got {sizes!r}", hint="e.g. sizes=(16, 200)")
    return low, high


def _object_count(rng: np.random.Generator, objects: int | None, low: int = 1) -> int:
    if objects is None:
        return int(rng.integers(low, MAX_OBJECTS + 1))
    if isinstance(objects, bool) or not isinstance(objects, (int, np.integer)) or not 0 <= objects <= 50:
        raise DetectInputError(f"objects must be a whole number in 0..50 (or None: 1-12 at random), got {objects!r}",
                               hint="e.g. objects=5")
    return int(objects)


def draw_scene(seed: int, width: int = 640, height: int = 480, *, objects: int | None = None,
               sizes: tuple[float, float] = SIZES, background: bool = True) -> Scene:
    """A drawn scene: ``objects`` discs, boxes and triangles (None: 1-12 at random) over a busy background, each
    ``sizes`` pixels (its box's longer side; the square root uniform between). Fewer may be drawn where no place
    leaves every object mostly visible (rare below 12). ``background=False`` leaves ``Scene.background`` None (a
    third faster; the image is the same)."""
    sizes = _check_sizes(sizes, width, height)
    background_rng, object_rng, finish_rng = _generators(seed, width, height, 0 if sizes == SIZES else sizes)
    count = _object_count(object_rng, objects)
    plain = _background(background_rng, width, height)
    canvas = plain.copy()
    layout = _Layout(width, height)
    for _ in range(count):
        _try_place(object_rng, canvas, layout, _random_shape(object_rng, sizes=sizes))
    image, *plain = _finish(finish_rng, [canvas, plain] if background else [canvas], _camera(finish_rng))
    truth = Detections(np.asarray(layout.boxes, np.float32).reshape(-1, 4), np.ones(len(layout.placed), np.float32),
                       np.array([p.shape.kind for p in layout.placed], np.int32), CLASSES)
    return Scene(image=image, truth=truth, background=plain[0] if plain else None, labels=layout.labels)


# ---------------------------------------------------------------- moving objects

def moving_scene(seed: int, frames: int = 60, width: int = 640, height: int = 480, *, objects: int | None = None,
                 fps: float = 30.0) -> MovingScene:
    """``objects`` (None: 2-6) discs, boxes and triangles (28-110 px) moving over a still background, each along a
    straight or curved path; every object after the first meets an earlier one (the same place at the same frame,
    the later drawn over it) somewhere in the middle half of the clip, so paths cross at least ``objects - 1``
    times. Objects enter and leave the view; a frame's truth holds the objects showing at least 30 % of
    themselves, with ``track_id`` = the object's index."""
    from orinkit.detect.scene_motion import draw_moving  # its own module for size; it draws with this one's painter

    return draw_moving(seed, frames, width, height, objects, fps)
