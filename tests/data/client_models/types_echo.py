"""Doubles every numeric input and reverses every BYTES item: known answers for each dtype."""

import numpy as np
import triton_python_backend_utils as pb_utils

PAIRS = [("IN_FP32", "OUT_FP32"), ("IN_FP16", "OUT_FP16"), ("IN_INT32", "OUT_INT32"), ("IN_INT64", "OUT_INT64"),
         ("IN_UINT8", "OUT_UINT8")]


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for source, target in PAIRS:
                array = pb_utils.get_input_tensor_by_name(request, source).as_numpy()
                outputs.append(pb_utils.Tensor(target, (array * 2).astype(array.dtype)))
            text = pb_utils.get_input_tensor_by_name(request, "IN_BYTES").as_numpy()
            reversed_text = np.array([[item[::-1] for item in row] for row in text], dtype=np.object_)
            outputs.append(pb_utils.Tensor("OUT_BYTES", reversed_text))
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
