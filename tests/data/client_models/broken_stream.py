"""A decoupled model that fails mid-stream: for N it sends VALUE = 0..N-1, then an error as its final response."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().reshape(-1)[0])
            for value in range(count):
                sender.send(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("VALUE", np.array([value], np.int32))]))
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(f"sensor lost after {count} frames")),
                        flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
