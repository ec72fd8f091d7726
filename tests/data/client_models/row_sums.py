"""A batching model whose input has a dynamic first dim (dims [-1, 4]): SUMS = ROWS summed over its rows."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("SUMS", pb_utils.get_input_tensor_by_name(r, "ROWS").as_numpy()
                                                .sum(axis=1))]
            )
            for r in requests
        ]
