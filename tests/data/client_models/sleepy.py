"""Sleeps for MS milliseconds, then echoes them: a call that outlives its deadline, on demand."""

import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            ms = pb_utils.get_input_tensor_by_name(request, "MS").as_numpy()
            time.sleep(float(ms.max()) / 1000.0)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("DONE", ms)]))
        return responses
