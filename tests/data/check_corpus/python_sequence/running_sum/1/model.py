import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.total = 0.0

    def execute(self, requests):
        responses = []
        for request in requests:
            if pb_utils.get_input_tensor_by_name(request, "START").as_numpy()[0][0] == 1:
                self.total = 0.0
            value = pb_utils.get_input_tensor_by_name(request, "VALUE").as_numpy()
            self.total += float(value[0][0])
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", value * 0 + self.total)]))
        return responses
