"""A decoupled model: for N it sends N responses VALUE = 0..N-1, DELAY_MS apart, then the final flag alone (the
empty final response a streaming client must not hand to its caller)."""

import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().reshape(-1)[0])
            delay = int(pb_utils.get_input_tensor_by_name(request, "DELAY_MS").as_numpy().reshape(-1)[0])
            for value in range(count):
                # A client that gave up (deadline, break) cancels the request: stop instead of sleeping on.
                if sender.is_cancelled():
                    break
                if value and delay:
                    time.sleep(delay / 1000.0)
                sender.send(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor("VALUE", np.array([value], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
