"""Triton Python-backend model: classifier logits -> top-k scores, class ids and (optionally) labels.

Copied into a repository as ``<version>/model.py``, so it imports nothing from orinkit. LABELS is produced
only when a ``labels.txt`` (one label per line) lies next to model.py.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Options:
    k: int = 5
    softmax: bool = True


def options_from_parameters(parameters: dict) -> Options:
    """Options from a model config's ``parameters`` map (``{"k": {"string_value": "3"}, ...}``).

    Missing keys take their defaults; unknown keys are ignored (Triton puts its own entries in the map).
    """
    k_text = str(parameters.get("k", {}).get("string_value", "5"))
    try:
        k = int(k_text.strip())
    except ValueError:
        raise ValueError(f"parameter 'k' must be a positive integer, got {k_text!r}") from None
    if k <= 0:
        raise ValueError(f"parameter 'k' must be a positive integer, got {k_text!r}")
    softmax_text = str(parameters.get("softmax", {}).get("string_value", "true"))
    if softmax_text.strip().lower() in _TRUE:
        softmax = True
    elif softmax_text.strip().lower() in _FALSE:
        softmax = False
    else:
        raise ValueError(f"parameter 'softmax' must be 'true' or 'false', got {softmax_text!r}")
    return Options(k=k, softmax=softmax)


def topk(logits: np.ndarray, k: int, softmax: bool) -> tuple[np.ndarray, np.ndarray]:
    """[B, C] logits -> ([B, k] FP32 scores, [B, k] INT32 class ids), by descending score, ties by lower id."""
    scores = np.asarray(logits, dtype=np.float32)
    if scores.ndim != 2:
        raise ValueError(f"LOGITS must have shape [batch, classes], got {list(scores.shape)}")
    classes = scores.shape[1]
    if k > classes:
        raise ValueError(f"k={k} is larger than the number of classes in LOGITS ({classes})")
    if not np.isfinite(scores).all():
        raise ValueError("LOGITS holds non-finite values (NaN or inf); the model producing them is broken")
    if softmax:
        # Subtracting the row maximum keeps exp() from overflowing without changing the result.
        exp = np.exp(scores - scores.max(axis=1, keepdims=True))
        scores = exp / exp.sum(axis=1, keepdims=True)
    # A stable sort of the negated scores keeps equal scores in ascending class-id order.
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), order.astype(np.int32)


def read_labels(path) -> list[str] | None:
    """The labels in ``path``, one per line, or None when there is no such file."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as file:
        return [line.strip() for line in file.read().splitlines()]


def label_array(class_ids: np.ndarray, labels: list[str]) -> np.ndarray:
    """Class ids -> an object array of the matching labels as UTF-8 bytes (Triton's BYTES)."""
    if class_ids.size and int(class_ids.max()) >= len(labels):
        raise ValueError(f"class id {int(class_ids.max())} has no line in labels.txt ({len(labels)} labels)")
    encoded = np.array([label.encode("utf-8") for label in labels], dtype=object)
    return encoded[class_ids]


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.options = options_from_parameters(config.get("parameters") or {})
        self.labels = read_labels(os.path.join(args["model_repository"], args["model_version"], "labels.txt"))

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            # Bad logits fail only their own request: the others in this call are still answered.
            try:
                logits = pb_utils.get_input_tensor_by_name(request, "LOGITS")
                if logits is None:
                    raise ValueError("request has no LOGITS input")
                scores, class_ids = topk(logits.as_numpy(), self.options.k, self.options.softmax)
                outputs = [pb_utils.Tensor("SCORES", scores), pb_utils.Tensor("CLASS_IDS", class_ids)]
                if self.labels is not None:
                    outputs.append(pb_utils.Tensor("LABELS", label_array(class_ids, self.labels)))
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except Exception as exc:
                error = pb_utils.TritonError(f"topk: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
