"""Detections drawn on a BGR frame: a box, a "name 0.87" label (and "#id" once tracked), one colour per class, or
per track id when tracked, so that two objects of one class stay apart on screen.

Boxes are numpy slices of one copy of the frame; only the labels are Pillow's (text on a small patch, cached,
pasted in): converting a whole 1280x720 frame into Pillow and back costs more than drawing twenty boxes. Lines and
labels grow with the frame (2 px and 11 px text at 640x360, 3 px and 16 px at 1280x720); labels are kept inside
the frame: above the box where there is room, else inside its top edge, moved left where they would leave the
frame on the right.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError

# Ultralytics' palette: 20 colours that stay apart on busy scenes (RGB).
PALETTE = ((255, 56, 56), (255, 157, 151), (255, 112, 31), (255, 178, 29), (207, 210, 49), (72, 249, 10),
           (146, 204, 23), (61, 219, 134), (26, 147, 52), (0, 212, 187), (44, 153, 168), (0, 194, 255),
           (52, 69, 147), (100, 115, 255), (0, 24, 236), (132, 56, 255), (82, 0, 133), (203, 56, 255),
           (255, 149, 200), (255, 55, 199))


def colour_of(key: int) -> tuple[int, int, int]:
    """The RGB colour of a class id or track id (a track's id walks the palette with a stride, so neighbours in
    id order, which are often neighbours on screen, get colours far apart)."""
    return PALETTE[(int(key) * 7) % len(PALETTE)]


def line_width(width: int, height: int) -> int:
    """Box lines in pixels for a frame: 2 up to 640x360, then growing with the shorter side."""
    return max(2, round(min(width, height) / 240))


@functools.lru_cache(maxsize=8)
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)  # Pillow >= 10.1 with FreeType: a scalable font
    except (TypeError, OSError, ImportError):  # older Pillow or no FreeType: the small bitmap font
        return ImageFont.load_default()


def labels_of(detections: Detections) -> list[str]:
    """Each box's label: ``"name 0.87"``, with ``" #12"`` when the box has a track id."""
    names = detections.class_name
    tracks = detections.track_id.tolist() if detections.track_id is not None else [-1] * len(detections)
    return [f"{name} {score:.2f}" + (f" #{track}" if track >= 0 else "")
            for name, score, track in zip(names, detections.score.tolist(), tracks)]


def _ink(colour: Sequence[int]) -> tuple[int, int, int]:
    """Black or white text, whichever reads on ``colour``."""
    red, green, blue = colour
    return (0, 0, 0) if 0.299 * red + 0.587 * green + 0.114 * blue > 140 else (255, 255, 255)


def draw_detections(image: np.ndarray, detections: Detections, *, scale: tuple[float, float] = (1.0, 1.0),
                    width: int | None = None, labels: bool = True) -> np.ndarray:
    """A BGR uint8 copy of ``image`` with ``detections`` drawn (``image`` is left as it was). ``scale`` maps the
    boxes' pixels to the image's (image size / the size the boxes were found at); ``width`` overrides the line
    width. Colours: per track id where a box has one, else per class."""
    out = np.array(image, dtype=np.uint8, copy=True, order="C")
    if out.ndim != 3 or out.shape[2] != 3:
        raise DetectInputError(f"detections are drawn on an HxWx3 BGR frame, got shape {out.shape}",
                               hint="pass the frame as decoded (BGR uint8)")
    if not len(detections):
        return out
    height, frame_width = out.shape[:2]
    line = width or line_width(frame_width, height)
    boxes = np.asarray(detections.xyxy, np.float64) * np.array([scale[0], scale[1], scale[0], scale[1]])
    boxes = np.clip(np.round(boxes), 0, [frame_width, height, frame_width, height]).astype(int)
    tracks = detections.track_id if detections.track_id is not None else np.full(len(detections), -1)
    texts = labels_of(detections) if labels else [""] * len(detections)
    font_size = max(10, round(line * 5.5))
    # Boxes first, labels over them: a label is never cut by a neighbour's line.
    colours = [colour_of(track) if track >= 0 else colour_of(class_id)
               for class_id, track in zip(detections.class_id.tolist(), tracks.tolist())]
    for (x1, y1, x2, y2), colour in zip(boxes.tolist(), colours):
        _rectangle(out, x1, y1, x2, y2, colour[::-1], line)
    for (x1, y1, _, _), colour, text in zip(boxes.tolist(), colours, texts):
        if text:
            _label(out, font_size, text, colour, (x1, y1), line)
    return out


def _rectangle(out: np.ndarray, x1: int, y1: int, x2: int, y2: int, bgr, line: int) -> None:
    """The box's outline, ``line`` pixels wide, inside the box (a box at the frame's edge keeps all four sides)."""
    x2, y2 = max(x2, x1 + 1), max(y2, y1 + 1)
    out[y1:min(y1 + line, y2), x1:x2] = bgr
    out[max(y2 - line, y1):y2, x1:x2] = bgr
    out[y1:y2, x1:min(x1 + line, x2)] = bgr
    out[y1:y2, max(x2 - line, x1):x2] = bgr


@functools.lru_cache(maxsize=2048)
def _glyph(char: str, colour: tuple[int, int, int], font_size: int) -> np.ndarray:
    """One character on the box's colour, as a BGR patch of the font's full line height. Labels are built from
    these: FreeType costs about a millisecond a label here, and a score changes every frame, so whole labels would
    rarely come from a cache; characters always do."""
    from PIL import Image, ImageDraw

    font = _font(font_size)
    _, top, _, bottom = font.getbbox("Ag#0")
    advance = max(1, round(font.getlength(char)))
    patch = Image.new("RGB", (advance, bottom - top), colour)
    ImageDraw.Draw(patch).text((0, -top), char, fill=_ink(colour), font=font)
    return np.asarray(patch)[:, :, ::-1]


def _label_pixels(text: str, colour: tuple[int, int, int], font_size: int, pad: int) -> np.ndarray:
    glyphs = [_glyph(char, colour, font_size) for char in text]
    body = np.concatenate(glyphs, axis=1)
    patch = np.empty((body.shape[0] + 2 * pad, body.shape[1] + 2 * pad, 3), np.uint8)
    patch[:] = colour[::-1]
    patch[pad:pad + body.shape[0], pad:pad + body.shape[1]] = body
    return patch


def _label(out: np.ndarray, font_size: int, text: str, colour, corner: tuple[int, int], line: int) -> None:
    height, width = out.shape[:2]
    patch = _label_pixels(text, tuple(colour), font_size, max(1, line // 2))
    patch = patch[:height, :width]
    label_height, label_width = patch.shape[:2]
    x, y = corner
    y = y - label_height if y - label_height >= 0 else y  # above the box, else just inside its top edge
    x = max(0, min(x, width - label_width))
    y = max(0, min(y, height - label_height))
    out[y:y + label_height, x:x + label_width] = patch
