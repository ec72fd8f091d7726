"""A stateful model under Triton's sequence batcher: SUM is the running sum of X within a sequence, STEP its
step count. State is keyed by the CORRID control input and reset by START, dropped at END."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            start = bool(pb_utils.get_input_tensor_by_name(request, "START").as_numpy().reshape(-1)[0])
            end = bool(pb_utils.get_input_tensor_by_name(request, "END").as_numpy().reshape(-1)[0])
            corrid = pb_utils.get_input_tensor_by_name(request, "CORRID").as_numpy().reshape(-1)[0]
            key = corrid.decode() if isinstance(corrid, bytes) else int(corrid)
            total, steps = (0, 0) if start else self.sums.get(key, (0, 0))
            total, steps = total + int(x.sum()), steps + 1
            if end:
                self.sums.pop(key, None)
            else:
                self.sums[key] = (total, steps)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("SUM", np.full(x.shape, total, np.int32)),
                pb_utils.Tensor("STEP", np.full(x.shape, steps, np.int32))]))
        return responses
