"""Triton Python-backend model: a detector's raw outputs -> its detections in the source image's pixels.

Inputs: the model's outputs under their own names (``output0`` [B, 4+nc, N] of a YOLOv8, or ``num_dets``,
``det_boxes``, ``det_scores``, ``det_classes`` of an engine with NMS inside, FP32 or FP16), and TRANSFORM FP32
[B, 6] (scale_x, scale_y, pad_x, pad_y, source width, source height) from the letterboxing image step, or
ORIGINAL_SIZE INT32
[B, 2] (height, width) after a stretching one. Outputs, fixed in size as a batching model's must be: BOXES FP32
[B, max_det, 4] (x1 y1 x2 y2, source pixels), SCORES FP32 [B, max_det], CLASSES INT32 [B, max_det] (zeros, -1 for
the classes, past COUNT) and COUNT INT32 [B, 1]. Placed without batching (max_batch_size 0: a model exported with
a fixed batch of 1) the same shapes are full shapes with B = 1. With ``found_only`` (a step of a BLS chain that
stops when nothing is found; one image) it answers only what it found: BOXES [count, 4], SCORES [count], CLASSES
[count], COUNT [1].

Config parameters (string_value): ``head`` (Head.as_dict() as JSON, class names included), ``preprocess``
(Preprocess.as_dict() as JSON), ``conf``, ``iou``, ``max_det``, ``agnostic``, ``found_only``. A head with NMS
inside (end2end, efficient_nms, detr) is only mapped back: no NMS runs here.

Written into a repository as a self-contained ``<version>/model.py`` (orinkit.repo.python_model inlines the
orinkit.detect modules it uses): the server's Python needs numpy only.
"""

from __future__ import annotations

import json

import numpy as np

from orinkit.detect.errors import DetectInputError
from orinkit.detect.heads import Head
from orinkit.detect.postprocess import NmsOptions, postprocess
from orinkit.detect.preprocess import Preprocess, Transform

TRANSFORM, ORIGINAL_SIZE = "TRANSFORM", "ORIGINAL_SIZE"
_FLAGS = {"true": True, "1": True, "false": False, "0": False}


def _text(parameters: dict, key: str) -> str | None:
    entry = parameters.get(key)
    return None if entry is None else str(entry.get("string_value", "")).strip()


def _json(parameters: dict, key: str) -> dict:
    text = _text(parameters, key)
    if not text:
        raise DetectInputError(f"the config has no parameter {key!r}",
                               hint="lay the model out with build_detection_repository (edge-repo add-detector)")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise DetectInputError(f"parameter {key!r} is not JSON: {exc}", hint="write it with as_dict()") from None


def _flag(parameters: dict, key: str) -> bool | None:
    text = _text(parameters, key)
    if text is None:
        return None
    if text.lower() not in _FLAGS:
        raise DetectInputError(f"parameter {key!r} must be true or false, got {text!r}",
                               hint="fix the config's parameters")
    return _FLAGS[text.lower()]


def found_only(parameters: dict) -> bool:
    return bool(_flag(parameters, "found_only"))


def settings_from_parameters(parameters: dict) -> tuple[Head, Preprocess, NmsOptions]:
    """The head, the image step's pre-processing and the NMS options from a config's ``parameters`` map; keys
    this model does not know are ignored (Triton and other tools keep their own entries there)."""
    head = Head.from_dict(_json(parameters, "head"))
    preprocess = Preprocess.from_dict(_json(parameters, "preprocess"))
    values: dict = {}
    for key, parse in (("conf", float), ("iou", float), ("max_det", int)):
        text = _text(parameters, key)
        if text is not None:
            try:
                values[key] = parse(text)
            except ValueError:
                raise DetectInputError(f"parameter {key!r} must be {'an integer' if parse is int else 'a number'}, "
                                       f"got {text!r}", hint="fix the config's parameters") from None
    agnostic = _flag(parameters, "agnostic")
    if agnostic is not None:
        values["agnostic"] = agnostic
    return head, preprocess, NmsOptions(**values)


def transforms_from(geometry: np.ndarray, preprocess: Preprocess) -> list[Transform]:
    """TRANSFORM rows [B, 6] (letterbox), or ORIGINAL_SIZE rows [B, 2] (height, width; stretch) as Transforms."""
    geometry = np.asarray(geometry)
    if preprocess.mode == "stretch":
        height, width = preprocess.size
        return [Transform(width / float(w), 0.0, 0.0, (int(w), int(h)), scale_y=height / float(h))
                for h, w in geometry.reshape(-1, 2).tolist()]
    return [Transform(scale_x, pad_x, pad_y, (int(round(w)), int(round(h))),
                      scale_y=None if scale_y == scale_x else scale_y)
            for scale_x, scale_y, pad_x, pad_y, w, h in geometry.reshape(-1, 6).tolist()]


def pack(detections, max_det: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Detections per image -> BOXES [B, max_det, 4], SCORES [B, max_det], CLASSES [B, max_det], COUNT [B, 1]."""
    batch = len(detections)
    boxes = np.zeros((batch, max_det, 4), np.float32)
    scores = np.zeros((batch, max_det), np.float32)
    classes = np.full((batch, max_det), -1, np.int32)
    counts = np.zeros((batch, 1), np.int32)
    for index, found in enumerate(detections):
        count = min(len(found), max_det)
        boxes[index, :count], scores[index, :count] = found.xyxy[:count], found.score[:count]
        classes[index, :count], counts[index, 0] = found.class_id[:count], count
    return boxes, scores, classes, counts


def run(head: Head, preprocess: Preprocess, options: NmsOptions, outputs: dict, geometry: np.ndarray,
        *, only_found: bool = False):
    """The model's outputs (by name, each [B, ...]) and the image step's geometry -> BOXES, SCORES, CLASSES, COUNT:
    padded to max_det per image, or, ``only_found``, the one image's detections only."""
    raw = {name: np.asarray(outputs[name]) for name in head.outputs}
    found = postprocess(head, raw, transforms_from(geometry, preprocess), options)
    if not only_found:
        return pack(found, options.max_det)
    if len(found) != 1:
        raise DetectInputError(f"with found_only the step takes one image, got {len(found)}")
    one = found[0][:options.max_det]
    return one.xyxy, one.score, one.class_id, np.array([len(one)], np.int32)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.head, self.preprocess, self.options = settings_from_parameters(config.get("parameters") or {})
        self.geometry = ORIGINAL_SIZE if self.preprocess.mode == "stretch" else TRANSFORM
        self.found_only = found_only(config.get("parameters") or {})

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            # A bad request fails alone: the others in this call are still answered.
            try:
                tensors = {}
                for name in (*self.head.outputs, self.geometry):
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is None:
                        raise DetectInputError(f"request has no {name} input")
                    tensors[name] = tensor.as_numpy()
                geometry = tensors.pop(self.geometry)
                boxes, scores, classes, counts = run(self.head, self.preprocess, self.options, tensors, geometry,
                                                     only_found=self.found_only)
                outputs = [pb_utils.Tensor("BOXES", boxes), pb_utils.Tensor("SCORES", scores),
                           pb_utils.Tensor("CLASSES", classes), pb_utils.Tensor("COUNT", counts)]
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except Exception as exc:  # noqa: BLE001 - a failure of this request only, never of the model
                error = pb_utils.TritonError(f"detection postprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
