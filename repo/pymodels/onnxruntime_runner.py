"""Runs the ONNX model beside it (``model.onnx`` in the same version folder) with onnxruntime on the CPU.

orinkit places ONNX models this way where the server has only the Python backend (the local tritonserver); on
the Orin the same model is placed as onnxruntime_onnx or as a TensorRT plan instead. Requests that arrive
together (dynamic batching) run as one onnxruntime call; if that call fails, each request runs alone so that
only the request at fault gets an error.
"""

import json
import os

import numpy as np


class TritonPythonModel:
    def initialize(self, args):
        import onnxruntime

        config = json.loads(args["model_config"])
        self.batched = config.get("max_batch_size", 0) > 0
        self.input_names = [tensor["name"] for tensor in config["input"]]
        self.output_names = [tensor["name"] for tensor in config["output"]]
        parameters = config.get("parameters", {})
        threads = int(parameters.get("intra_op_threads", {}).get("string_value", "0") or 0)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def _feeds(self, request, pb_utils):
        return {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.input_names}

    def _run(self, feeds):
        return self.session.run(self.output_names, feeds)

    def _response(self, outputs, pb_utils):
        return pb_utils.InferenceResponse(
            output_tensors=[pb_utils.Tensor(n, np.ascontiguousarray(o)) for n, o in zip(self.output_names, outputs)]
        )

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        feeds = [self._feeds(request, pb_utils) for request in requests]
        if self.batched and len(requests) > 1:
            try:
                sizes = [len(f[self.input_names[0]]) for f in feeds]
                joined = {n: np.concatenate([f[n] for f in feeds]) for n in self.input_names}
                outputs = self._run(joined)
                bounds = np.cumsum(sizes)[:-1]
                parts = [np.split(o, bounds) for o in outputs]
                return [self._response([p[i] for p in parts], pb_utils) for i in range(len(requests))]
            except Exception:  # noqa: BLE001 - one bad request must not fail the others: retry one by one
                pass
        responses = []
        for feed in feeds:
            try:
                responses.append(self._response(self._run(feed), pb_utils))
            except Exception as exc:  # noqa: BLE001 - reported to that request's client
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))))
        return responses
