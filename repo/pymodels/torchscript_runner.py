"""Runs the TorchScript module beside it (``model.pt`` in the same version folder) with torch on the CPU.

orinkit places TorchScript models this way where the server has only the Python backend (the local
tritonserver); on the Orin the same model is placed as pytorch_libtorch. Inputs go to ``forward`` in the config's
order, outputs come back in order (``output__0``, ...), as the PyTorch backend does. Requests that arrive together
run as one call when the model batches; if that call fails, each runs alone so only the request at fault errs.
"""

import json
import os

import numpy as np


class TritonPythonModel:
    def initialize(self, args):
        import torch

        config = json.loads(args["model_config"])
        self.torch = torch
        self.batched = config.get("max_batch_size", 0) > 0
        self.input_names = [tensor["name"] for tensor in config["input"]]
        self.output_names = [tensor["name"] for tensor in config["output"]]
        path = os.path.join(args["model_repository"], args["model_version"], "model.pt")
        self.module = torch.jit.load(path, map_location="cpu").eval()

    def _run(self, feeds):
        with self.torch.no_grad():
            result = self.module(*(self.torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in self.input_names))
        results = result if isinstance(result, (tuple, list)) else (result,)
        return [r.detach().cpu().numpy() for r in results]

    def _response(self, outputs, pb_utils):
        return pb_utils.InferenceResponse(
            output_tensors=[pb_utils.Tensor(n, np.ascontiguousarray(o)) for n, o in zip(self.output_names, outputs)]
        )

    def execute(self, requests):
        import triton_python_backend_utils as pb_utils

        feeds = [{n: pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.input_names} for r in requests]
        if self.batched and len(requests) > 1:
            try:
                sizes = [len(f[self.input_names[0]]) for f in feeds]
                outputs = self._run({n: np.concatenate([f[n] for f in feeds]) for n in self.input_names})
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
