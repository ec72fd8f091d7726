"""Runs the TorchScript module beside it (``model.pt`` in the same version folder) with torch on the CPU.

orinkit places TorchScript models this way where the server has only the Python backend (the local
tritonserver); on the Orin the same model is placed as pytorch_libtorch. Inputs go to ``forward`` in the config's
order, outputs come back in order (``output__0``, ...), as the PyTorch backend does. Requests that arrive together
run as one call when the model batches; if that call fails, each runs alone so only the request at fault errs.
"""

import os

import numpy as np

from orinkit.repo.pymodels.batched_runner import BatchedRunner


class TritonPythonModel(BatchedRunner):
    def load(self, args, config):
        import torch

        self.torch = torch
        path = os.path.join(args["model_repository"], args["model_version"], "model.pt")
        self.module = torch.jit.load(path, map_location="cpu").eval()

    def run(self, feeds):
        with self.torch.no_grad():
            result = self.module(*(self.torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in self.input_names))
        results = result if isinstance(result, (tuple, list)) else (result,)
        return [r.detach().cpu().numpy() for r in results]
