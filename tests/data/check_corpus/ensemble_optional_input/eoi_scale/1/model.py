import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            bias = pb_utils.get_input_tensor_by_name(request, "BIAS")  # None when the request leaves it out
            y = x * 2 + (bias.as_numpy() if bias is not None else 0)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("Y", y)]))
        return responses
