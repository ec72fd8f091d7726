"""Triton Python-backend model: LaneATT proposals -> lanes (score threshold, NMS, decoding).

Inputs PROPOSALS FP32 [B, N, 77] and ORIGINAL_SIZE INT32 [B, 2] (height, width). Outputs LANES FP32
[B, top_k, 72, 2] ((x, y) in the original image's pixels, each lane's points first, NaN after), SCORES FP32
[B, top_k] (0 past the lanes) and COUNT INT32 [B, 1]. Config parameters (string_value): conf_threshold,
nms_threshold, top_k, and optionally img_w / img_h of the network input.

Written into a repository as a self-contained ``<version>/model.py`` (orinkit.repo.python_model inlines
orinkit.lanes.postprocess): the server's Python needs numpy only.
"""

from __future__ import annotations

import json

import numpy as np

from orinkit.lanes.postprocess import LaneInputError, PostprocessOptions, postprocess_batch

_PARSERS = {"conf_threshold": float, "nms_threshold": float, "top_k": int, "img_w": int, "img_h": int}


def options_from_parameters(parameters: dict) -> PostprocessOptions:
    """Options from a model config's ``parameters`` map; keys this model does not know are ignored, since
    Triton and other tools keep their own entries there."""
    values = {}
    for key, parse in _PARSERS.items():
        if key in parameters:
            text = str(parameters[key].get("string_value", ""))
            try:
                values[key] = parse(text.strip())
            except ValueError:
                raise LaneInputError(f"parameter {key!r} must be {'an integer' if parse is int else 'a number'}, "
                                 f"got {text!r}") from None
    return PostprocessOptions(**values)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.options = options_from_parameters(config.get("parameters") or {})

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            # A bad request fails alone: the others in this call are still answered.
            try:
                tensors = {}
                for name in ("PROPOSALS", "ORIGINAL_SIZE"):
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is None:
                        raise LaneInputError(f"request has no {name} input")
                    tensors[name] = tensor.as_numpy()
                points, scores, counts = postprocess_batch(tensors["PROPOSALS"], tensors["ORIGINAL_SIZE"],
                                                           self.options)
                outputs = [pb_utils.Tensor("LANES", points), pb_utils.Tensor("SCORES", scores),
                           pb_utils.Tensor("COUNT", counts.reshape(-1, 1).astype(np.int32))]
                responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            except Exception as exc:
                error = pb_utils.TritonError(f"lane_postprocess: {exc}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
