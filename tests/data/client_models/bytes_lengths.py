"""The length in bytes of every BYTES item, in the items' shape: what arrived, trailing NUL bytes included."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            items = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            lengths = np.array([len(item) for item in items.flat], dtype=np.int64).reshape(items.shape)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("LENGTHS", lengths)]))
        return responses
