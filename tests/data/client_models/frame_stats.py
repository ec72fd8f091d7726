"""Per-channel mean of a 3x360x640 frame, and the frame back: the large-tensor path of the client."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            frame = pb_utils.get_input_tensor_by_name(request, "FRAME").as_numpy()
            means = frame.reshape(frame.shape[0], 3, -1).mean(axis=2).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("MEANS", means), pb_utils.Tensor("ECHO", frame)]))
        return responses
