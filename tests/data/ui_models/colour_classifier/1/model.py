import io
import json

import numpy as np

# triton_python_backend_utils is available in every Triton Python model.
import triton_python_backend_utils as pb_utils
from PIL import Image


class TritonPythonModel:
    """Which of red, green and blue a picture holds most of: one logit per colour, from its mean pixel."""

    def initialize(self, args):
        # You must parse model_config. JSON string is not parsed here
        self.model_config = json.loads(args["model_config"])
        output0_config = pb_utils.get_output_config_by_name(self.model_config, "OUTPUT_0")
        self.output0_dtype = pb_utils.triton_string_to_numpy(output0_config["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT_0")
            img = in_0.as_numpy()
            image = Image.open(io.BytesIO(img.tobytes())).convert("RGB")
            mean = np.asarray(image, dtype=np.float32).reshape(-1, 3).mean(axis=0)
            logits = np.expand_dims(mean / 255.0 * 10.0, axis=0)  # the batch axis: max_batch_size > 0
            out_tensor_0 = pb_utils.Tensor("OUTPUT_0", logits.astype(self.output0_dtype))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out_tensor_0]))
        return responses

    def finalize(self):
        print("Cleaning up...")
