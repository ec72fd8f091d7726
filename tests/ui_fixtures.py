"""The device page's test repository and server, shared by test_ui_server.py and test_ui_browser.py.

One repository (one tritonserver for both files, in explicit model control so that the page may load and unload):

* ``mnist``: the MNIST-style ensemble of examples/mnist_ensemble.py (image bytes -> top-3 digits), built with that
  example's own functions (imported, not copied);
* ``lane_detection``: the LaneATT lane ensemble with random weights and a low threshold, so that lanes appear;
* ``plus_one``: a model that takes no image, with two versions, for the control and refusal tests;
* ``colour_classifier`` and ``raw_digits`` (tests/data/ui_models, written by hand as Triton's python_backend
  examples write theirs): a classifier taking the encoded file as UINT8 [-1] with a labels file, and a model whose
  UINT8 [-1] input wants raw pixels instead.

The repository is built once per session and kept here (a fixture imported into two modules would build it twice).
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import sys
from pathlib import Path

import numpy as np
from conftest import DATA, ROOT
from PIL import Image

from orinkit.ui import UiServer

EXAMPLES = ROOT / "examples"
UI_MODELS = DATA / "ui_models"
CONTROLLED = "plus_one"
UINT8_CLASSIFIER = "colour_classifier"
RAW_PIXELS = "raw_digits"
_BUILT: dict[str, Path] = {}


def _mnist_example():
    """examples/mnist_ensemble.py as a module (it imports its sibling _runner, so examples/ goes on the path)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location("mnist_ensemble_example", EXAMPLES / "mnist_ensemble.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLES))


def _build(work: Path) -> Path:
    import torch
    from sklearn.datasets import load_digits

    from orinkit.convert import export_torch
    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.model import build_lane_model, show_random_lanes
    from orinkit.lanes.postprocess import PostprocessOptions
    from orinkit.lanes.repository import build_lane_repository
    from orinkit.repo.add import add_model
    from orinkit.repo.options import ModelOptions
    from orinkit.repo.signature import TensorSpec

    repository = work / "models"
    mnist = _mnist_example()
    digits = load_digits()
    x = digits.images.astype(np.float32)[:, None]
    model = mnist.train(x, digits.target)
    onnx = work / "digits.onnx"
    export_torch(model, [torch.from_numpy(x[:1])], onnx, input_names=["pixels"], output_names=["logits"],
                 dynamic_batch=True)
    mnist.build_repository(repository, onnx)

    torch.manual_seed(0)
    lanes = show_random_lanes(build_lane_model("resnet18", random_weights=True))
    lane_onnx = export_lane_onnx(lanes, work / "laneatt.onnx", dynamic_batch=True)
    # Random weights give few lanes above 0.5: a low threshold makes every road carry some.
    build_lane_repository(repository, lane_onnx,
                          postprocess=PostprocessOptions(conf_threshold=0.05, nms_threshold=50.0, top_k=4),
                          runtime="python-onnxruntime")

    add_model(repository, DATA / "client_models" / "plus_one.py", name=CONTROLLED,
              inputs=[TensorSpec.parse("X:FP32:2x3")], outputs=[TensorSpec.parse("Y:FP32:2x3")],
              options=ModelOptions(max_batch_size=0))
    copy_ui_models(repository)
    return repository


def copy_ui_models(repository: Path) -> None:
    for model in UI_MODELS.iterdir():
        shutil.copytree(model, repository / model.name)


def solid_png(colour: tuple[int, int, int], size: tuple[int, int] = (40, 30), format_name: str = "PNG") -> bytes:
    """A picture of one colour, encoded (PNG unless ``format_name`` says otherwise)."""
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format_name)
    return buffer.getvalue()


def solid_jpeg(colour: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> bytes:
    return solid_png(colour, size, "JPEG")


def ui_repository(tmp_path_factory) -> Path:
    if "repository" not in _BUILT:
        _BUILT["repository"] = _build(tmp_path_factory.mktemp("ui-models"))
    return _BUILT["repository"]


def start_triton(triton_server_factory, tmp_path_factory):
    """The shared server (one per session: the factory keeps it by repository and options); each test module's
    fixture calls this (a fixture imported into two modules would be two fixtures)."""
    repository = ui_repository(tmp_path_factory)
    models = tuple(sorted(p.name for p in repository.iterdir() if (p / "config.pbtxt").is_file()))
    return triton_server_factory(repository, model_control_mode="explicit", load_models=models)


def make_page(server, **options) -> UiServer:
    """A page server on a free port for ``server`` (a TritonProcess); stop it after use."""
    options.setdefault("port", 0)
    options.setdefault("board_interval_s", 0.5)
    # No http_url: the default, asked of the tritonserver on the gRPC port, must find this server's on free ports.
    return UiServer(server.command.grpc_url, **options).start()


def digit_png(index: int = 0) -> tuple[bytes, int]:
    """A digit of scikit-learn's bundled set, upscaled to 64x64 8-bit PNG, and its class."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    pixels = np.rint(digits.images[index] * 255 / 16).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "L").resize((64, 64), Image.NEAREST).save(buffer, "PNG")
    return buffer.getvalue(), int(digits.target[index])


def road_png(width: int = 640, height: int = 360, seed: int = 3) -> bytes:
    from orinkit.lanes.draw import road_image

    return road_image(width, height, seed=seed)


def artifacts_folder() -> Path | None:
    """Where CI keeps screenshots (env ORINKIT_ARTIFACTS), or None."""
    folder = os.environ.get("ORINKIT_ARTIFACTS")
    if not folder:
        return None
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path
