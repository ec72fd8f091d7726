"""A text recogniser's answers, as PaddleOCR's CTC post-processing gives them: the decoded text, not the scores.

``--metric text_lines:lines_agree`` judges a CTC recogniser (PP-OCR's rec nets: one output [batch, steps,
classes] of per-step class probabilities, class 0 the blank) by its greedy decode: per step the top class,
repeats collapsed, blanks dropped. The classes decoded are the dictionary's indices, so two outputs decode to the
same text exactly when their index sequences are equal; the dictionary (the ONNX's ``character`` metadata in the
rapidocr wheel) is needed only to show the text. The agreement is the share of lines decoded unchanged.

:func:`draw_line` makes realistic inputs: a line of words drawn in a TrueType font on paper-like ground, cut out,
resized to height 48 (width in proportion, at most 320) and normalised as rapidocr's ``resize_norm_img`` does.
"""

from __future__ import annotations

import numpy as np

HEIGHT, WIDTH = 48, 320
WORDS = ("total", "invoice", "date", "amount", "paid", "order", "street", "road", "city", "phone", "email", "name",
         "price", "tax", "qty", "item", "page", "from", "to", "ref", "code", "sale", "open", "closed", "exit",
         "main", "north", "south", "station", "hotel", "bank", "market", "coffee", "tea", "room", "floor")


def greedy(probabilities: np.ndarray) -> list[tuple[int, ...]]:
    """CTC greedy decode of [batch, steps, classes] → one index sequence per row (repeats collapsed, blank 0
    dropped)."""
    array = np.asarray(probabilities)
    array = array.reshape((-1,) + array.shape[-2:])
    best = np.nan_to_num(array.astype(np.float32), nan=-np.inf).argmax(axis=-1)
    decoded = []
    for row in best:
        keep = np.ones(row.shape, bool)
        keep[1:] = row[1:] != row[:-1]
        decoded.append(tuple(int(i) for i in row[keep & (row != 0)]))
    return decoded


def lines_agree(reference, candidate):
    """The share of lines whose decoded text is unchanged, over every sample (each row of each output)."""
    from orinkit.convert.fp16.task_metrics import MetricResult

    same = total = 0
    for ref, got in zip(reference, candidate):
        name = next(iter(ref))
        for a, b in zip(greedy(ref[name]), greedy(got[name])):
            total += 1
            same += a == b
    return MetricResult("text lines", same / total if total else 1.0, True, f"{same}/{total} lines unchanged")


def draw_line(seed: int, font_path: str | None = None) -> np.ndarray:
    """One drawn text line as rapidocr feeds its recogniser: [3, 48, 320] float32 in [-1, 1], padded right with
    zeros."""
    import random
    import string

    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    rng = random.Random(seed)
    size = rng.randint(22, 34)
    font = ImageFont.truetype(font_path, size) if font_path else ImageFont.load_default(size=size)
    words = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if kind < 0.55:
            word = rng.choice(WORDS)
            word = word.capitalize() if rng.random() < 0.4 else word.upper() if rng.random() < 0.15 else word
        elif kind < 0.8:
            number = rng.randint(0, 99999) if rng.random() < 0.6 else rng.randint(100, 99999) / 100
            word = str(number) if isinstance(number, int) else f"{number:.2f}"
        else:
            word = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(2, 6)))
        words.append(word)
    text = " ".join(words)
    paper = rng.randint(170, 255)
    ink = rng.randint(0, 90)
    tint = [paper - rng.randint(0, 25) for _ in range(3)]
    box = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), text, font=font)
    pad = rng.randint(2, 8)
    image = Image.new("RGB", (box[2] - box[0] + 2 * pad, box[3] - box[1] + 2 * pad), tuple(tint))
    colour = tuple(max(0, ink + rng.randint(-20, 20)) for _ in range(3))
    ImageDraw.Draw(image).text((pad - box[0], pad - box[1]), text, font=font, fill=colour)
    if rng.random() < 0.3:
        image = image.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 0.9)))
    width = min(WIDTH, max(8, int(np.ceil(image.width * HEIGHT / image.height))))
    pixels = np.asarray(image.resize((width, HEIGHT), Image.BILINEAR), np.float32)
    noise = np.random.default_rng(seed).normal(0, rng.uniform(0, 6), pixels.shape)
    pixels = np.clip(pixels + noise, 0, 255).transpose(2, 0, 1) / 255.0
    line = np.zeros((3, HEIGHT, WIDTH), np.float32)
    line[:, :, :width] = (pixels - 0.5) / 0.5
    return line


def font_file() -> str | None:
    """A TrueType font of this machine (DejaVu Sans when installed), else None (Pillow's built-in font)."""
    from pathlib import Path

    for candidate in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                      "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"):
        if Path(candidate).is_file():
            return candidate
    return None


def lines(seeds, font_path: str | None = None) -> np.ndarray:
    """[N, 1, 3, 48, 320]: one batch-1 sample per seed."""
    return np.stack([draw_line(s, font_path) for s in seeds])[:, None]
