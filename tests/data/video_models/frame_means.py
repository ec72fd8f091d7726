"""Per-channel means of raw BGR frames, after ``delay_ms`` of work per call (a model slower than the camera on
demand); a batch of N frames costs one delay, as a GPU batch would."""

import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.delay_s = float(parameters.get("delay_ms", {}).get("string_value", "0")) / 1000.0

    def execute(self, requests):
        time.sleep(self.delay_s)
        responses = []
        for request in requests:
            frames = pb_utils.get_input_tensor_by_name(request, "FRAME").as_numpy()
            means = frames.reshape(frames.shape[0], -1, 3).mean(axis=1).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("MEANS", means)]))
        return responses
