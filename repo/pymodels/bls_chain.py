"""Triton Python-backend model (BLS): calls other models of the server in order, stopping early when a step
finds nothing (an empty detection list: no plate, no face) so the later, costlier steps never run.

The chain comes from the config's ``chain`` parameter (JSON written by ``edge-repo step bls``): each step names
a model, maps its inputs from tensors known so far (the request's inputs, earlier steps' outputs) and its outputs
to new tensors, and may name a tensor whose emptiness ends the chain. Outputs no step produced (the chain stopped
first) come back empty along their variable axis. Copied into a repository as ``<version>/model.py``; it imports
nothing from orinkit.
"""

import json

import numpy as np

_NUMPY = {"TYPE_BOOL": np.bool_, "TYPE_UINT8": np.uint8, "TYPE_UINT16": np.uint16, "TYPE_UINT32": np.uint32,
          "TYPE_UINT64": np.uint64, "TYPE_INT8": np.int8, "TYPE_INT16": np.int16, "TYPE_INT32": np.int32,
          "TYPE_INT64": np.int64, "TYPE_FP16": np.float16, "TYPE_FP32": np.float32, "TYPE_FP64": np.float64,
          "TYPE_STRING": np.object_}


def empty_like_declared(data_type: str, dims, batch) -> np.ndarray:
    """An output the chain did not reach: its variable axes 0 long (zeros where every axis is fixed)."""
    shape = ([batch] if batch is not None else []) + [0 if int(d) == -1 else int(d) for d in dims]
    return np.zeros(shape, dtype=_NUMPY.get(data_type, np.float32))


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.chain = json.loads(config["parameters"]["chain"]["string_value"])
        self.batched = config.get("max_batch_size", 0) > 0
        self.inputs = [t["name"] for t in config["input"]]
        self.outputs = {t["name"]: (t["data_type"], t.get("dims", [])) for t in config["output"]}

    def _run(self, request, pb_utils):
        tensors = {name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.inputs}
        for step in self.chain["steps"]:
            call = pb_utils.InferenceRequest(
                model_name=step["model"], requested_output_names=list(step["outputs"]),
                inputs=[pb_utils.Tensor(name, tensors[tensor]) for name, tensor in step["inputs"].items()])
            response = call.exec()
            if response.has_error():
                raise RuntimeError(f"step '{step['model']}' failed: {response.error().message()}")
            for name, tensor in step["outputs"].items():
                tensors[tensor] = pb_utils.get_output_tensor_by_name(response, name).as_numpy()
            stop = step.get("stop_if_empty")
            if stop is not None and tensors[stop].size == 0:
                break
        batch = len(tensors[self.inputs[0]]) if self.batched else None
        return [pb_utils.Tensor(name, np.ascontiguousarray(tensors[name]) if name in tensors
                                else empty_like_declared(data_type, dims, batch))
                for name, (data_type, dims) in self.outputs.items()]

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        responses = []
        for request in requests:
            try:
                responses.append(pb_utils.InferenceResponse(output_tensors=self._run(request, pb_utils)))
            except Exception as exc:  # noqa: BLE001 - this request fails alone, with the step's message
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))))
        return responses
