import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "flatten_input").as_numpy()
            out = pb_utils.Tensor("flatten_output", x.reshape(x.shape[0], -1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
