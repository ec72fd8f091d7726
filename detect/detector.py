"""``Detector(model)(image)``: a detector's boxes in-process with onnxruntime, pre- and post-processing included.

>>> from orinkit.detect import Detector
>>> detect = Detector("yolov8n.onnx")  # doctest: +SKIP
>>> detections = detect("street.jpg")  # doctest: +SKIP
>>> detections.to_records()[0]  # doctest: +SKIP
{'box': [48.2, 398.9, 245.6, 902.7], 'score': 0.87, 'class_id': 0, 'class': 'person'}
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from orinkit.core.optional import require
from orinkit.detect.detections import Detections
from orinkit.detect.errors import DetectInputError
from orinkit.detect.heads import Head, recognize
from orinkit.detect.heads_meta import load_model
from orinkit.detect.images import load_image
from orinkit.detect.postprocess import DEFAULT_OPTIONS, NmsOptions, postprocess
from orinkit.detect.preprocess import Preprocess, prepare_batch, preprocess_for

# TensorRT's execution provider would build an engine on the first call (minutes on a Jetson): edge-convert does
# that properly. In-process detection uses CUDA where onnxruntime has it, else the CPU.
DEFAULT_PROVIDERS = ("CUDAExecutionProvider", "CPUExecutionProvider")


class Detector:
    """Runs a detector ONNX file on BGR uint8 arrays (cv2, orinkit.video frames), encoded image bytes or paths.

    The head is recognized from the graph (``head=`` forces a kind, ``labels=`` names the classes); the images are
    prepared as the family was trained (:func:`~orinkit.detect.preprocess.preprocess_for`, or ``preprocess=``);
    ``options`` are the score and IoU thresholds and the box limit."""

    def __init__(self, model: str | Path, *, head: str | None = None, labels=None,
                 preprocess: Preprocess | None = None, options: NmsOptions = DEFAULT_OPTIONS,
                 providers: Sequence[str] | None = None) -> None:
        ort = require("onnxruntime")
        proto = load_model(model)
        self.head: Head = recognize(proto, head=head, labels=labels)
        self.preprocess = preprocess or preprocess_for(self.head)
        if not isinstance(options, NmsOptions):
            raise DetectInputError(f"options must be NmsOptions, got {type(options).__name__}",
                                   hint="e.g. NmsOptions(conf=0.25, iou=0.7)")
        self.options = options
        available = ort.get_available_providers()
        chosen = list(providers) if providers else [p for p in DEFAULT_PROVIDERS if p in available]
        source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else proto.SerializeToString()
        self.session = ort.InferenceSession(source, providers=chosen)
        image_input = next(i for i in self.session.get_inputs() if i.name == self.head.input_name)
        self._dtype = np.float16 if image_input.type == "tensor(float16)" else np.float32
        batch = image_input.shape[0]
        self._batch = batch if isinstance(batch, int) and batch > 0 else None  # None: any batch size

    def run(self, tensor: np.ndarray) -> dict[str, np.ndarray]:
        """The head's raw outputs for an NCHW tensor already prepared (any batch size; split or padded to the
        model's static batch size where it has one)."""
        tensor = np.asarray(tensor, dtype=self._dtype)
        step = self._batch or len(tensor)
        parts: list[dict[str, np.ndarray]] = []
        for start in range(0, len(tensor), step):
            chunk = tensor[start:start + step]
            filled = len(chunk)
            if filled < step:  # a static batch size: pad with zeros, drop their answers
                chunk = np.concatenate([chunk, np.zeros((step - filled, *chunk.shape[1:]), chunk.dtype)])
            answers = self.session.run(list(self.head.outputs), {self.head.input_name: chunk})
            parts.append({name: answer[:filled] for name, answer in zip(self.head.outputs, answers)})
        if len(parts) == 1:
            return parts[0]
        return {name: np.concatenate([part[name] for part in parts]) for name in self.head.outputs}

    def batch(self, images) -> list[Detections]:
        """Detections for each image (arrays, bytes or paths), in its own pixels."""
        images = [load_image(image) for image in images]
        if not images:
            return []
        tensor, transforms = prepare_batch(images, self.preprocess)
        return postprocess(self.head, self.run(tensor), transforms, self.options)

    def __call__(self, image: np.ndarray | bytes | str | Path) -> Detections:
        return self.batch([image])[0]

    def __repr__(self) -> str:
        h, w = self.head.input_size
        return f"Detector({self.head.kind}, {self.head.num_classes} classes, {h}x{w})"
