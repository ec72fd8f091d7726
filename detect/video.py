"""Detectors on video: frames into a served detector, :class:`~orinkit.detect.detections.Detections` out, tracked.

Two kinds of served detector are understood (``orinkit.detect.kit`` tells them from their signature):

* orinkit's detection **ensemble** (``edge-repo add-detector``: encoded image in, ``boxes``/``scores``/``classes``/
  ``count`` out, class names in the config parameter ``names``): frames go as JPEG at the source's size and the
  boxes come back in its pixels;
* a **raw head** orinkit recognizes from the served signature (:func:`head_from_info`: an FP32/FP16 ``[3, H, W]``
  image in, a YOLOv8/YOLOv5/YOLOX/end-to-end/EfficientNMS/DETR head out): frames are letterboxed here as the family
  was trained (:mod:`orinkit.detect.preprocess`) and the outputs decoded, NMS included, here too
  (:mod:`orinkit.detect.postprocess`): the same code as the in-process :class:`~orinkit.detect.Detector`.

Tracking (on by default) gives each source its own :class:`orinkit.detect.track.Tracker` (``for_source``), fed with
the frames' own times (the stream's ``pts``, else the capture time): a frame the pipeline dropped is a longer step
for the motion model, not a lost track.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import numpy as np

from orinkit.client.images import FRAME_FORMATS, JPEG_QUALITY, frame_format_name, is_jpeg_quality
from orinkit.core.kits import KitError
from orinkit.detect.detections import Detections
from orinkit.detect.draw import draw_detections
from orinkit.video.adapters import Adapter

ENSEMBLE_OUTPUTS = frozenset({"boxes", "scores", "classes", "count"})
_FLOAT_INPUTS = ("FP32", "FP16")


def head_from_info(info):
    """The :class:`~orinkit.detect.heads.Head` of a served raw detector, read from its signature (``info``: an
    ``orinkit.client.ModelInfo``), or None when the model is not one (any other model, orinkit's detection ensemble
    included). The config parameter ``head`` (``Head.as_dict`` JSON) is taken as it is; else one FP32/FP16 image
    input ``[3, H, W]`` (``[1 or -1, 3, H, W]`` without batching) and outputs that fit a known head, checked as
    :func:`orinkit.detect.heads.recognize` checks an ONNX file (a YOLOv8 head's anchors must be its input's grid
    count at strides 8/16/32). Class names come from the config parameter ``names`` (JSON list)."""
    from orinkit.detect.client import names_of
    from orinkit.detect.errors import DetectError
    from orinkit.detect.heads import Head

    parameters = dict(getattr(info, "parameters", None) or {})
    names = names_of(parameters)
    image = _image_input(info)
    if image is None or ENSEMBLE_OUTPUTS <= {t.name for t in info.outputs}:
        return None
    if parameters.get("head"):
        try:
            head = Head.from_dict(json.loads(parameters["head"]))
        except (ValueError, DetectError):
            return None
        return replace(head, names=names, num_classes=head.num_classes or len(names)) if names else head
    try:
        head = _recognize(info, image, names)
    except DetectError:
        return None
    return head


def _image_input(info):
    """The model's one image input as (name, height or None, width or None), or None."""
    if len(info.inputs) != 1:
        return None
    tensor = info.inputs[0]
    dims = tuple(tensor.dims)
    if info.max_batch_size <= 0:
        if len(dims) != 4 or dims[0] not in (1, -1):
            return None
        dims = dims[1:]
    if tensor.dtype not in _FLOAT_INPUTS or len(dims) != 3 or dims[0] != 3:
        return None
    return tensor.name, (dims[1] if dims[1] > 0 else None), (dims[2] if dims[2] > 0 else None)


def _recognize(info, image, names):
    """recognize() on the served signature's facts (no onnx: the device page describes every served model with
    this, and must stay small)."""
    from orinkit.detect.heads import recognize
    from orinkit.detect.heads_meta import ModelFacts, TensorFacts
    from orinkit.detect.labels import check_count

    def facts(name: str, dims, integer: bool = False) -> TensorFacts:
        return TensorFacts(name, tuple(d if d > 0 else None for d in dims), integer)

    batch = (-1,) if info.max_batch_size > 0 else ()
    name, height, width = image
    inputs = (facts(name, (-1, 3, height or -1, width or -1)),)
    outputs = tuple(facts(t.name, (*batch, *t.dims), t.dtype.startswith(("INT", "UINT"))) for t in info.outputs)
    head = recognize(ModelFacts(inputs=inputs, outputs=outputs))
    if names:
        check_count(names, head.num_classes, "the config's names")
        head = replace(head, names=names, num_classes=head.num_classes or len(names))
    return head


def _tracker_class():
    """orinkit.detect.track.Tracker, or None where that module is not installed."""
    try:
        from orinkit.detect.track import Tracker
    except ImportError:
        return None
    return Tracker


class DetectionAdapter(Adapter):
    """Frames into a served detector, :class:`Detections` (source pixels, class names, ``track_id`` when tracking)
    out. Made by :meth:`for_model`; the pipeline calls :meth:`for_source` once per source."""

    def __init__(self, info, *, head=None, track: bool = True, conf: float | None = None,
                 frame_format: str = "jpeg", jpeg_quality: int = JPEG_QUALITY) -> None:
        from orinkit.detect.client import names_of

        self.info, self.head, self.track, self.conf = info, head, track, conf
        self.frame_format, self.jpeg_quality = frame_format, jpeg_quality
        self.names = tuple(head.names) if head is not None else names_of(info.parameters or {})
        self.size = None  # source size: the ensemble letterboxes itself, a raw head's frames are letterboxed here
        self.batching = info.max_batch_size > 0
        self._transforms: dict = {}  # (width, height) -> letterbox Transform: the same for every frame of a size
        if head is not None:
            from orinkit.detect.postprocess import NmsOptions
            from orinkit.detect.preprocess import preprocess_for

            self.preprocess = preprocess_for(head)
            self.options = NmsOptions() if conf is None else NmsOptions(conf=conf)
            self._dtype = np.float16 if info.inputs[0].dtype == "FP16" else np.float32
        self._reset()

    @classmethod
    def for_model(cls, info, *, track: bool = True, conf: float | None = None, frame_format: str = "jpeg",
                  jpeg_quality: int = JPEG_QUALITY, **unknown) -> DetectionAdapter:
        """The adapter for the served detector ``info`` describes. ``track``: persistent ids (a Tracker per
        source); ``conf``: keep boxes scoring above it (a raw head's NMS threshold; for the ensemble a filter
        over what its own threshold kept); ``frame_format``/``jpeg_quality``: how frames travel to the ensemble.
        An option it does not take, or one out of range, raises KitError."""
        if unknown:
            given = ", ".join(f"--{name.replace('_', '-')}" for name in sorted(unknown))
            raise KitError(f"a detector stream takes no option {given}",
                           hint="leave it out; a detector takes --track/--no-track")
        if not isinstance(track, bool):
            raise KitError(f"track must be True or False, got {track!r}", hint="--track or --no-track")
        if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float)) or not 0 <= conf < 1):
            raise KitError(f"conf must be in [0, 1), got {conf!r}", hint="e.g. 0.25")
        frame_format = frame_format_name(frame_format) or str(frame_format).lower()
        if frame_format not in FRAME_FORMATS:
            raise KitError(f"frame format {frame_format!r} is not one the detection ensemble decodes",
                           hint="use jpeg (fast, for video) or png (lossless)")
        if not is_jpeg_quality(jpeg_quality):
            raise KitError(f"JPEG quality {jpeg_quality!r} is outside 1..100", hint=f"e.g. {JPEG_QUALITY}")
        if track and _tracker_class() is None:
            raise KitError("tracking needs orinkit.detect.track, which this install lacks",
                           hint="reinstall orinkit, or stream with --no-track")
        head = None
        if not ENSEMBLE_OUTPUTS <= {t.name for t in info.outputs}:
            head = head_from_info(info)
            if head is None:
                raise KitError(f"'{info.name}' is neither orinkit's detection ensemble nor a detector head orinkit "
                               "recognizes", hint="serve it with edge-repo add-detector")
        return cls(info, head=head, track=track, conf=conf, frame_format=frame_format, jpeg_quality=jpeg_quality)

    def _reset(self) -> None:
        tracker = _tracker_class() if self.track else None
        self.tracker = tracker() if tracker is not None else None
        self.frames = 0
        self.detections = 0
        self._clock: tuple[float, float, float] | None = None  # (frame time, captured, tracker time) of the last

    def for_source(self, name: str) -> DetectionAdapter:
        """A copy for one source: its own tracker (each camera has its own ids) and its own counts."""
        adapter = copy.copy(self)
        adapter._reset()
        return adapter

    # --- frames in ---------------------------------------------------------------------------------------------

    def inputs(self, frame) -> tuple:
        if self.head is None:
            from orinkit.detect.client import encode

            data = encode(frame.image, self.frame_format, quality=self.jpeg_quality)
            return (np.array([data] if self.batching else [[data]], dtype=np.object_),)
        from orinkit.detect.preprocess import prepare

        tensor, transform = prepare(frame.image, self.preprocess)
        self._transforms[frame.image.shape[1::-1]] = transform
        tensor = tensor.astype(self._dtype, copy=False)
        return (tensor if self.batching else tensor[None],)

    # --- answers out -------------------------------------------------------------------------------------------

    def detections_of(self, outputs: Any, frame) -> Detections:
        """The frame's detections in its source's pixels (not tracked)."""
        height, width = frame.image.shape[:2]
        if self.head is None:
            from orinkit.detect.client import detections_from

            found = detections_from(outputs, self.names)[0]
        else:
            from orinkit.detect.postprocess import postprocess

            named = outputs if isinstance(outputs, dict) else {self.info.outputs[0].name: outputs}
            arrays = {name: np.asarray(named[name])[None] if self.batching else np.asarray(named[name])
                      for name in self.head.outputs}
            transform = self._transforms.get((width, height))
            if transform is None:  # only a frame that inputs() never saw
                from orinkit.detect.preprocess import letterbox

                transform = letterbox(frame.image, self.preprocess)[1]
            found = postprocess(self.head, arrays, [transform], self.options)[0]
        if self.conf is not None and self.head is None:
            found = found[found.score > self.conf]
        source = tuple(frame.source_size) if frame.source_size else (width, height)
        if source != (width, height):  # a decoder that scaled the frame: boxes back to the source's pixels
            gain = np.array([source[0] / width, source[1] / height] * 2, np.float32)
            found = Detections(found.xyxy * gain, found.score, found.class_id, found.names, found.track_id)
        return found

    def answer(self, outputs: Any, frame) -> tuple[Detections, dict]:
        found = self.detections_of(outputs, frame)
        if self.tracker is not None:
            found = self.tracker.update(found, self._time(frame))
        self.frames += 1
        self.detections += len(found)
        return found, record_of(found)

    def _time(self, frame) -> float:
        """The tracker's clock: the frame's own time (pts, else the capture time), kept from going backwards
        where the source restarted its clock (a reconnect): then it advances by the capture times' step."""
        own = frame.pts if frame.pts is not None else frame.captured
        own = float(own)
        if self._clock is None:
            self._clock = (own, frame.captured, own)
            return own
        last_own, last_captured, last_time = self._clock
        step = own - last_own
        if step < 0:  # a new clock (the camera reconnected, the file reopened): the tracker refuses time going back
            step = max(frame.captured - last_captured, 0.0)
        now = last_time + step
        self._clock = (own, frame.captured, now)
        return now

    def draw(self, image: np.ndarray, answer: Any) -> np.ndarray:
        if answer is None or not len(answer):
            return np.array(image, copy=True)
        return draw_detections(image, answer)

    def summary(self) -> dict:
        """``{"tracks": {class: distinct confirmed tracks}}`` when tracking, else ``{"detections": total}``."""
        if self.tracker is not None:
            return {"tracks": dict(self.tracker.counts())}
        return {"detections": self.detections}


def record_of(detections: Detections) -> dict:
    """A frame's JSON record: ``{"detections": [{"box": [x1, y1, x2, y2] (1 decimal), "score" (4 decimals),
    "class_id", "class", "track_id" (when tracked)}], "count": N}``."""
    records = detections.to_records()
    for record in records:
        record["box"] = [round(v, 1) for v in record["box"]]
        record["score"] = round(record["score"], 4)
    return {"detections": records, "count": len(records)}
