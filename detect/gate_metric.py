"""What edge-convert's accuracy gates use to judge a detector: its boxes against FP32's, on real pictures.

The range criterion weighs an output's largest error against its largest value; in a YOLO head the pixel
coordinates (0..640) set that scale and the class scores (0..1) vanish in it: copies of the FP32 output with every
score zeroed, with the scores moved to the wrong class, or with 0.2 added to each, all passed it. Here both sides
are decoded into boxes by orinkit.detect's own post-processing (class-aware NMS at IoU 0.7, as Ultralytics
predicts) and FP16's (or INT8's) boxes are matched to FP32's per class at IoU >= 0.5:

* agreement = F1 of the matches, over every sample: 2·TP / (2·TP + FP + FN).
* A box that sits within :data:`SCORE_TOLERANCE` of the score threshold may fall on either side of it without
  counting against the candidate: an FP32 box is found when the candidate has it at ``conf - tolerance`` or more,
  and a candidate box is extra only when FP32 does not have it at ``conf - tolerance``. Scores that move by more
  than that (INT8's typical loss of ~0.1) count.
* mAP50-95 of the candidate's boxes (decoded at conf 0.001, as validation does) against FP32's as the truth must
  reach :data:`MIN_MAP` too: F1 matches at IoU 0.5 only, so an INT8 box-regression branch that moves every box by
  a few pixels keeps F1 at 0.98 and loses mAP50-95 (0.91-0.95 on a YOLOv8n and a YOLOX measured), which needs
  IoU up to 0.95. A candidate under the bound fails whatever its F1 (FP16 keeps 1.000).
* FP32 finding no box on the samples is an error (:class:`NoBoxesError`; edge-convert's NothingToJudgeError,
  exit 4): such samples cannot tell a broken graph from a good one.

Samples: pictures letterboxed as the model's family was trained (:func:`orinkit.detect.preprocess.preprocess_for`:
Ultralytics centred, pad 114, RGB, /255; YOLOX top-left, BGR, raw 0..255), from a folder the user gives, else the
two photos scikit-learn ships (china.jpg, flower.jpg) and crops of them.

This module imports nothing of orinkit.convert (convert reaches it by name: :mod:`orinkit.convert.detection`,
which turns its answers and errors into the gate's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectError, DetectInputError
from orinkit.detect.heads import Head, recognize
from orinkit.detect.preprocess import Preprocess, prepare, preprocess_for

CONF = 0.25  # Ultralytics' predict default: the boxes a user sees
SCORE_TOLERANCE = 0.05
MAP_CONF = 0.001  # Ultralytics' validation threshold, for mAP
MATCH_IOU = 0.5
# The detectors issue's goal: mAP50-95 against FP32 within 0.01 of FP16's, which is 1.000 on every model measured.
MIN_MAP = 0.99
Outputs = Sequence[Mapping[str, np.ndarray]]  # one dict per sample: output name → array
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


class NoBoxesError(DetectError):
    """The FP32 model finds no box on the gate's samples: nothing to judge a candidate by."""


class PicturesError(DetectInputError):
    """The pictures for the gate's samples are missing, unreadable or too few."""


@dataclass(frozen=True)
class BoxAgreement:
    agreement: float  # F1 of the candidate's boxes matched to FP32's
    detail: str
    found: int  # FP32 boxes the candidate has
    boxes: int  # FP32 boxes
    extra: int  # candidate boxes FP32 does not have
    map50_95: float
    map_met: bool = True  # mAP50-95 against FP32 reaches the metric's bound


def _head(model) -> Head:
    return model if isinstance(model, Head) else recognize(str(model) if isinstance(model, Path) else model)


def detections(head: Head, outputs: Outputs, conf: float) -> list[Detections]:
    """Every batch item of every sample decoded and NMS'd, in model-input pixels, clipped to the input as
    Ultralytics' predict clips them; boxes that are not finite (a width's exp() overflowing) or empty once clipped
    are no boxes."""
    from orinkit.detect.postprocess import NmsOptions, postprocess

    options = NmsOptions(conf=conf)
    height, width = head.input_size
    limits = np.array([width, height, width, height], np.float32)
    found: list[Detections] = []
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing exp() gives inf boxes, dropped below
        for sample in outputs:
            arrays = {name: np.asarray(sample[name]) for name in head.outputs}
            for batch_item in postprocess(head, arrays, None, options):
                finite = batch_item[np.isfinite(batch_item.xyxy).all(axis=1)]
                finite.xyxy = np.clip(finite.xyxy, 0, limits)  # as predict clips to the image
                size = finite.xyxy[:, 2:] - finite.xyxy[:, :2]
                found.append(finite[(size > 0).all(axis=1)])
    return found


def box_metric(model, *, conf: float | None = None, tolerance: float = SCORE_TOLERANCE, min_map: float = MIN_MAP
               ) -> Callable[[Outputs, Outputs], object]:
    """The ``boxes`` metric for ``model`` (a path, an onnx.ModelProto or a :class:`Head`); its answer's
    ``map_met`` says whether mAP50-95 against FP32 reaches ``min_map``."""
    head = _head(model)
    threshold = CONF if conf is None else conf
    lower = max(threshold - tolerance, MAP_CONF)

    def agreement(reference: Outputs, candidate: Outputs) -> BoxAgreement:
        from orinkit.detect.metrics import map50_95, match

        truth = detections(head, reference, threshold)
        total = sum(len(d) for d in truth)
        if total == 0:
            raise NoBoxesError(
                f"the FP32 model finds no box (score >= {threshold:g}) on any of the gate's {len(reference)} "
                "samples: they cannot tell a broken graph from a good one",
                hint="give pictures where the model finds its objects: --data DIR (or an .npz of prepared "
                     "inputs), and --calib DIR for --int8")
        found = detections(head, candidate, threshold)
        truth_low, found_low = detections(head, reference, lower), detections(head, candidate, lower)
        tp = fn = fp = 0
        for ref, cand_low in zip(truth, found_low):
            hit, _, miss = match(ref, cand_low, MATCH_IOU)
            tp, fn = tp + hit, fn + miss
        for ref_low, cand in zip(truth_low, found):
            _, extra, _ = match(ref_low, cand, MATCH_IOU)
            fp += extra
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0
        mean_ap = map50_95(truth, detections(head, candidate, MAP_CONF))
        met = mean_ap >= min_map
        detail = (f"{tp} of {total} FP32 boxes found, {fp} extra; per class at IoU >= {MATCH_IOU:g}, score "
                  f">= {threshold:g} (±{tolerance:g}); mAP50-95 vs FP32 {mean_ap:.3f}"
                  f"{'' if met else f' < {min_map:g}: the boxes moved'}; {len(truth)} images")
        return BoxAgreement(f1, detail, tp, total, fp, mean_ap, met)

    return agreement


# -- samples --------------------------------------------------------------------------------------------------


def _crops(image: np.ndarray) -> list[np.ndarray]:
    """The picture, then its centre and its four corners at 60 % of each side: other scales of the same objects."""
    height, width = image.shape[:2]
    h, w = max(1, int(height * 0.6)), max(1, int(width * 0.6))
    corners = [((height - h) // 2, (width - w) // 2), (0, 0), (0, width - w), (height - h, 0), (height - h, width - w)]
    return [image] + [np.ascontiguousarray(image[y:y + h, x:x + w]) for y, x in corners]


def bundled_pictures() -> tuple[list[np.ndarray], str]:
    """scikit-learn's two photos (BGR) and what they are; PicturesError when scikit-learn is not installed."""
    try:
        from sklearn.datasets import load_sample_images
    except ImportError:
        raise PicturesError(
            "a detector is judged on real pictures, and none were given (scikit-learn, whose two photos serve "
            "otherwise, is not installed)", hint="give a folder of pictures where the model finds its objects: "
                                                 "--data DIR") from None
    images = [np.ascontiguousarray(image[:, :, ::-1]) for image in load_sample_images().images]
    return images, "scikit-learn's photos china.jpg and flower.jpg"


def folder_pictures(folder: Path) -> list[np.ndarray]:
    from orinkit.detect.images import load_image

    files = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise PicturesError(f"--data {folder} holds no pictures ({', '.join(IMAGE_SUFFIXES[:4])}, ...)",
                              hint="put pictures where the model finds its objects there, or give an .npz")
    pictures = []
    for file in files:
        try:
            pictures.append(load_image(file))
        except Exception as exc:  # noqa: BLE001 - any unreadable picture is named with the reason
            raise PicturesError(f"--data picture {file} cannot be read ({exc})",
                                  hint="remove it or replace it with a valid picture") from exc
    return pictures


def _spec(head: Head, shape: Sequence[int]) -> Preprocess:
    base = preprocess_for(head)
    return Preprocess((int(shape[2]), int(shape[3])), mode=base.mode, centre=base.centre, pad=base.pad,
                      channels=base.channels, scale=base.scale)


def describe_spec(spec: Preprocess) -> str:
    how = (f"letterboxed to {spec.size[1]}x{spec.size[0]} ({'centred' if spec.centre else 'top-left'}, pad "
           f"{spec.pad})" if spec.mode == "letterbox" else f"stretched to {spec.size[1]}x{spec.size[0]}")
    scale = "0..1 (/255)" if abs(spec.scale - 1 / 255) < 1e-9 else "raw 0..255" if spec.scale == 1.0 else \
        f"x{spec.scale:g}"
    return f"{how}, {spec.channels.upper()}, scaled to {scale}"


def detector_samples(head: Head, inputs: Mapping[str, tuple[np.dtype, tuple[int, ...]]], count: int | None,
                     folder: Path | None = None) -> tuple[list[dict], str]:
    """The gate's samples for ``head``: the pictures of ``folder`` (all of them), else ``count`` views of the
    bundled photos, prepared as the family was trained; (samples, one line saying what they are)."""
    if head.input_name not in inputs or len(inputs) != 1:
        raise PicturesError(f"the detector's samples fill its image input {head.input_name} only, but the model "
                              f"takes {', '.join(inputs)}", hint="give --data FILE.npz with one array per input")
    dtype, shape = inputs[head.input_name]
    spec = _spec(head, shape)
    if folder is not None:
        pictures, what = folder_pictures(folder), f"the {{n}} pictures of {folder}"
    else:
        photos, named = bundled_pictures()
        views = [view for photo in photos for view in _crops(photo)]
        order = [views[i * 6 + j] for j in range(6) for i in range(len(photos))]  # whole photos first
        pictures = order[:count] if count else order
        what = f"{{n}} views of {named} (whole and cropped)"
    batch = int(shape[0]) if shape[0] > 0 else 1
    samples = []
    for start in range(0, len(pictures) - batch + 1, batch):
        arrays = [prepare(picture, spec)[0] for picture in pictures[start:start + batch]]
        samples.append({head.input_name: np.stack(arrays).astype(dtype, copy=False)})
    if not samples:
        raise PicturesError(f"{len(pictures)} pictures do not fill one batch of {batch}",
                              hint=f"give at least {batch} pictures")
    note = (f"the gate's samples are {what.format(n=len(samples) * batch)}, {describe_spec(spec)} (as a "
            f"{head.kind} model was trained; another scale: give --data FILE.npz)")
    return samples, note


def describe_preparation(head: Head, shape: Sequence[int]) -> str:
    """How a picture becomes ``head``'s input of ``shape``, in words (for the report)."""
    return describe_spec(_spec(head, shape))


def picture_preprocess(head: Head) -> Callable:
    """``function(picture, shape)`` for a --calib folder: the Pillow picture prepared as the detector's own."""
    def prepare_picture(picture, shape):
        rgb = np.asarray(picture.convert("RGB"))
        array, _ = prepare(np.ascontiguousarray(rgb[:, :, ::-1]), _spec(head, shape))
        return array[None]

    return prepare_picture
