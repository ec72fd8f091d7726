"""edge-convert's gates on real trained detectors (tests/detector_models.py: wheels nobody here made).

The YOLOv8n export (nudenet 3.4.2) has dynamic height/width with Ultralytics' imgsz metadata, six Range nodes, and
finds faces and feet on real video frames; scikit-learn's two photos show it nothing.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from detector_models import PICODET_LAYOUT, YOLOV8_UNITS, YOLOV8N, fetch, save_pictures, street_and_face_frames

from orinkit.convert import detection
from orinkit.convert.errors import MetricError, NothingToJudgeError, OpsetConversionError, SampleDataError
from orinkit.convert.fp16.criteria import Criterion
from orinkit.convert.fp16.gate import GateOptions, judge, run_gate
from orinkit.convert.fp16.repair import to_fp16
from orinkit.convert.fp16.support import float32_only
from orinkit.convert.fp16.task_metrics import parse_metric
from orinkit.convert.pipeline import ConvertOptions, convert_onnx
from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_RUNTIME

IMAGES = {"images": (np.dtype(np.float32), (1, 3, 320, 320))}


@pytest.fixture(scope="module")
def yolov8n_onnx():
    return fetch(YOLOV8N)


@pytest.fixture(scope="module")
def detector_pictures(tmp_path_factory):
    return save_pictures(street_and_face_frames(), tmp_path_factory.mktemp("pictures"))


@pytest.fixture(scope="module")
def converted(yolov8n_onnx, detector_pictures, tmp_path_factory):
    """One default FP16 conversion of the real YOLOv8n, judged on sixteen real frames (--data DIR)."""
    lines: list[str] = []
    result = convert_onnx(yolov8n_onnx, tmp_path_factory.mktemp("yolov8n") / "n.edge",
                          ConvertOptions(engine=False, data=detector_pictures), progress=lines.append)
    return result, lines


@pytest.fixture(scope="module")
def fp32_outputs(yolov8n_onnx):
    """FP32 outputs of the real YOLOv8n on the sixteen frames, one dict per sample."""
    import onnxruntime as ort

    from orinkit.detect.preprocess import prepare, preprocess_for

    head = detection.recognize(yolov8n_onnx)
    session = ort.InferenceSession(str(yolov8n_onnx), providers=["CPUExecutionProvider"])
    spec = preprocess_for(head)
    return [{"output0": session.run(None, {"images": prepare(frame, spec)[0][None]})[0]}
            for frame in street_and_face_frames()]


def test_dynamic_height_and_width_come_from_ultralytics_imgsz(converted):
    result, lines = converted
    profile = result.profiles["images"]
    assert (profile.min, profile.opt, profile.max) == ((1, 3, 320, 320), (1, 3, 320, 320), (8, 3, 320, 320))
    assert "imgsz" in profile.size_from
    assert lines[0].startswith("shapes: images min 1x3x320x320") and "imgsz" in lines[0]
    assert result.report()["profiles"]["images"]["size_from"] == profile.size_from


def test_fp16_gate_judges_a_real_detector_by_its_boxes(converted):
    result, lines = converted
    gate = result.gate
    assert gate.passed and gate.metric == "boxes"
    assert "chosen by the auto criterion for a yolov8 detection head" in gate.decided_by
    assert gate.final.task.name == "boxes" and gate.final.task.agreement == 1.0
    assert "13 of 13 FP32 boxes found, 0 extra" in gate.final.task.detail
    assert gate.keep_fp32 == ()  # every computing node FP16 ...
    # ... but the six Range nodes, kept FP32 from ONNX's schema before any graph was tried:
    assert sorted(n for n in result.keep_fp32) == [f"/model.22/Range{s}" for s in ("", "_1", "_2", "_3", "_4", "_5")]
    assert not any("the FP16 graph fails at" in line for line in lines)
    assert any("6 node(s) kept in FP32 because ONNX types their op without float16 (Range)" in line for line in lines)
    # The report says on what, and at which scale, the gate judged.
    assert any("the 16 pictures of" in note and "scaled to 0..1 (/255)" in note for note in result.notes)


@pytest.mark.parametrize("break_it", ["zero every score", "scores on the wrong class", "+0.2 on every score"])
def test_broken_copies_of_the_output_fail_the_box_metric_but_passed_the_range_criterion(yolov8n_onnx, fp32_outputs,
                                                                                        break_it):
    def broken(array):
        array = array.copy()
        if break_it == "zero every score":
            array[:, 4:] = 0.0
        elif break_it == "scores on the wrong class":
            array[:, 4:] = np.roll(array[:, 4:], 1, axis=1)
        else:
            array[:, 4:] += 0.2
        return array

    names = ["output0"]
    reference = [[o["output0"]] for o in fp32_outputs]
    candidate = [[broken(o["output0"])] for o in fp32_outputs]
    assert judge(names, reference, candidate, Criterion("range")).passed  # what the old criterion said
    metric = parse_metric("boxes").bound(yolov8n_onnx)
    verdict = judge(names, reference, candidate, Criterion(), metric)
    assert not verdict.passed and verdict.task.agreement < 0.7, verdict.task.describe()
    assert judge(names, reference, reference, Criterion(), metric).task.agreement == 1.0


def test_a_gate_whose_fp32_side_finds_no_box_stops_and_says_so(yolov8n_onnx, tmp_path):
    """Random inputs and the bundled photos alike: the YOLOv8n finds nothing, so nothing can be judged."""
    head = detection.recognize(yolov8n_onnx)
    photos, note = detection.samples(head, IMAGES, 4)
    assert "scikit-learn's photos china.jpg and flower.jpg" in note
    with pytest.raises(NothingToJudgeError, match="finds no box .* on any of the gate's 4 samples") as caught:
        run_gate(yolov8n_onnx, photos, GateOptions())
    assert caught.value.exit_code == EXIT_BAD_INPUT and "--data DIR" in caught.value.hint
    output = tmp_path / "none.edge"
    with pytest.raises(NothingToJudgeError):
        convert_onnx(yolov8n_onnx, output, ConvertOptions(engine=False, simplify=False, samples=2))
    assert not output.exists()  # never "passed", nothing written


def test_detector_samples_take_the_models_scale_and_channel_order():
    """A YOLOX takes raw 0..255 BGR, letterboxed top-left; an Ultralytics head 0..1 RGB, centred."""
    from orinkit.detect.heads import Head

    yolox = Head("yolox", "images", (416, 416), ("output",), 80, tuple(map(str, range(80))), (8, 16, 32))
    yolov8 = Head("yolov8", "images", (416, 416), ("output0",), 80, tuple(map(str, range(80))))
    inputs = {"images": (np.dtype(np.float32), (1, 3, 416, 416))}
    raw, raw_note = detection.samples(yolox, inputs, 2)
    unit, unit_note = detection.samples(yolov8, inputs, 2)
    assert "raw 0..255" in raw_note and "top-left" in raw_note and "BGR" in raw_note
    assert "0..1 (/255)" in unit_note and "centred" in unit_note
    assert raw[0]["images"].max() > 200 and unit[0]["images"].max() <= 1.0 + 1e-6
    # The same photo: YOLOX's channels are RGB's reversed and 255 times larger; it is padded below the picture
    # (china.jpg is wide), Ultralytics' above and below.
    def content(image, pad):
        rows = np.flatnonzero(np.any(np.abs(image - pad) > 1e-3 * pad, axis=(0, 2)))
        return rows[0], image[:, rows[0]:rows[-1] + 1]

    (raw_top, raw_picture), (unit_top, unit_picture) = content(raw[0]["images"][0], 114), \
        content(unit[0]["images"][0], 114 / 255)
    assert raw_top == 0 and unit_top > 60
    np.testing.assert_allclose(raw_picture.mean(axis=(1, 2))[::-1] / 255, unit_picture.mean(axis=(1, 2)), atol=0.01)


def test_a_yolox_graph_gets_raw_bgr_samples_and_is_judged_by_boxes(tmp_path):
    """A YOLOX head (tests/detect_graphs.py: its exact output layout, untrained) gets photos prepared as YOLOX
    trains (top-left letterbox, BGR, raw 0..255, as the progress says) and the box metric; untrained, it finds no box
    inside its input on them, and the gate says so instead of passing."""
    from detect_graphs import export_graph

    lines: list[str] = []
    output = tmp_path / "x.edge"
    with pytest.raises(NothingToJudgeError):
        convert_onnx(export_graph("yolox", tmp_path), output, ConvertOptions(engine=False, simplify=False, samples=2),
                     progress=lines.append)
    assert any("2 views of scikit-learn's photos" in line and "raw 0..255" in line and "BGR" in line
               and "top-left" in line for line in lines)
    assert any("a yolox detection head" in line and "judged by --metric boxes" in line for line in lines)
    assert not output.exists()


def test_metric_boxes_is_explicit_too_and_checks_its_threshold(yolov8n_onnx, fp32_outputs):
    strict = parse_metric("boxes:0.5", 0.9).bound(yolov8n_onnx)
    assert strict.evaluate(fp32_outputs, fp32_outputs).passed
    with pytest.raises(MetricError, match="not a number in"):
        parse_metric("boxes:2")
    with pytest.raises(MetricError, match="judges with the model"):
        parse_metric("boxes").evaluate(fp32_outputs, fp32_outputs)


def test_only_recognized_heads_are_judged_by_boxes():
    assert detection.recognize(fetch(PICODET_LAYOUT)) is None  # raw per-stride outputs: no head orinkit decodes
    head = detection.recognize(fetch(YOLOV8_UNITS))
    assert head.kind == "yolov8" and head.input_size == (416, 416) and head.names[0] == "archer"


def test_pictures_that_cannot_fill_the_samples_are_refused(yolov8n_onnx, tmp_path):
    head = detection.recognize(yolov8n_onnx)
    with pytest.raises(SampleDataError, match="holds no pictures"):
        detection.samples(head, IMAGES, None, tmp_path)


# -- FP16: ops ONNX types without float16, from the schema -----------------------------------------------------

def test_range_is_kept_fp32_from_the_schema_not_found_by_failing_sessions():
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["steps"], name="range"),
             helper.make_node("Mul", ["steps", "steps"], ["squares"], name="mul"),
             helper.make_node("Resize", ["image", "", "scales"], ["big"], name="resize")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in
                                           ("start", "limit", "delta")]
                              + [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 2, 2])],
                              [helper.make_tensor_value_info("squares", TensorProto.FLOAT, ["n"]),
                               helper.make_tensor_value_info("big", TensorProto.FLOAT, [1, 1, 4, 4])],
                              [helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # Range's T has no float16; Resize's float-only scales stay FP32 by themselves (its data may be FP16).
    assert float32_only(model) == {"range": "Range"}
    sample = {"start": np.array(0, np.float32), "limit": np.array(5, np.float32), "delta": np.array(1, np.float32),
              "image": np.ones((1, 1, 2, 2), np.float32)}
    lines: list[str] = []
    fp16, kept = to_fp16(model, sample=sample, progress=lines.append)
    assert kept == ("range",) and not any("fails at" in line for line in lines)
    onnx.checker.check_model(fp16)


# -- INT8: ModelOpt's opset-19 graph written at opset 17 for TensorRT 8.5 ---------------------------------------

@pytest.fixture(scope="module")
def modelopt_int8(yolov8n_onnx, tmp_path_factory):
    """ModelOpt's INT8 Q/DQ graph of the real YOLOv8n (max calibration on 32 real frames, in its child process)."""
    pytest.importorskip("modelopt", reason="ModelOpt (the int8 extra) is not installed")
    from orinkit.convert.int8.modelopt_run import quantize_in_child
    from orinkit.detect.preprocess import prepare, preprocess_for

    folder = tmp_path_factory.mktemp("modelopt")
    spec = preprocess_for(detection.recognize(yolov8n_onnx))
    frames = street_and_face_frames()
    calibration = np.concatenate([prepare(frame, spec)[0][None] for frame in frames + frames])
    np.savez(folder / "calib.npz", images=calibration)
    quantize_in_child(yolov8n_onnx, folder / "int8.onnx", folder / "calib.npz", method="max")
    return folder / "int8.onnx", calibration[:4]


def test_the_opset_17_graph_of_a_real_modelopt_detector_is_written_and_computes_the_same(modelopt_int8):
    import onnxruntime as ort

    from orinkit.convert.int8.qdq import to_fp32, to_opset17

    path, images = modelopt_int8
    qdq = to_fp32(onnx.load(str(path)))
    assert {n.op_type for n in qdq.graph.node} >= {"Split", "QuantizeLinear"}
    with pytest.raises(Exception, match="No Adapter From Version \\$18 for Split"):
        onnx.version_converter.convert_version(qdq, 17)  # what died with a traceback before
    old = to_opset17(qdq)
    assert [o.version for o in old.opset_import if o.domain in ("", "ai.onnx")] == [17]
    assert not any(a.name == "num_outputs" for n in old.graph.node for a in n.attribute)

    def run(model):
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return session.run(None, {"images": images})[0]

    np.testing.assert_array_equal(run(old), run(qdq))


def _opset19(nodes, inputs, outputs, initializers=()):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def test_split_with_num_outputs_and_reduce_with_an_axes_input_go_back_to_opset_17():
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from orinkit.convert.int8.opset17 import downgrade

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7])
    model = _opset19(
        [helper.make_node("Split", ["x"], ["a", "b"], name="split", axis=1, num_outputs=2),  # 7 = 4 + 3
         helper.make_node("ReduceMean", ["a", "axes"], ["m"], name="mean", keepdims=0)],
        [x], [helper.make_tensor_value_info("m", TensorProto.FLOAT, [2]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1])])
    old = downgrade(model)
    split, mean = old.graph.node
    assert [a.name for a in split.attribute] == ["axis"] and len(split.input) == 2
    assert [(a.name, list(a.ints)) for a in mean.attribute if a.name == "axes"] == [("axes", [1])]
    assert list(mean.input) == ["a"]
    data = {"x": np.arange(14, dtype=np.float32).reshape(2, 7)}
    new_out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, data)
    old_out = ort.InferenceSession(old.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, data)
    for a, b in zip(new_out, old_out):
        np.testing.assert_array_equal(a, b)


def test_an_op_without_an_opset_17_form_is_refused_by_name_not_with_a_traceback():
    from onnx import TensorProto, helper

    from orinkit.convert.int8.opset17 import downgrade

    model = _opset19([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", antialias=1)],
                     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
                     [helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 0.5, 0.5])])
    with pytest.raises(OpsetConversionError, match="node resize \\(Resize, opset 19\\) sets antialias=1") as caught:
        downgrade(model)
    assert caught.value.exit_code == EXIT_RUNTIME and "model.int8.onnx" in caught.value.hint


def test_task_detect_head_and_labels_through_edge_convert(tmp_path):
    """--task detect refuses a model whose outputs fit no head (one line, exit 4, nothing written) instead of judging
    it by numbers; --head and --labels are checked against the graph and written into the converted model, so that
    edge-repo add-detector (and every gate) reads the same head and class names."""
    from click.testing import CliRunner
    from detect_graphs import export_graph

    from orinkit.cli.convert import main
    from orinkit.detect import recognize

    rows, yolov5 = export_graph("rows", tmp_path), export_graph("yolov5_plain", tmp_path)
    runner = CliRunner()
    refused = runner.invoke(main, [str(rows), "--task", "detect", "--no-fp16", "-o", str(tmp_path / "rows.edge")])
    assert refused.exit_code == EXIT_BAD_INPUT, refused.output
    error = refused.output.strip().splitlines()[-1]
    assert error.startswith("Error: ") and "fit no known" in error and "--head" in error
    assert "Traceback" not in refused.output
    assert not (tmp_path / "rows.edge").exists()
    labels = tmp_path / "names.txt"
    labels.write_text("car\nbus\n")
    wrong = runner.invoke(main, [str(yolov5), "--task", "detect", "--labels", str(labels), "--no-fp16",
                                 "-o", str(tmp_path / "wrong.edge")])
    assert wrong.exit_code == EXIT_BAD_INPUT and "2" in wrong.output and "3" in wrong.output, wrong.output
    assert not (tmp_path / "wrong.edge").exists()
    alone = runner.invoke(main, [str(yolov5), "--head", "yolov5", "-o", str(tmp_path / "alone.edge")])
    assert alone.exit_code == EXIT_BAD_INPUT and "--task detect" in alone.output
    labels.write_text("car\nbus\ntruck\n")
    done = runner.invoke(main, [str(yolov5), "--task", "detect", "--head", "yolov5", "--labels", str(labels),
                                "--no-fp16", "-o", str(tmp_path / "v5.edge")])
    assert done.exit_code == 0, done.output
    head = recognize(tmp_path / "v5.edge" / "model.onnx")
    assert (head.kind, head.names) == ("yolov5", ("car", "bus", "truck"))
