"""What the runners share: requests that arrive together run as one call when the model batches; if that call
fails, each request runs alone so that only the request at fault gets an error.

Inlined into each runner's model.py by orinkit.repo.python_model (numpy only).
"""

import json

import numpy as np


class BatchedRunner:
    """A Triton Python model over a framework: subclasses load the model in ``load`` and run a feed dict in
    ``run`` (returning outputs in the config's order)."""

    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.batched = config.get("max_batch_size", 0) > 0
        self.input_names = [tensor["name"] for tensor in config["input"]]
        self.output_names = [tensor["name"] for tensor in config["output"]]
        self.load(args, config)

    def load(self, args, config):
        raise NotImplementedError

    def run(self, feeds):
        raise NotImplementedError

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
                outputs = self.run({n: np.concatenate([f[n] for f in feeds]) for n in self.input_names})
                bounds = np.cumsum(sizes)[:-1]
                parts = [np.split(o, bounds) for o in outputs]
                return [self._response([p[i] for p in parts], pb_utils) for i in range(len(requests))]
            except Exception:  # noqa: BLE001 - one bad request must not fail the others: retry one by one
                pass
        responses = []
        for feed in feeds:
            try:
                responses.append(self._response(self.run(feed), pb_utils))
            except Exception as exc:  # noqa: BLE001 - reported to that request's client
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(exc))))
        return responses
