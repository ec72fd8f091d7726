"""The "Try" panel's library (orinkit.ui.tryout) against a real tritonserver: one repository holding the MNIST-style
ensemble of examples/mnist_ensemble.py, the lane ensemble, and small Python models written here, so one server."""

from __future__ import annotations

import base64
import importlib
import io
import json
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from ui_fixtures import RAW_PIXELS, UINT8_CLASSIFIER, copy_ui_models, solid_png

from orinkit.client import Client
from orinkit.ui.tryout import (
    BadImageError,
    ImageInput,
    NotAnImageModelError,
    TryError,
    TryResult,
    UnknownOutputError,
    image_input,
    try_image,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DIGIT_LABELS = [f"digit {i}" for i in range(10)]

# Inverts a UINT8 image in whichever layout its config declares: the output is the input's own shape.
INVERT = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
            "INVERTED", 255 - pb_utils.get_input_tensor_by_name(r, "IMAGE").as_numpy())]) for r in requests]
'''
# The same in [0, 1] floats: an image output a style-transfer net could give.
INVERT_FLOAT = '''
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
            "INVERTED", (1 - pb_utils.get_input_tensor_by_name(r, "IMAGE").as_numpy() / 255).astype(np.float32))])
            for r in requests]
'''


def _mnist_example():
    """examples/mnist_ensemble.py as a module (examples/ is no package; it imports its _runner beside it)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module("mnist_ensemble")


@pytest.fixture(scope="module")
def digits():
    """The held-out digits and the classifier the example trains on the rest."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    example = _mnist_example()
    data = load_digits()
    x = data.images.astype(np.float32)[:, None]
    x_train, x_test, y_train, y_test = train_test_split(x, data.target, test_size=0.2, random_state=example.SEED,
                                                        stratify=data.target)
    return example, example.train(x_train, y_train), x_test, y_test


@pytest.fixture(scope="module")
def repository(tmp_path_factory, digits):
    import torch

    from orinkit.convert import export_torch
    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.model import build_lane_model, show_random_lanes
    from orinkit.lanes.postprocess import PostprocessOptions
    from orinkit.lanes.repository import build_lane_repository
    from orinkit.repo.add import add_model
    from orinkit.repo.options import ModelOptions, SequenceBatching
    from orinkit.repo.signature import TensorSpec

    example, model, x_test, _ = digits
    work = tmp_path_factory.mktemp("tryout")
    repo = work / "models"
    onnx = work / "digits.onnx"
    export_torch(model, [torch.from_numpy(x_test[:1])], onnx, input_names=["pixels"], output_names=["logits"],
                 dynamic_batch=True)
    example.build_repository(repo, onnx)  # mnist = digits_pre -> digits -> digits_top
    # The classifier fed its tensor directly, told by its config's parameters how the step pre-processes.
    add_model(repo, onnx, name="digits_direct", options=ModelOptions(parameters={
        "color_order": "GRAY", "scale": repr(16 / 255), "interpolation": "nearest"}))
    lane_model = show_random_lanes(build_lane_model("resnet18", random_weights=True))
    lane_onnx = export_lane_onnx(lane_model, work / "laneatt.onnx", dynamic_batch=True)
    # Random weights give few lanes above 0.5; a low threshold makes the comparison carry lanes.
    build_lane_repository(repo, lane_onnx, runtime="python-onnxruntime",
                          postprocess=PostprocessOptions(conf_threshold=0.05, nms_threshold=50.0, top_k=4))
    (work / "invert.py").write_text(INVERT)
    (work / "invert_float.py").write_text(INVERT_FLOAT)
    spec = TensorSpec.parse
    add_model(repo, work / "invert.py", name="invert", inputs=[spec("IMAGE:UINT8:3x-1x-1")],
              outputs=[spec("INVERTED:UINT8:3x-1x-1")], options=ModelOptions(max_batch_size=0))
    add_model(repo, work / "invert_float.py", name="invert_hwc", inputs=[spec("IMAGE:UINT8:24x32x3")],
              outputs=[spec("INVERTED:FP32:24x32x3")], options=ModelOptions(max_batch_size=2))
    add_model(repo, work / "invert.py", name="invert_stateful", inputs=[spec("IMAGE:UINT8:3x-1x-1")],
              outputs=[spec("INVERTED:UINT8:3x-1x-1")],
              options=ModelOptions(max_batch_size=1, sequence=SequenceBatching()))
    copy_ui_models(repo)  # colour_classifier, raw_digits: UINT8 [-1] inputs, as Triton's examples write them
    return repo


@pytest.fixture(scope="module")
def url(triton_server_factory, repository):
    return triton_server_factory(repository).command.grpc_url


@pytest.fixture(scope="module")
def configs(url):
    """Each model's config as the page reads it: get_model_config(as_json=True)["config"]."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    try:
        return {m["name"]: client.get_model_config(m["name"], as_json=True)["config"]
                for m in client.get_model_repository_index(as_json=True)["models"]}
    finally:
        client.close()


def _run(url, configs, model, image, **options):
    with Client(url, model) as client:
        return try_image(client, image, config=configs[model], **options)


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def _png_header(width: int, height: int) -> bytes:
    """A PNG claiming ``width`` x ``height`` RGB with 16 bytes of pixel data (Pillow's open() reads up to the first
    IDAT chunk): decoding it fails, so a size refusal proves the check came first."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(16)))


def _json_ready(result: TryResult) -> dict:
    data = result.to_json()
    json.dumps(data, allow_nan=False)  # JSON has no NaN: every number must be finite or null
    return data


def _well_classified(digits):
    """A held-out digit the in-process model gets right, with its label."""
    import torch

    _, model, x_test, y_test = digits
    with torch.no_grad():
        predicted = model(torch.from_numpy(x_test)).argmax(1).numpy()
    index = int(np.flatnonzero(predicted == y_test)[0])
    return x_test[index, 0], int(y_test[index])


# --- against the server -----------------------------------------------------------------------------------------


def test_a_digit_through_the_mnist_ensemble_gives_its_class_with_labels(url, configs, digits):
    example = digits[0]
    digit, label = _well_classified(digits)
    spec = image_input(configs["mnist"])
    assert spec is not None and spec.mode == "bytes" and spec.dtype == "BYTES"
    result = _run(url, configs, "mnist", example.encode(digit, "PNG"), labels={"class_ids": DIGIT_LABELS})
    data = _json_ready(result)
    assert data["kind"] == "classes" and data["model"] == "mnist" and data["latency_ms"] > 0
    top = data["answer"]["top"]
    assert len(top) == 3 and top[0]["index"] == label and top[0]["label"] == f"digit {label}"
    assert [t["score"] for t in top] == sorted((t["score"] for t in top), reverse=True)
    assert {o["name"]: o["dtype"] for o in data["outputs"]} == {"scores": "FP32", "class_ids": "INT32"}
    for name, array in result.arrays.items():
        np.testing.assert_array_equal(np.load(io.BytesIO(result.npy(name))), array)


def test_the_classifier_fed_directly_follows_its_configs_preprocessing(url, configs, digits):
    example = digits[0]
    digit, label = _well_classified(digits)
    spec = image_input(configs["digits_direct"])
    assert (spec.mode, spec.layout, spec.channels, spec.width, spec.height) == ("tensor", "CHW", 1, 8, 8)
    assert (spec.color_order, spec.interpolation, spec.assumed) == ("GRAY", "nearest", False)
    direct = _run(url, configs, "digits_direct", example.encode(digit, "PNG"))
    ensemble = _run(url, configs, "mnist", example.encode(digit, "PNG"))
    assert direct.kind == "classes" and direct.answer["top"][0]["index"] == label
    assert any("softmax applied" in note for note in direct.notes)
    # The same pixels as the ensemble's step makes, so the same probabilities as its TopK.
    assert direct.answer["top"][0]["score"] == pytest.approx(ensemble.answer["top"][0]["score"], abs=1e-5)


def test_a_tensor_model_without_parameters_says_what_it_assumed(url, configs, digits):
    example = digits[0]
    digit, _ = _well_classified(digits)
    assert image_input(configs["digits"]).assumed
    result = _run(url, configs, "digits", example.encode(digit, "JPEG"))
    assert result.kind == "classes" and len(result.answer["top"]) == 5
    assert any("assumed" in note and "GRAY" in note and "1/255" in note for note in result.notes)


def test_lanes_from_the_lane_ensemble_match_the_lane_detector(url, configs):
    from orinkit.lanes.client import LaneDetector
    from orinkit.lanes.draw import road_image

    image = road_image(1280, 720, seed=0)
    with LaneDetector(url) as detect:
        expected = detect(image)
    result = _run(url, configs, "lane_detection", image)
    data = _json_ready(result)
    assert data["kind"] == "lanes"
    answer = data["answer"]
    assert (answer["width"], answer["height"]) == (1280, 720)
    assert len(answer["lanes"]) == len(expected) > 0
    for lane, reference in zip(answer["lanes"], expected):
        assert lane["score"] == pytest.approx(reference.score, abs=1e-6)
        np.testing.assert_allclose(np.array(lane["points"]), reference.points, atol=1e-4)
    padded = np.load(io.BytesIO(result.npy("lanes")))
    np.testing.assert_array_equal(padded, result.arrays["lanes"])  # NaN padding survives the download
    assert np.isnan(padded).any()


def test_the_lane_model_alone_is_summarised_as_a_tensor(url, configs):
    from orinkit.lanes.draw import road_image

    spec = image_input(configs["lane_model"])
    assert (spec.mode, spec.layout, spec.channels, spec.width, spec.height) == ("tensor", "CHW", 3, 640, 360)
    result = _run(url, configs, "lane_model", road_image(800, 450, seed=1))
    data = _json_ready(result)
    assert data["kind"] == "tensor"
    [summary] = data["answer"]["outputs"]
    assert summary["name"] == "proposals" and summary["dtype"] == "FP32"
    declared = [int(d) for d in configs["lane_model"]["output"][0]["dims"]]  # [-1, 77]: the count is dynamic
    assert len(summary["shape"]) == len(declared) and all(d in (-1, s) for d, s in zip(declared, summary["shape"]))
    assert summary["shape"][1] == 77 and summary["shape"][0] > 0 and len(summary["first"]) == 8
    assert summary["min"] <= summary["mean"] <= summary["max"]
    assert any("assumed" in note and "RGB" in note for note in data["notes"])


def test_an_image_model_gives_the_inverted_picture(url, configs):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(30, 40, 3), dtype=np.uint8)
    spec = image_input(configs["invert"])
    assert (spec.width, spec.height, spec.dtype, spec.scale) == (None, None, "UINT8", 1.0)
    result = _run(url, configs, "invert", _png(pixels))
    data = _json_ready(result)
    assert data["kind"] == "image" and (data["answer"]["width"], data["answer"]["height"]) == (40, 30)
    shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(data["answer"]["png_base64"]))))
    np.testing.assert_array_equal(shown, 255 - pixels)  # fed at its own size (dynamic dims), so no resizing
    assert any("dynamic" in note for note in data["notes"])


def test_an_hwc_model_with_float_output_is_resized_and_shown(url, configs):
    pixels = np.full((48, 64, 3), (10, 120, 250), dtype=np.uint8)
    spec = image_input(configs["invert_hwc"])
    assert (spec.layout, spec.width, spec.height, spec.channels) == ("HWC", 32, 24, 3)
    result = _run(url, configs, "invert_hwc", _png(pixels))
    assert result.kind == "image" and (result.answer["width"], result.answer["height"]) == (32, 24)
    shown = np.asarray(Image.open(io.BytesIO(base64.b64decode(result.answer["png_base64"]))))
    np.testing.assert_array_equal(shown, np.full((24, 32, 3), (245, 135, 5), np.uint8))
    assert any("[0, 1]" in note for note in result.notes)


def test_a_stateful_image_model_runs_as_a_sequence_of_one(url, configs):
    pixels = np.zeros((9, 11, 3), np.uint8)
    result = _run(url, configs, "invert_stateful", _png(pixels))
    assert result.kind == "image" and any("sequence of one" in note for note in result.notes)
    np.testing.assert_array_equal(result.arrays["INVERTED"], np.full((3, 9, 11), 255, np.uint8))


def test_a_model_that_takes_no_image_is_refused(url, configs, digits):
    example = digits[0]
    assert image_input(configs["digits_top"]) is None  # LOGITS FP32 [10]
    assert image_input(configs["lane_postprocess"]) is None  # two inputs
    with pytest.raises(NotAnImageModelError, match="'digits_top' takes no image") as caught:
        _run(url, configs, "digits_top", example.encode(np.zeros((8, 8)), "PNG"))
    assert caught.value.exit_code == 4 and "\n" not in str(caught.value) and caught.value.hint


COLOURS = {"red": (220, 30, 20), "green": (10, 200, 40), "blue": (30, 20, 230)}


def _encoded(colour, format_name: str) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(buffer, format_name)
    return buffer.getvalue()


@pytest.mark.parametrize("format_name", ["PNG", "JPEG", "BMP", "GIF", "WEBP"])
def test_a_classifier_taking_the_encoded_file_as_uint8_gets_its_class_and_label(url, configs, repository,
                                                                                format_name):
    from orinkit.ui.labels import read_labels

    config = configs[UINT8_CLASSIFIER]
    spec = image_input(config)
    assert (spec.mode, spec.dtype, spec.input, spec.leading_axis) == ("bytes", "UINT8", "INPUT_0", False)
    labels = read_labels(repository, UINT8_CLASSIFIER, config)
    assert labels == {"OUTPUT_0": ["red", "green", "blue"]}
    for name, colour in COLOURS.items():
        result = _run(url, configs, UINT8_CLASSIFIER, _encoded(colour, format_name), labels=labels)
        data = _json_ready(result)
        assert data["kind"] == "classes" and data["answer"]["top"][0]["label"] == name, data
        assert any("np.fromfile" in note for note in data["notes"])


def test_a_uint8_input_that_wants_something_else_is_refused_saying_so(url, configs):
    assert image_input(configs[RAW_PIXELS]).dtype == "UINT8"  # the config alone cannot tell
    with pytest.raises(NotAnImageModelError) as caught:
        _run(url, configs, RAW_PIXELS, solid_png((0, 0, 0)))
    message = str(caught.value)
    assert f"'{RAW_PIXELS}' failed on the PNG file the page sent to its UINT8 [-1] input 'PIXELS'" in message
    assert "does not take an encoded image" in message and "expected 784 raw pixels" in message
    assert "\n" not in message and caught.value.exit_code == 4 and "Client" in caught.value.hint


@pytest.mark.parametrize("model", [UINT8_CLASSIFIER, "mnist"])
def test_a_file_the_model_decodes_itself_must_be_a_format_every_decoder_reads(url, configs, model):
    # Pillow reads TIFF, a server-side decoder (OpenCV, DALI's, a hand-written one) may not: refused before sending.
    with pytest.raises(BadImageError, match="is a TIFF file, but .* PNG, JPEG, BMP, GIF, WebP") as caught:
        _run(url, configs, model, _encoded((0, 0, 0), "TIFF"))
    assert "PNG or JPEG" in caught.value.hint


@pytest.mark.parametrize("model", ["mnist", "digits_direct"])
def test_corrupt_bytes_are_a_bad_image(url, configs, model):
    whole = _png(np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3))
    for data in (b"certainly not an image", whole[: len(whole) // 2], b""):
        with pytest.raises(BadImageError) as caught:
            _run(url, configs, model, data)
        assert isinstance(caught.value, TryError) and "\n" not in str(caught.value) and caught.value.hint


# Pillow warns (and goes on) between its MAX_IMAGE_PIXELS and twice that; the size check refuses right after.
@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_too_many_pixels_or_bytes_are_refused_before_decoding(url, configs):
    # 100 MP: over the 40 MP limit, under Pillow's bomb threshold (2 x 89 MP): the header's size is checked.
    with pytest.raises(BadImageError, match="10000x10000 .*megapixels"):
        _run(url, configs, "mnist", _png_header(10_000, 10_000))
    # Far past Pillow's threshold: it refuses at open(), which is reported the same way.
    with pytest.raises(BadImageError, match="megapixels"):
        _run(url, configs, "digits_direct", _png_header(100_000, 100_000))
    with pytest.raises(BadImageError, match="megapixels"):
        _run(url, configs, "mnist", _png(np.zeros((40, 50), np.uint8)), max_pixels=1000)
    with pytest.raises(BadImageError, match="MiB"):
        _run(url, configs, "mnist", _png(np.zeros((40, 50), np.uint8)), max_bytes=10)


def test_npy_of_an_unknown_output_is_a_key_error(url, configs):
    result = _run(url, configs, "invert", _png(np.zeros((4, 4, 3), np.uint8)))
    with pytest.raises(UnknownOutputError, match="no output 'nope'"):
        result.npy("nope")
    with pytest.raises(KeyError):
        result.npy("nope")


# --- without a server ---------------------------------------------------------------------------------------------


def _config(dims, data_type="TYPE_FP32", max_batch_size=4, **extra):
    return {"name": "m", "max_batch_size": max_batch_size,
            "input": [{"name": "x", "data_type": data_type, "dims": [str(d) for d in dims], **extra}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": ["10"]}]}


@pytest.mark.parametrize("config, expected", [
    (_config([1], "TYPE_STRING"), ("bytes", None, None, None, None)),
    (_config([-1], "TYPE_STRING", max_batch_size=0), ("bytes", None, None, None, None)),
    (_config([3, 224, 224]), ("tensor", "CHW", 224, 224, 3)),
    (_config([224, 320, 3], "TYPE_UINT8"), ("tensor", "HWC", 320, 224, 3)),
    (_config([28, 28, 1], "TYPE_FP16"), ("tensor", "HWC", 28, 28, 1)),
    (_config([1, 3, 360, 640], max_batch_size=0), ("tensor", "CHW", 640, 360, 3)),
    (_config([3, -1, -1]), ("tensor", "CHW", None, None, 3)),
    (_config([3, 8, 3], format="FORMAT_NHWC"), ("tensor", "HWC", 8, 3, 3)),
    (_config([-1], "TYPE_UINT8"), ("bytes", None, None, None, None)),
    (_config([-1], "TYPE_UINT8", max_batch_size=0), ("bytes", None, None, None, None)),
    (_config([1, -1], "TYPE_UINT8", max_batch_size=0), ("bytes", None, None, None, None)),
])
def test_image_input_recognises(config, expected):
    spec = image_input(config)
    assert (spec.mode, spec.layout, spec.width, spec.height, spec.channels) == expected
    # An axis of 1 before the image's or the bytes' (a model without batching) is fed as such.
    assert spec.leading_axis == (len(config["input"][0]["dims"]) in (2, 4))
    assert json.loads(json.dumps(spec.to_json()))["input"] == "x"


@pytest.mark.parametrize("config", [
    _config([2], "TYPE_STRING"),
    _config([3, 224, 224], "TYPE_INT32"),
    _config([4, 224, 224]),
    _config([224, 224]),
    _config([1, 3, 224, 224], max_batch_size=4),
    _config([1, -1], "TYPE_UINT8", max_batch_size=4),
    _config([2, -1], "TYPE_UINT8", max_batch_size=0),
    _config([-1], "TYPE_INT8"),
    _config([-1]),
    {**_config([3, 8, 8]), "input": [*_config([3, 8, 8])["input"], {"name": "z", "data_type": "TYPE_FP32",
                                                                     "dims": ["1"]}]},
    {**_config([1], "TYPE_STRING"), "model_transaction_policy": {"decoupled": True}},
])
def test_image_input_refuses(config):
    assert image_input(config) is None


def test_encoded_formats_are_told_by_their_first_bytes():
    from orinkit.ui.tryout_images import sniff

    for format_name, expected in (("PNG", "PNG"), ("JPEG", "JPEG"), ("BMP", "BMP"), ("GIF", "GIF"),
                                  ("WEBP", "WebP"), ("TIFF", None), ("PPM", None), ("ICO", None)):
        assert sniff(_encoded((1, 2, 3), format_name)) == expected, format_name
    assert sniff(b"") is None and sniff(b"BM") is None and sniff(b"RIFF\0\0\0\0WAVE") is None


def test_control_and_optional_inputs_do_not_count():
    config = _config([1], "TYPE_STRING")
    config["input"] += [{"name": "START", "data_type": "TYPE_INT32", "dims": ["1"]},
                        {"name": "MASK", "data_type": "TYPE_FP32", "dims": ["4"], "optional": True}]
    start = {"name": "START", "control": [{"kind": "CONTROL_SEQUENCE_START"}]}
    config["sequence_batching"] = {"control_input": [start]}
    assert image_input(config).input == "x"


def test_preprocessing_parameters_are_read_and_bad_ones_said():
    config = _config([3, 4, 4])
    config["parameters"] = {"color_order": {"string_value": "BGR"}, "mean": {"string_value": "0.485,0.456,0.406"},
                            "std": {"string_value": "0,1,1"}, "EXECUTION_ENV_PATH": {"string_value": "x"}}
    spec = image_input(config)
    assert (spec.color_order, spec.mean, spec.std, spec.assumed) == ("BGR", (0.485, 0.456, 0.406), (1, 1, 1), False)
    assert any("std '0,1,1'" in note for note in spec.notes)


def test_tensors_are_made_as_the_image_step_makes_them():
    from orinkit.repo.pymodels import image_preprocess
    from orinkit.ui import tryout_images

    picture = np.random.default_rng(1).integers(0, 256, size=(50, 70, 3), dtype=np.uint8)
    data = _png(picture)
    parameters = {"width": "32", "height": "20", "color_order": "BGR", "scale": repr(1 / 255),
                  "mean": "0.1,0.2,0.3", "std": "0.5,0.6,0.7"}
    config = _config([3, 20, 32])
    config["parameters"] = {k: {"string_value": v} for k, v in parameters.items()}
    spec = image_input(config)
    with Image.open(io.BytesIO(data)) as opened:
        ours = tryout_images.to_tensor(opened, spec, BadImageError)
    step, _ = image_preprocess.preprocess(data, image_preprocess.options_from_parameters(config["parameters"]))
    np.testing.assert_allclose(ours, step, atol=1e-6)
    hwc = ImageInput("x", "tensor", "HWC", 32, 20, 3, "FP32", "RGB", 1 / 255, (0.0,) * 3, (1.0,) * 3, "bilinear")
    with Image.open(io.BytesIO(data)) as opened:
        assert tryout_images.to_tensor(opened, hwc, BadImageError).shape == (20, 32, 3)


def _result(**arrays) -> TryResult:
    return TryResult("m", "tensor", 1.0, {}, arrays, [])


def test_answers_by_kind_without_a_server():
    from orinkit.ui.tryout import _read

    spec = image_input(_config([1], "TYPE_STRING"))
    notes = []
    kind, answer = _read({"probs": np.array([0.1, 0.7, 0.2], np.float32)}, spec, (10, 10), None, notes, {})
    assert kind == "classes" and answer["top"][0]["index"] == 1 and answer["top"][0]["score"] == pytest.approx(0.7)
    assert any("no softmax" in note for note in notes)
    notes = []
    kind, answer = _read({"y": np.array([np.nan, 1.0, np.inf, -2.0], np.float32)}, spec, (10, 10), None, notes, {})
    assert kind == "tensor" and answer["outputs"][0]["first"] == [None, 1.0, None, -2.0]
    assert answer["outputs"][0]["min"] == -2.0 and any("NaN or infinite" in note for note in notes)
    json.dumps(answer, allow_nan=False)
    kind, answer = _read({"SCORES": np.array([0.9, 0.05], np.float32), "CLASS_IDS": np.array([7, 2], np.int32),
                          "LABELS": np.array([b"seven", b"two"], object)}, spec, (10, 10), None, [], {})
    assert kind == "classes" and answer["top"] == [{"index": 7, "score": pytest.approx(0.9), "label": "seven"},
                                                    {"index": 2, "score": pytest.approx(0.05), "label": "two"}]


def test_npy_saves_bytes_outputs_without_pickle():
    result = _result(LABELS=np.array([b"cat", b"dog"], dtype=object), X=np.arange(6, dtype=np.float16).reshape(2, 3))
    assert np.load(io.BytesIO(result.npy("LABELS"))).tolist() == [b"cat", b"dog"]
    np.testing.assert_array_equal(np.load(io.BytesIO(result.npy("X"))), result.arrays["X"])
    assert {o["name"]: o["dtype"] for o in result.to_json()["outputs"]} == {"LABELS": "BYTES", "X": "FP16"}
