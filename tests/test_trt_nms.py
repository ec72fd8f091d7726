"""edge-convert --nms: NMS built into the TensorRT engine, on the per-release TensorRT test double
(tests/fake_tensorrt.py with fake_tensorrt_layers.py and fake_tensorrt_nms.py: TensorRT cannot run here).

The detectors are real trained models nobody here made (tests/detector_models.py: Ultralytics YOLOv8n from
nudenet, a YOLOv5 from clashroyalebuildabot), fed real video frames and real digit images; the engine's boxes are
compared with torchvision's batched NMS on onnxruntime's outputs of the same model, which shares no code with the
double or orinkit.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from detector_models import CARPHONE, YOLOV5_NUMBERS, YOLOV8N, fetch, video_frames_bgr
from fake_tensorrt import PLAN_MAGIC, install_fakes, make_fake_tensorrt
from torchvision.ops import batched_nms

from orinkit.convert.errors import NmsError
from orinkit.convert.shapes import InputProfile
from orinkit.convert.trt import BuildOptions, build_engine
from orinkit.convert.trt.nms import NmsSpec
from orinkit.convert.trt.runner import TrtRunner
from orinkit.formats.manifest import EngineManifest, NmsRecord, read_manifest, write_manifest
from orinkit.formats.tensors import TensorSpec

# Which way each release takes (orinkit.convert.trt.nms): the plugin up to 10.11, INMSLayer from 10.12 (where
# NVIDIA deprecates EfficientNMS_TRT v1) and on 11.x; 10.16 is the TensorRT of JetPack 7.2's 10.x line.
ROUTES = {"8.5.2.2": "EfficientNMS_TRT", "10.3.0": "EfficientNMS_TRT", "10.16.0": "INMSLayer", "11.4.1": "INMSLayer"}
V8_PROFILE = {"images": InputProfile((1, 3, 320, 320), (2, 3, 320, 320), (2, 3, 320, 320))}


@pytest.fixture(scope="module")
def yolov8n():
    return fetch(YOLOV8N)


@pytest.fixture(scope="module")
def frames() -> np.ndarray:
    """Two letterboxed frames of a real video of a person (the YOLOv8n finds ten boxes on each before NMS)."""
    from orinkit.detect.preprocess import Preprocess, prepare_batch

    batch, _ = prepare_batch(video_frames_bgr(CARPHONE, every=10, limit=2), Preprocess(size=(320, 320)))
    return batch


def raw_outputs(model, feeds: dict) -> list[np.ndarray]:
    import onnxruntime

    return onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, feeds)


def torchvision_nms(boxes_cxcywh: np.ndarray, scores: np.ndarray, spec: NmsSpec):
    """Ultralytics' way: each box's best class above the threshold, torchvision's (batched) NMS, max_det kept."""
    best, label = torch.from_numpy(scores).max(1)
    keep = best > spec.score_threshold
    xy, wh = torch.from_numpy(boxes_cxcywh[:, :2]), torch.from_numpy(boxes_cxcywh[:, 2:])
    boxes = torch.cat([xy - wh / 2, xy + wh / 2], 1)[keep]
    best, label = best[keep], label[keep]
    chosen = batched_nms(boxes, best, torch.zeros_like(label) if spec.class_agnostic else label,
                         spec.iou_threshold)[:spec.max_output_boxes]
    return boxes[chosen].numpy(), best[chosen].numpy(), label[chosen].numpy()


def assert_same_boxes(engine: dict, expected: list) -> int:
    found = 0
    for b, (boxes, scores, labels) in enumerate(expected):
        count = int(engine["num_dets"][b, 0])
        assert count == len(boxes), f"image {b}: {count} boxes from the engine, {len(boxes)} from torchvision"
        np.testing.assert_allclose(engine["det_boxes"][b, :count], boxes, atol=1e-3)
        np.testing.assert_allclose(engine["det_scores"][b, :count], scores, atol=1e-6)
        np.testing.assert_array_equal(engine["det_classes"][b, :count], labels)
        # EfficientNMS zeroes the rows past num_dets; the INMSLayer route must give the same
        assert not engine["det_boxes"][b, count:].any() and not engine["det_scores"][b, count:].any()
        found += count
    return found


def build(monkeypatch, version: str, model, spec: NmsSpec, profiles, **fake):
    trt = install_fakes(monkeypatch, version, **fake)
    result = build_engine(model, BuildOptions(profiles=profiles, fp16=False, workspace=1 << 28, nms=spec))
    return trt, result, json.loads(result.plan[len(PLAN_MAGIC):])


@pytest.mark.parametrize("version", list(ROUTES))
def test_yolov8_engine_answers_the_boxes_torchvision_keeps(monkeypatch, yolov8n, frames, version):
    spec = NmsSpec(head="yolov8", output="output0", num_classes=18, input_size=(320, 320))
    trt, result, plan = build(monkeypatch, version, yolov8n, spec, V8_PROFILE)
    kinds = [step["kind"] for step in plan["program"]]
    assert result.nms["method"] == ROUTES[version]
    assert ("PluginV2" in kinds) == (ROUTES[version] == "EfficientNMS_TRT")
    assert ("NMS" in kinds) == (ROUTES[version] == "INMSLayer")
    assert [(name, kind) for name, kind, _ in plan["outputs"]] == [
        ("num_dets", "INT32"), ("det_boxes", "FLOAT"), ("det_scores", "FLOAT"), ("det_classes", "INT32")]
    registry_lookup = "get_creator" if version.startswith(("10", "11")) else "get_plugin_creator"
    assert any(call[0] == registry_lookup for call in trt.calls)

    with TrtRunner(result.plan) as runner:
        engine = runner.infer({"images": frames})
    raw = raw_outputs(yolov8n, {"images": frames})[0]
    expected = [torchvision_nms(x[:4].T, x[4:].T, spec) for x in raw]
    found = assert_same_boxes(engine, expected)
    assert 0 < found < int((raw[:, 4:].max(1) > spec.score_threshold).sum()), "NMS had boxes to suppress"


@pytest.fixture(scope="module")
def digits() -> tuple:
    """The YOLOv5 head (fixed batch 10, raw grid maps beside the decoded rows) and ten real digit images (sklearn's
    8x8 digits, enlarged): at a 0.01 threshold it proposes 2 to 29 boxes an image, of several classes."""
    from sklearn.datasets import load_digits

    from orinkit.detect.preprocess import Preprocess, prepare_batch

    images = [np.repeat(np.kron(255 - im * 16, np.ones((6, 6)))[..., None], 3, 2).clip(0, 255).astype(np.uint8)
              for im in load_digits().images[:10]]
    return fetch(YOLOV5_NUMBERS), prepare_batch(images, Preprocess(size=(64, 64)))[0]


@pytest.mark.parametrize("version,agnostic", [("8.5.2.2", False), ("10.3.0", True), ("11.4.1", False),
                                              ("11.4.1", True)])
def test_yolov5_objectness_and_class_agnostic_nms(monkeypatch, digits, version, agnostic):
    model, images = digits
    spec = NmsSpec(head="yolov5", output="output", num_classes=10, input_size=(64, 64), score_threshold=0.01,
                   iou_threshold=0.45, class_agnostic=agnostic)
    _, result, plan = build(monkeypatch, version, model, spec, {})
    assert [name for name, _, _ in plan["outputs"]] == ["num_dets", "det_boxes", "det_scores", "det_classes"]
    with TrtRunner(result.plan) as runner:
        engine = runner.infer({"images": images})
    raw = raw_outputs(model, {"images": images})[0]
    expected = [torchvision_nms(x[:, :4], x[:, 5:] * x[:, 4:5], spec) for x in raw]
    found = assert_same_boxes(engine, expected)
    aware = NmsSpec(**{**spec.as_dict(), "class_agnostic": False})
    per_class = sum(len(torchvision_nms(x[:, :4], x[:, 5:] * x[:, 4:5], aware)[0]) for x in raw)
    assert 0 < found and (found < per_class if agnostic else found == per_class)


def test_yolox_grid_decode_in_the_engine(monkeypatch, tmp_path):
    """YOLOX's raw rows are cell offsets and log sizes: the engine must decode them as YOLOX's demo_postprocess
    does. The graph is an identity over a raw [1, 3549, 5 + 3] head (416 x 416, strides 8/16/32)."""
    size, strides, classes = (416, 416), (8, 16, 32), 3
    rows = sum(math.ceil(size[0] / s) * math.ceil(size[1] / s) for s in strides)
    head = onnx.helper.make_tensor_value_info("raw", onnx.TensorProto.FLOAT, [1, rows, 5 + classes])
    out = onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, rows, 5 + classes])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["raw"], ["output"], name="head")], "yolox",
                                   [head], [out])
    path = tmp_path / "yolox_raw.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), str(path))
    raw = np.zeros((1, rows, 5 + classes), np.float32)
    raw[0, :, 4:] = 0.02
    # two overlapping boxes of class 1 on neighbouring stride-8 cells, one of class 2 on a stride-32 cell
    for row, xy, logwh, obj, cls in ((52 * 10 + 20, (0.5, 0.5), (1.5, 1.2), 0.9, 1),
                                     (52 * 10 + 21, (0.2, 0.5), (1.5, 1.2), 0.8, 1),
                                     (52 * 52 + 26 * 26 + 13 * 4 + 7, (0.3, 0.6), (0.4, 0.1), 0.7, 2)):
        raw[0, row, :2], raw[0, row, 2:4], raw[0, row, 4], raw[0, row, 5 + cls] = xy, logwh, obj, 0.95
    spec = NmsSpec(head="yolox", output="output", num_classes=classes, input_size=size, strides=strides)
    _, result, _ = build(monkeypatch, "11.4.1", path, spec, {})
    with TrtRunner(result.plan) as runner:
        engine = runner.infer({"raw": raw})
    grid = np.concatenate([np.stack(np.meshgrid(np.arange(size[1] // s), np.arange(size[0] // s)), -1)
                           .reshape(-1, 2) for s in strides]).astype(np.float32)  # (x, y), x fastest
    step = np.concatenate([np.full(size[0] // s * size[1] // s, s) for s in strides]).astype(np.float32)[:, None]
    boxes = np.concatenate([(raw[0, :, :2] + grid) * step, np.exp(raw[0, :, 2:4]) * step], 1)
    expected = torchvision_nms(boxes, raw[0, :, 5:] * raw[0, :, 4:5], spec)
    assert assert_same_boxes(engine, [expected]) == 2  # the weaker class-1 box is suppressed


# ---------------------------------------------------------------- refusals and the double's strictness

def test_agnostic_on_8_5_is_refused_as_neither_way_can_do_it(monkeypatch, yolov8n):
    # release/8.5's EfficientNMS_TRT has no class_agnostic field (it would be ignored); 8.5 has no ICastLayer.
    spec = NmsSpec(head="yolov8", output="output0", num_classes=18, input_size=(320, 320), class_agnostic=True)
    with pytest.raises(NmsError, match="class_agnostic") as caught:
        build(monkeypatch, "8.5.2.2", yolov8n, spec, V8_PROFILE)
    assert "\n" not in str(caught.value) and caught.value.exit_code == 4


def test_without_the_plugin_library(monkeypatch, yolov8n):
    spec = NmsSpec(head="yolov8", output="output0", num_classes=18, input_size=(320, 320))
    _, result, _ = build(monkeypatch, "10.3.0", yolov8n, spec, V8_PROFILE, plugins=False)
    assert result.nms["method"] == "INMSLayer"
    with pytest.raises(NmsError, match="neither the EfficientNMS_TRT plugin"):
        build(monkeypatch, "8.5.2.2", yolov8n, spec, V8_PROFILE, plugins=False)


def test_dla_int8_with_nms_is_refused_before_any_build():
    from orinkit.convert.trt.int8 import Int8Sources

    sources = Int8Sources(Path("model.int8.onnx"), Path("model.int8.opset17.onnx"), ())
    with pytest.raises(NmsError, match="DLA"):
        BuildOptions(profiles={}, int8=sources, dla_core=0, nms=NmsSpec("yolov8", "output0", 80))


def _fields(trt, **overrides):
    values = {"score_threshold": (np.array([0.25], np.float32), "FLOAT32"),
              "iou_threshold": (np.array([0.7], np.float32), "FLOAT32"),
              "max_output_boxes": (np.array([300], np.int32), "INT32"),
              "background_class": (np.array([-1], np.int32), "INT32"),
              "score_activation": (np.array([0], np.int32), "INT32"), "box_coding": (np.array([0], np.int32), "INT32"),
              **overrides}
    return trt.PluginFieldCollection([trt.PluginField(name, data, trt.PluginFieldType[kind])
                                      for name, (data, kind) in values.items() if data is not None])


def test_efficient_nms_creator_reads_fields_as_tensorrt_does():
    trt = make_fake_tensorrt("10.3.0")
    registry = trt.get_plugin_registry()
    assert registry.get_creator("EfficientNMS_TRT", "1", "") is None  # nothing before initLibNvInferPlugins
    trt.init_libnvinfer_plugins(trt.Logger(), "")
    creator = registry.get_creator("EfficientNMS_TRT", "1", "")
    assert creator.create_plugin("nms", _fields(trt)) is not None
    # createPlugin reads the bytes as the C type: a float64 0.25 declared FLOAT32 is read as 0.0
    doubled = creator.create_plugin("nms", _fields(trt, score_threshold=(np.array([0.25]), "FLOAT32")))
    assert doubled._fields["score_threshold"] == 0.0
    assert creator.create_plugin("nms", _fields(trt, score_threshold=(np.array([1], np.int32), "INT32"))) is None
    assert creator.create_plugin("nms", _fields(trt, box_coding=(None, "INT32"))) is None  # required attribute
    assert creator.create_plugin("nms", _fields(trt, iou_threshold=(np.array([0.0], np.float32), "FLOAT32"))) is None
    with pytest.raises(TypeError):
        trt.PluginField("score_threshold", 0.25, trt.PluginFieldType.FLOAT32)  # data must be a buffer
    with pytest.raises(TypeError):
        creator.create_plugin("nms", [trt.PluginField("x", np.zeros(1, np.int32), trt.PluginFieldType.INT32)])


@pytest.mark.parametrize("version,lookups,agnostic", [
    ("8.5.2.2", {"get_plugin_creator"}, False),  # pyPlugin.cpp release/8.5
    ("8.6.1", {"get_plugin_creator"}, True),
    ("10.16.0", {"get_plugin_creator", "get_creator"}, True),  # get_creator from 10.0
    ("11.4.1", {"get_creator"}, True),  # release/11.0+: get_plugin_creator no longer bound
])
def test_plugin_registry_per_release(version, lookups, agnostic):
    trt = make_fake_tensorrt(version)
    registry = trt.get_plugin_registry()
    assert {name for name in ("get_plugin_creator", "get_creator") if hasattr(registry, name)} == lookups
    trt.init_libnvinfer_plugins(trt.Logger(), "")
    creator = getattr(registry, sorted(lookups)[0])("EfficientNMS_TRT", "1", "")
    names = {creator.field_names[i].name for i in range(len(creator.field_names))}
    assert ("class_agnostic" in names) == agnostic


def test_layer_api_per_release(yolov8n):
    def network(version):
        trt = make_fake_tensorrt(version)
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH) if version.startswith("8") else 0
        net = trt.Builder(trt.Logger()).create_network(flags)
        assert trt.OnnxParser(net, trt.Logger()).parse_from_file(str(yolov8n))
        return trt, net

    old, net = network("8.5.2.2")
    assert not hasattr(net, "add_cast") and hasattr(net, "add_nms")  # ICastLayer from release/8.6
    head = net.get_output(0)
    assert tuple(head.shape) == (-1, 22, -1)
    limit = net.add_constant((), np.array([300], np.int32)).get_output(0)
    with pytest.raises(TypeError):  # the indices_type form is bound from release/10.14
        net.add_nms(head, head, limit, old.int32)
    with pytest.raises(TypeError):
        net.add_constant((1,), [0.5])  # trt.Weights from numpy arrays only
    with pytest.raises(TypeError):
        net.add_elementwise(head, head, 1)  # an int is not an ElementWiseOperation

    new, net = network("10.16.0")
    limit = net.add_constant((), np.array([300], np.int32)).get_output(0)
    assert net.add_nms(head := net.get_output(0), head, limit, new.int32).get_output(0).shape == (-1, 3)


def test_inms_scalar_inputs_are_checked_when_the_engine_builds(monkeypatch, yolov8n):
    from orinkit.convert.trt.log import capturing_logger

    trt = install_fakes(monkeypatch, "11.4.1")
    logger = capturing_logger(trt)
    builder = trt.Builder(logger)
    net = builder.create_network(0)
    trt.OnnxParser(net, trt.Logger()).parse_from_file(str(yolov8n))
    boxes = net.add_shuffle(net.get_output(0))
    boxes.first_transpose = (0, 2, 1)
    scores = boxes.get_output(0)
    wrong = net.add_constant((1,), np.array([300], np.int32)).get_output(0)  # [1], where a 0D scalar goes
    nms = net.add_nms(scores, scores, wrong, trt.int32)
    net.mark_output(nms.get_output(0))
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("images", (1, 3, 320, 320), (1, 3, 320, 320), (1, 3, 320, 320))
    config.add_optimization_profile(profile)
    assert builder.build_serialized_network(net, config) is None
    assert any("MaxOutputBoxesPerClass must be a 0D INT32 tensor" in text for text in logger.errors())


# ---------------------------------------------------------------- the manifest

def test_manifest_records_nms_and_older_manifests_still_read(tmp_path):
    plan = tmp_path / "model.plan"
    plan.write_bytes(b"plan")
    record = NmsRecord(method="INMSLayer", head="yolov8", score_threshold=0.25, iou_threshold=0.7,
                       max_output_boxes=300, num_classes=18)
    outputs = (TensorSpec("num_dets", "INT32", (-1, 1)), TensorSpec("det_boxes", "FP32", (-1, 300, 4)))
    write_manifest(plan, EngineManifest(inputs=(), outputs=outputs, nms=record))
    again = read_manifest(plan)
    assert again.nms == record and again.answers_boxes
    data = json.loads((tmp_path / "model.plan.manifest.json").read_text())
    del data["nms"]
    (tmp_path / "model.plan.manifest.json").write_text(json.dumps(data))
    older = read_manifest(plan)
    assert older.nms is None and not older.answers_boxes


def test_verify_replays_nms(tmp_path):
    from orinkit.convert.verify import replayed_options

    record = NmsRecord(method="EfficientNMS_TRT", head="yolov8", score_threshold=0.4, iou_threshold=0.5,
                       max_output_boxes=100, class_agnostic=True)
    options = replayed_options(EngineManifest(inputs=(), outputs=(), precision="fp16", nms=record))
    assert (options.nms, options.nms_conf, options.nms_iou, options.nms_max_det, options.nms_agnostic) == (
        True, 0.4, 0.5, 100, True)


# ---------------------------------------------------------------- edge-convert --nms

@pytest.fixture(scope="module")
def not_detectors(tmp_path_factory) -> dict:
    """A classifier, and an NMS-free detector's [1, 300, 6] output (x1 y1 x2 y2 score class), exported by torch."""
    from torch_models import TinyClassifier, export

    class EndToEnd(torch.nn.Module):  # the output layout of YOLOv10 / YOLO26 / Ultralytics nms=True exports
        def forward(self, images):
            return images.flatten(1)[:, :1800].reshape(-1, 300, 6)

    folder = tmp_path_factory.mktemp("not-detectors")
    return {"classifier": export(TinyClassifier(), torch.zeros(1, 3, 16, 16), folder / "classifier.onnx"),
            "end2end": export(EndToEnd(), torch.zeros(1, 3, 32, 32), folder / "yolo26.onnx", input_name="images",
                              dynamic_batch=False)}


@pytest.mark.parametrize("model,extra,says", [
    ("classifier", [], "is not a detector orinkit recognizes"),
    ("end2end", [], "has a end2end head, which is NMS-free"),
    ("end2end", ["--int8", "--calib", "calib.npz", "--dla-core", "0"], "--nms with --int8 on DLA"),
    ("classifier", ["--agnostic", "--conf", "0.4"], None),  # without --nms: see below
])
def test_edge_convert_refuses_in_one_line_and_writes_nothing(not_detectors, tmp_path, model, extra, says):
    from click.testing import CliRunner

    from orinkit.cli.convert import main

    out = tmp_path / "out.edge"
    args = [str(not_detectors[model]), *extra, "-o", str(out)] + ([] if says is None else ["--nms"])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 4, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert (says or "--conf, --agnostic shape the NMS that --nms puts into the engine") in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".out.edge*"))


def test_without_tensorrt_nms_is_recorded_for_the_device(yolov8n, tmp_path):
    """This machine has no TensorRT: the ONNX is written as ever, and the run says where NMS will go."""
    from click.testing import CliRunner

    from orinkit.cli.convert import main

    out = tmp_path / "faces.edge"
    result = CliRunner().invoke(main, [str(yolov8n), "--nms", "--conf", "0.3", "--no-fp16", "--no-simplify",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "goes into the engine when it is built on the device" in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["nms"]["in_engine"] is False and report["nms"]["head"] == "yolov8"
    assert report["nms"]["score_threshold"] == 0.3 and report["options"]["nms"]["max_output_boxes"] == 300
    assert not (out / "model.plan").exists() and (out / "model.onnx").is_file()


def test_convert_builds_nms_into_the_engine_and_the_manifest_says_so(monkeypatch, yolov8n, frames, tmp_path):
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    install_fakes(monkeypatch, "10.16.0")
    data = tmp_path / "frames.npz"
    np.savez(data, images=frames)
    result = convert_onnx(yolov8n, tmp_path / "faces.edge", ConvertOptions(
        shapes={"images": (1, 3, 320, 320)}, fp16=False, simplify=False, data=data, nms=True, engine=True))
    manifest = read_manifest(result.artifacts["plan"])
    assert manifest.answers_boxes and manifest.nms.method == "INMSLayer" and manifest.nms.num_classes == 18
    assert [(t.name, t.dtype, t.dims) for t in manifest.outputs] == [
        ("num_dets", "INT32", (-1, 1)), ("det_boxes", "FP32", (-1, 300, 4)),
        ("det_scores", "FP32", (-1, 300)), ("det_classes", "INT32", (-1, 300))]
    verdict = result.report()["engine"]["verdict"]
    assert verdict["passed"] and verdict["boxes"]["f1"] == 1.0 and verdict["boxes"]["engine_boxes"] == 2
    assert result.report()["nms"]["method"] == "INMSLayer"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
