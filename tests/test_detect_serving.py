"""The detection ensemble end to end: one real tritonserver (orinkit hidden from its Python) serving a real trained
YOLOv8n (nudenet's, fetched from PyPI) laid out by ``edge-repo add-detector``, and a graph with NMS inside (fixed
batch of 1), on real photos and real video frames, against the same pipeline run in process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from detect_graphs import export_graph
from detector_models import CARPHONE, YOLOV8N, fetch, photos_bgr, video_frames_bgr
from google.protobuf import json_format
from PIL import Image

from orinkit.cli.repo import main as repo_cli
from orinkit.client import Client, InvalidInputError
from orinkit.detect.client import RemoteDetector, encode
from orinkit.detect.detector import Detector
from orinkit.detect.heads import Head
from orinkit.detect.postprocess import NmsOptions, postprocess
from orinkit.detect.preprocess import Preprocess, prepare
from orinkit.detect.repository import build_detection_repository, resolve_head
from orinkit.repo.check import check_repository
from orinkit.repo.pbtxt import read_config
from orinkit.repo.pymodels import image_preprocess as ip

CONF = 0.1  # below predict's 0.25: more boxes to compare on every image


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    work = tmp_path_factory.mktemp("detect-serving")
    return {"yolo": fetch(YOLOV8N), "graph": export_graph("efficient_nms", work)}


@pytest.fixture(scope="module")
def repository(models, tmp_path_factory):
    repo = tmp_path_factory.mktemp("detect-repo") / "models"
    result = CliRunner().invoke(repo_cli, ["add-detector", str(models["yolo"]), "--repo", str(repo), "--create",
                                           "--name", "yolo", "--conf", str(CONF), "--runtime", "python-onnxruntime"])
    assert result.exit_code == 0, result.output
    assert "placed the detection ensemble yolo" in result.output
    build_detection_repository(repo, models["graph"], name="graph", runtime="python-onnxruntime")
    return repo


@pytest.fixture(scope="module")
def url(triton_server_factory, repository, tmp_path_factory):
    """The server's Python cannot import orinkit, as on an Orin: every model.py carries what it needs."""
    hidden = tmp_path_factory.mktemp("hidden")
    (hidden / "orinkit").mkdir()
    (hidden / "orinkit" / "__init__.py").write_text("raise ImportError('orinkit is hidden from the server')\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hidden), os.environ.get("PYTHONPATH")])))
        server = triton_server_factory(repository)
    return server.command.grpc_url


@pytest.fixture(scope="module")
def frames():
    """Real video frames of a person (the YOLOv8n finds a face on each) and scikit-learn's two real photos."""
    return video_frames_bgr(CARPHONE, every=20, limit=6) + photos_bgr()


def png(bgr: np.ndarray) -> bytes:
    return encode(bgr, "png")


def config_parameters(repository, model: str) -> dict:
    config = json.loads(json_format.MessageToJson(read_config(repository / model / "config.pbtxt"),
                                                  preserving_proto_field_name=True))
    return config.get("parameters", {})


def in_process(repository, name: str, model_path, data: bytes):
    """The ensemble's own steps run here: the image step's code and config, onnxruntime, orinkit's postprocess."""
    import onnxruntime

    from orinkit.detect.triton_postprocess import settings_from_parameters, transforms_from

    options = ip.options_from_parameters(config_parameters(repository, f"{name}_preprocess"))
    pixels, size = ip.preprocess(data, options)
    head, preprocess, nms = settings_from_parameters(config_parameters(repository, f"{name}_postprocess"))
    session = onnxruntime.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    outputs = dict(zip(head.outputs, session.run(list(head.outputs), {head.input_name: pixels[None]})))
    return postprocess(head, outputs, transforms_from(ip.transforms(np.array([size]), options), preprocess), nms)[0]


def assert_same(found, expected, *, box_px: float, score: float) -> None:
    assert len(found) == len(expected)
    np.testing.assert_array_equal(found.class_id, expected.class_id)
    np.testing.assert_allclose(found.xyxy, expected.xyxy, atol=box_px)
    np.testing.assert_allclose(found.score, expected.score, atol=score)


# --- the layout ---------------------------------------------------------------------------------------------


def test_the_command_lays_out_a_repository_that_check_passes(repository):
    assert check_repository(repository, python=sys.executable) == []
    result = CliRunner().invoke(repo_cli, ["check", str(repository), "--python", sys.executable])
    assert result.exit_code == 0, result.output
    ensemble = read_config(repository / "yolo" / "config.pbtxt")
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == ["yolo_preprocess", "yolo_model",
                                                                       "yolo_postprocess"]
    assert [(t.name, list(t.dims)) for t in ensemble.output] == [("boxes", [300, 4]), ("scores", [300]),
                                                                 ("classes", [300]), ("count", [1])]
    assert ensemble.max_batch_size == 4
    names = json.loads(ensemble.parameters["names"].string_value)
    assert len(names) == 18 and names[1] == "FACE_FEMALE" and names[12] == "FACE_MALE"
    pre = config_parameters(repository, "yolo_preprocess")
    assert {k: pre[k]["string_value"] for k in ("resize", "centre", "pad", "width", "height", "color_order")} == {
        "resize": "letterbox", "centre": "true", "pad": "114", "width": "320", "height": "320", "color_order": "RGB"}
    # The graph takes a fixed batch of 1: its ensemble answers one image a request, full shapes.
    graph = read_config(repository / "graph" / "config.pbtxt")
    assert graph.max_batch_size == 0 and list(graph.input[0].dims) == [1, 1]
    assert json.loads(config_parameters(repository, "graph_postprocess")["head"]["string_value"])["kind"] == \
        "efficient_nms"


def test_a_failed_command_leaves_nothing(models, repository, tmp_path):
    runner = CliRunner()
    labels = tmp_path / "labels.txt"
    labels.write_text("person\ncar\ndog\n")
    fresh = tmp_path / "fresh"
    result = runner.invoke(repo_cli, ["add-detector", str(models["yolo"]), "--repo", str(fresh), "--create",
                                      "--labels", str(labels)])
    assert result.exit_code == 4
    assert "3 class names but the model predicts 18 classes" in result.output
    assert len(result.output.strip().splitlines()) <= 2 and "Traceback" not in result.output
    assert not fresh.exists()
    before = sorted(p.name for p in repository.iterdir())
    clash = runner.invoke(repo_cli, ["add-detector", str(models["graph"]), "--repo", str(repository), "--name",
                                     "yolo", "--runtime", "python-onnxruntime"])
    assert clash.exit_code == 4 and "already exist" in clash.output
    assert sorted(p.name for p in repository.iterdir()) == before


def _plan(folder, outputs, nms=None):
    """A plan file and the manifest edge-convert writes beside it (the engine itself cannot be built here)."""
    plan = folder / "model.plan"
    plan.write_bytes(b"engine bytes")
    tensors = [{"name": n, "dtype": d, "shape": s} for n, d, s in outputs]
    image = {"name": "images", "dtype": "FP32", "shape": [-1, 3, -1, -1]}
    profile = {"images": {"min": [1, 3, 320, 320], "opt": [1, 3, 640, 640], "max": [4, 3, 640, 640]}}
    manifest = {"inputs": [image], "outputs": tensors, "profiles": [profile], "format_version": 1, "nms": nms}
    (folder / "model.plan.manifest.json").write_text(json.dumps(manifest))
    return plan


def test_a_plan_with_nms_inside_is_served_as_its_boxes(tmp_path):
    """edge-convert --nms records NMS in the plan's manifest: the post step then only maps boxes back."""
    plan = _plan(tmp_path, [("num_dets", "INT32", [-1, 1]), ("det_boxes", "FP32", [-1, 100, 4]),
                            ("det_scores", "FP32", [-1, 100]), ("det_classes", "INT32", [-1, 100])],
                 nms={"method": "EfficientNMS_TRT", "head": "yolov8", "score_threshold": 0.25,
                      "iou_threshold": 0.7, "max_output_boxes": 100, "num_classes": 3})
    head = resolve_head(plan, labels=["person", "car", "dog"])
    assert head.kind == "efficient_nms" and not head.needs_nms and head.input_size == (640, 640)
    assert head.outputs == ("num_dets", "det_boxes", "det_scores", "det_classes")
    assert head.names == ("person", "car", "dog")


def test_a_plan_without_nms_is_recognized_from_its_manifest(tmp_path):
    plan = _plan(tmp_path, [("output0", "FP32", [-1, 7, -1])])
    head = resolve_head(plan, head="yolov8", labels=["person", "car", "dog"])
    assert (head.kind, head.input_size, head.outputs, head.num_classes) == ("yolov8", (640, 640), ("output0",), 3)
    from orinkit.detect.errors import LabelsError

    with pytest.raises(LabelsError, match="2 class names but the model predicts 3"):
        resolve_head(plan, head="yolov8", labels=["person", "car"])


# --- the image step's letterbox -----------------------------------------------------------------------------


@pytest.mark.parametrize("size, centre", [((320, 320), True), ((640, 640), True), ((416, 416), False),
                                          ((384, 640), True)])
def test_the_image_step_letterboxes_as_the_detector_prepares(size, centre):
    bgr = photos_bgr()[0]
    options = ip.options_from_parameters({k: {"string_value": v} for k, v in {
        "width": str(size[1]), "height": str(size[0]), "resize": "letterbox", "centre": str(centre).lower()}.items()})
    tensor, original = ip.preprocess(png(bgr), options)
    expected, transform = prepare(bgr, Preprocess(size, centre=centre))
    assert original == bgr.shape[:2]
    # Pillow's transform truncates where the Detector's cv2-style bilinear rounds: one level at most; the padding
    # and the unscaled 640 case are exact.
    assert np.abs(tensor - expected).max() <= 1 / 255 + 1e-6
    scale_x, scale_y, pad_x, pad_y, width, height = ip.transforms(np.array([original]), options)[0]
    assert (pad_x, pad_y, width, height) == (transform.pad_x, transform.pad_y, *transform.source_size)
    assert scale_x == pytest.approx(transform.scale, rel=1e-6)
    assert scale_y == pytest.approx(transform.scale_y or transform.scale, rel=1e-6)


# --- served ---------------------------------------------------------------------------------------------------


def test_the_ensemble_answers_what_its_steps_give_in_process(url, repository, models, frames):
    """The same pixels (the image step's own code), the same model and orinkit's decode + NMS: the same boxes."""
    total = 0
    with RemoteDetector(url, "yolo", frame_format="png") as remote:
        for frame in frames:
            data = png(frame)
            expected = in_process(repository, "yolo", models["yolo"], data)
            assert_same(remote(data), expected, box_px=0.01, score=1e-4)
            total += len(expected)
    assert total >= 6, "a face on every video frame"


def test_the_ensemble_matches_the_in_process_detector(url, models, frames):
    """Detector letterboxes with cv2's arithmetic (numpy here, no cv2 installed), the server step with Pillow's
    transform: pixels within one level, so boxes and scores agree closely, not bit for bit. Where no resize is
    needed (a crop at the model's scale) they agree exactly."""
    local = Detector(models["yolo"], options=NmsOptions(conf=CONF))
    found = 0
    with RemoteDetector(url, "yolo", frame_format="png") as remote:
        photo = photos_bgr()[0][100:300, 200:500]  # 300x200: the YOLOv8n takes it at scale 1.07
        # A frame already at the model's scale (320 wide for a 320x320 input): no resize on either side.
        native = np.asarray(Image.fromarray(frames[0]).resize((320, 262), Image.Resampling.BICUBIC))
        served, expected = remote(native), local(native)
        assert len(expected) >= 1
        assert_same(served, expected, box_px=1e-3, score=1e-5)
        for image in [*frames, photo]:
            served, expected = remote(image), local(image)
            assert_same(served, expected, box_px=1.0, score=0.03)
            found += len(served)
    assert found >= 6


def test_names_come_back_through_remote_detector_and_client(url, models, frames):
    head_names = Detector(models["yolo"]).head.names
    with RemoteDetector(url, "yolo") as remote:
        faces = remote(frames[0])
        assert remote.names == head_names
    assert len(faces) >= 1 and set(faces.class_name) <= {"FACE_FEMALE", "FACE_MALE"}
    with Client(url, "yolo") as client:
        assert json.loads(client.info.parameters["names"]) == list(head_names)
        result = client(png(frames[0]))
    count = int(result["count"][0])
    assert count == len(faces) and result["boxes"].shape == (300, 4)
    assert (result["classes"][count:] == -1).all() and (result["scores"][count:] == 0).all()
    np.testing.assert_allclose(result["boxes"][:count], faces.xyxy, atol=1.0)  # JPEG there, PNG here


def test_batches_and_a_fixed_batch_ensemble(url, repository, models, frames):
    images = [png(frame) for frame in frames[:5]]
    with RemoteDetector(url, "yolo") as remote:
        one_by_one = [remote(image) for image in images]
        batched = remote.batch(images)  # 4 + 1 requests: the ensemble's max_batch_size is 4
    for single, many in zip(one_by_one, batched):
        assert_same(many, single, box_px=1e-3, score=1e-5)
    # NMS inside the graph: the post step only maps boxes back; one image a request.
    with RemoteDetector(url, "graph", frame_format="png") as remote:
        photos = photos_bgr()
        served = remote.batch(photos)
        for photo, found in zip(photos, served):
            expected = in_process(repository, "graph", models["graph"], png(photo))
            assert len(found) > 0
            assert_same(found, expected, box_px=0.01, score=1e-4)
            assert (found.xyxy[:, 2] <= photo.shape[1]).all() and (found.xyxy[:, 3] <= photo.shape[0]).all()


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _png16_gray(gray8: np.ndarray) -> bytes:
    """A real 16-bit grayscale PNG (the 8-bit frame times 257, as a 16-bit camera gives it)."""
    return _png_bytes(Image.fromarray(gray8.astype(np.uint16) * 257))


@pytest.mark.parametrize("kind", ["grayscale", "rgba", "png16"])
def test_convertible_images_are_converted_as_the_detector_converts_them(url, models, frames, kind):
    rgb = frames[0][:, :, ::-1]
    gray = np.asarray(Image.fromarray(np.ascontiguousarray(rgb)).convert("L"))
    data = {"grayscale": lambda: _png_bytes(Image.fromarray(gray)),
            "rgba": lambda: _png_bytes(Image.fromarray(np.dstack([rgb, np.full(gray.shape, 128, np.uint8)]))),
            "png16": lambda: _png16_gray(gray)}[kind]()
    if kind == "png16":
        assert Image.open(io.BytesIO(data)).mode.startswith("I")
    local = Detector(models["yolo"], options=NmsOptions(conf=CONF))
    with Client(url, "yolo") as client:
        result = client(data)
    with RemoteDetector(url, "yolo") as remote:
        served = remote(data)
    assert int(result["count"][0]) == len(served) >= 1, "the face is still found"
    assert_same(served, local(data), box_px=1.0, score=0.03)


def _eight_k() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (7680, 4320), (90, 120, 150)).save(buffer, "JPEG", quality=50)
    return buffer.getvalue()


BAD = {
    "not an image": (lambda: b"GIF89a? no, just text pretending", "not an image Pillow can decode"),
    "1x1": (lambda: _png_bytes(Image.new("RGB", (1, 1), (255, 0, 0))), "below the step's smallest side of 8"),
    "8K": (_eight_k, "7680x4320 (33 megapixels), above the step's limit of 25"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_images_are_one_line_typed_errors_through_the_client(url, kind):
    make, words = BAD[kind]
    data = make()
    with Client(url, "yolo") as client:
        with pytest.raises(InvalidInputError) as raised:
            client(data)
        assert client(png(photos_bgr()[0]))["count"].shape == (1,), "the server still answers"
    message = str(raised.value)
    assert words in message and "\n" not in message


@pytest.mark.parametrize("kind", sorted(BAD))
def test_remote_detector_refuses_bad_images_before_sending(url, kind):
    with RemoteDetector(url, "yolo") as remote, pytest.raises(InvalidInputError) as raised:
        remote(BAD[kind][0]())
    assert "\n" not in str(raised.value)
    with pytest.raises(InvalidInputError, match="HxWx3"):
        encode(np.zeros((4, 4, 2), np.uint8))


def test_the_client_side_imports_without_torch_or_onnxruntime():
    code = ("import sys\nfor name in ('torch', 'onnxruntime', 'onnx'):\n    sys.modules[name] = None\n"
            "from orinkit.detect.client import RemoteDetector\nprint('ok')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_the_post_step_refuses_bad_parameters():
    from orinkit.detect.errors import DetectInputError
    from orinkit.detect.triton_postprocess import settings_from_parameters

    head = Head("yolov8", "images", (320, 320), ("output0",), 2, ("a", "b"))
    good = {"head": {"string_value": json.dumps(head.as_dict())},
            "preprocess": {"string_value": json.dumps(Preprocess((320, 320)).as_dict())},
            "conf": {"string_value": "0.3"}, "agnostic": {"string_value": "true"}}
    parsed_head, preprocess, options = settings_from_parameters(good)
    assert parsed_head == head and preprocess.size == (320, 320) and options == NmsOptions(conf=0.3, agnostic=True)
    for key, value in (("conf", "high"), ("max_det", "1.5"), ("agnostic", "maybe"), ("iou", "2")):
        with pytest.raises(DetectInputError, match=key):
            settings_from_parameters({**good, key: {"string_value": value}})
    with pytest.raises(DetectInputError, match="no parameter 'head'"):
        settings_from_parameters({})
