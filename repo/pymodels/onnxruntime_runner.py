"""Runs the ONNX model beside it (``model.onnx`` in the same version folder) with onnxruntime on the CPU.

orinkit places ONNX models this way where the server has only the Python backend (the local tritonserver); on
the Orin the same model is placed as onnxruntime_onnx or as a TensorRT plan instead. Requests that arrive
together (dynamic batching) run as one onnxruntime call; if that call fails, each request runs alone so that
only the request at fault gets an error.
"""

import os

from orinkit.repo.pymodels.batched_runner import BatchedRunner


class TritonPythonModel(BatchedRunner):
    def load(self, args, config):
        import onnxruntime

        parameters = config.get("parameters", {})
        threads = int(parameters.get("intra_op_threads", {}).get("string_value", "0") or 0)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def run(self, feeds):
        return self.session.run(self.output_names, feeds)
