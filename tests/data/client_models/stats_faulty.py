"""Y = X + 1, failing on demand: a negative X makes execute() raise, which Triton counts as a failed request."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if (x < 0).any():
                # Raised, not answered with an error response: Triton 2.51 counts a Python model's error
                # response as a success in its statistics, a raised exception as a failure.
                raise ValueError("a negative X: execute() raises")
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", x + 1)]))
        return responses
