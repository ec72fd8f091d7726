"""Dense maps in the FP16 gate: the auto criterion judges a probability map by its masks and a class map by its
per-pixel classes, on a text detector and a page segmenter trained here on drawn pages and exported by
torch.onnx.export; and the mask metric fails a detector whose FP16 really changes its masks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from dense_models import (
    NormalisedTextDetector,
    PageSegmenter,
    TextDetector,
    pages,
    quality,
    train_page_net,
)
from torch_models import export

from orinkit.cli.convert import main as edge_convert
from orinkit.convert.errors import MetricError
from orinkit.convert.fp16.criteria import Criterion
from orinkit.convert.fp16.gate import GateOptions, run_gate
from orinkit.convert.fp16.task_metrics import parse_metric


@pytest.fixture(scope="session")
def page_net():
    """The page net trained for 600 steps (about 40 s here): a sharp text map that finds the drawn lines."""
    net, _ = train_page_net(steps=600)
    measured = quality(net)
    assert measured["sharp"] > 0.85, measured  # nearly every pixel below 0.05 or above 0.95
    assert measured["text_iou"] > 0.8 and measured["class_accuracy"] > 0.9, measured
    return net


def _onnx(tmp_path, module, size, name="model"):
    return export(module, torch.from_numpy(pages(1, size, seed=900)), tmp_path / f"{name}.onnx",
                  output_name="map", dynamic_batch=False)


def _samples(count, size, seed=500):
    return [{"input": image[None]} for image in pages(count, size, seed=seed)]


def test_a_trained_text_detector_stays_fp16_by_default_and_the_report_names_the_mask_metric(page_net, tmp_path):
    path = _onnx(tmp_path, TextDetector(page_net), 640)
    np.savez(tmp_path / "pages.npz", input=pages(4, 640, seed=500))
    result = CliRunner().invoke(edge_convert, [str(path), "--data", str(tmp_path / "pages.npz"),
                                               "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    gate = json.loads((tmp_path / "out" / "report.json").read_text())["gate"]
    assert gate["passed"] and gate["fp16_fraction"] >= 0.95
    assert gate["maps"] == [{"output": "map", "spec": "mask@map",
                             "why": "a probability map: Sigmoid /Sigmoid gives 1x1x640x640"}]
    assert gate["decided_by"].startswith("mask metric (IoU of the maps thresholded at > 0.3, 0.5, 0.7")
    assert "chosen by the auto criterion for a probability map" in gate["decided_by"]
    assert gate["final"]["maps"][0]["agreement"] >= 0.99
    assert "decided by the mask metric" in result.output
    assert "map is a probability map: Sigmoid /Sigmoid gives 1x1x640x640: judged by --metric mask@map" \
        in result.output


def test_the_auto_criterion_does_not_punish_error_that_no_threshold_sees(page_net, tmp_path):
    """At a range limit FP16's rounding cannot meet, the range criterion keeps nodes in FP32 although no mask
    changes; auto with the same limit judges the map by its masks and keeps none. --criterion range is as before."""
    path = _onnx(tmp_path, TextDetector(page_net), 320)
    samples = _samples(3, 320)
    auto = run_gate(path, samples, GateOptions(criterion=Criterion(max_range_error=1e-5)))
    assert auto.passed and auto.keep_fp32 == () and auto.evaluations == 1
    assert not auto.first.metrics[0].passed, "the map's numbers miss the limit..."
    assert auto.first.maps[0].passed, "...but its masks agree"
    strict = run_gate(path, samples, GateOptions(criterion=Criterion(kind="range", max_range_error=1e-5),
                                                 budget_s=10))
    assert strict.maps == () and strict.decided_by.startswith("range criterion (max error <= 1e-05")
    assert not strict.first.passed and strict.keep_fp32


def test_a_segmenter_softmax_is_judged_by_its_classes_by_default(page_net, tmp_path):
    report = run_gate(_onnx(tmp_path, PageSegmenter(page_net), 320), _samples(3, 320))
    assert report.passed and report.keep_fp32 == ()
    assert [m.spec for m in report.maps] == ["argmax:1@map"]
    assert "a class map: Softmax /Softmax over axis 1 (3 classes) of 1x3x320x320" in report.decided_by
    assert report.final.maps[0].agreement >= 0.99 and "pixels keep their class" in report.final.maps[0].detail


def test_a_label_map_is_judged_by_its_labels_where_the_range_criterion_fails_it(page_net, tmp_path):
    """ArgMax's labels: one pixel moving from class 0 to 2 is a range error of 1.0; by the labels it is 1 pixel."""
    path = _onnx(tmp_path, PageSegmenter(page_net, labels=True), 320)
    samples = _samples(3, 320)
    auto = run_gate(path, samples)
    assert auto.passed and auto.keep_fp32 == () and [m.spec for m in auto.maps] == ["argmax@map"]
    assert "a label map: ArgMax /ArgMax gives 1x320x320" in auto.decided_by
    assert 0 < auto.first.maps[0].agreement < 1, "FP16 moves a few pixels' labels (at class boundaries)"
    by_range = run_gate(path, samples, GateOptions(criterion=Criterion(kind="range"), budget_s=10))
    assert not by_range.first.passed and by_range.first.metrics[0].range_error >= 0.5 and by_range.keep_fp32


def test_raw_segmentation_logits_keep_the_range_criterion_unless_argmax_is_asked(page_net, tmp_path):
    path = _onnx(tmp_path, PageSegmenter(page_net, logits=True), 320)
    samples = _samples(3, 320)
    auto = run_gate(path, samples)
    assert auto.maps == () and "found no probability or class map" in auto.decided_by
    asked = run_gate(path, samples, GateOptions(metric=parse_metric("argmax")))
    assert asked.passed and asked.first.task.agreement >= 0.99 and asked.keep_fp32 == ()


def test_the_mask_metric_fails_a_detector_whose_fp16_changes_its_masks(page_net, tmp_path):
    """Its RMS over the map overflows FP16: every logit becomes 0 and the map a flat 0.5, finite, so the masks
    alone catch it; keeping the overflowing nodes in FP32 gives the detector's masks back."""
    report = run_gate(_onnx(tmp_path, NormalisedTextDetector(page_net), 320), _samples(3, 320))
    assert [m.spec for m in report.maps] == ["mask@map"]
    first = report.first
    assert first.metrics[0].nonfinite == 0 and not first.passed and first.maps[0].agreement < 0.5
    assert report.passed and report.final.maps[0].agreement >= 0.99
    assert set(report.overflow_nodes) <= set(report.keep_fp32) and report.fp16_fraction >= 0.8


def test_an_empty_map_is_left_to_the_range_criterion_and_said_so(page_net, tmp_path):
    path = _onnx(tmp_path, TextDetector(page_net), 128)
    blank = [{"input": np.full((1, 3, 128, 128), 0.9, np.float32)} for _ in range(2)]
    report = run_gate(path, blank)
    assert report.maps == () and report.decided_by.startswith("range criterion")
    assert any("map is a probability map but the FP32 one is empty" in note for note in report.notes)
    with pytest.raises(MetricError, match="cannot tell FP16 from FP32") as info:
        run_gate(path, blank, GateOptions(metric=parse_metric("mask")))
    assert info.value.exit_code == 4


def test_dense_metric_specs_that_cannot_work_are_refused():
    for spec, message in (("mask:abc", "the threshold 'abc' is not a number"), ("mask:nan", "is not a number"),
                          ("argmax:x", "the axis 'x' is not a whole number")):
        with pytest.raises(MetricError, match=message) as info:
            parse_metric(spec)
        assert info.value.exit_code == 4
    logits = [{"y": np.linspace(-4, 4, 2 * 16 * 16, dtype=np.float32).reshape(2, 1, 16, 16)}]
    with pytest.raises(MetricError, match=r"values in \[-4, 4\], not probabilities") as info:
        parse_metric("mask").evaluate(logits, logits)
    assert "mask:0@y" in info.value.hint
    assert parse_metric("mask:0").evaluate(logits, logits).agreement == 1.0
    for spec, message in (("argmax:5", "no axis 5"), ("argmax", "1 entry on axis 1"),
                          ("mask@z", "no output 'z'"), ("argmax@z", "no output 'z'")):
        with pytest.raises(MetricError, match=message):
            parse_metric(spec).evaluate(logits, logits)


def test_a_probability_map_a_rounding_step_past_1_is_still_judged_as_one():
    """PP-OCRv4's DBNet map on real pages reached 1 + one float32 step (a Sigmoid's rounding): the mask metric
    refused it as "values in [0, 1], not probabilities in [0, 1]". A rounding step is let through; a real excess is
    still refused, with values printed precisely enough to tell them from 1."""
    ramp = np.linspace(0, 1, 2 * 16 * 16, dtype=np.float32).reshape(2, 1, 16, 16)
    rounded = ramp.copy()
    rounded[0, 0, -1, -1] = np.nextafter(np.float32(1), np.float32(2))
    rounded[1, 0, 0, 0] = -np.float32(2.0 ** -12)
    result = parse_metric("mask").evaluate([{"y": rounded}], [{"y": rounded}])
    assert result.agreement == 1.0 and result.passed
    over = ramp * np.float32(1.01)
    with pytest.raises(MetricError, match=r"values in \[0, 1.01\], not probabilities"):
        parse_metric("mask").evaluate([{"y": over}], [{"y": over}])


def test_the_dense_metrics_count_what_changed():
    """IoU and pixel agreement on maps whose changes are known: the worst sample decides."""
    reference = [{"p": np.zeros((1, 1, 10, 10), np.float32)} for _ in range(2)]
    for sample in reference:
        sample["p"][..., :5, :] = 0.9  # 50 pixels of text
    candidate = [{"p": r["p"].copy()} for r in reference]
    candidate[1]["p"][0, 0, 0, :5] = 0.1  # 5 of them lost on the second page
    result = parse_metric("mask:0.5").evaluate(reference, candidate)
    assert result.agreement == pytest.approx(45 / 50) and not result.passed and "worst sample 1" in result.detail
    classes = [{"c": np.stack([1 - r["p"], r["p"]], axis=1)[:, :, 0]} for r in reference]
    changed = [{"c": np.stack([1 - c["p"], c["p"]], axis=1)[:, :, 0]} for c in candidate]
    result = parse_metric("argmax").evaluate(classes, changed)
    assert result.agreement == pytest.approx(95 / 100) and "195/200 pixels" in result.detail


class _SqueezedDetector(TextDetector):
    """The detector's map without its channel axis ([N, H, W]), as some DBNet exports give it."""

    def forward(self, x):
        return super().forward(x).squeeze(1)


class _BoxScores(torch.nn.Module):
    """A detector head's per-box class scores, [N, boxes, classes] after a Sigmoid: a table, not a map."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.head = torch.nn.Linear(3, 80)

    def forward(self, x):
        return torch.sigmoid(self.head(x.flatten(2).transpose(1, 2)[:, :100] * 4))


def test_auto_tells_maps_from_tables_of_scores(page_net, tmp_path):
    squeezed = run_gate(_onnx(tmp_path, _SqueezedDetector(page_net), 128, "squeezed"), _samples(2, 128))
    assert [m.spec for m in squeezed.maps] == ["mask@map"] and "gives 1x128x128" in squeezed.maps[0].why
    path = export(_BoxScores(), torch.rand(1, 3, 32, 32), tmp_path / "scores.onnx", output_name="map",
                  dynamic_batch=False)
    scores = run_gate(path, [{"input": np.random.default_rng(i).random((1, 3, 32, 32), np.float32)}
                             for i in range(2)])
    assert scores.maps == () and scores.decided_by.startswith("range criterion")


def test_the_engine_is_judged_by_the_same_masks_as_the_emulation(page_net, tmp_path, monkeypatch):
    """On the device path (tests/fake_tensorrt.py's test doubles: no GPU here) the built engine's outputs are
    judged by the maps the gate chose, not by the range criterion."""
    from fake_tensorrt import install_fakes

    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    install_fakes(monkeypatch, "10.3.0")
    np.savez(tmp_path / "pages.npz", input=pages(2, 320, seed=500))
    messages = []
    result = convert_onnx(_onnx(tmp_path, TextDetector(page_net), 320), tmp_path / "out",
                          ConvertOptions(data=tmp_path / "pages.npz"), progress=messages.append)
    assert result.engine_built and [m.spec for m in result.gate.maps] == ["mask@map"]
    assert result.engine["verdict"]["passed"] and result.engine["verdict"]["maps"][0]["name"] == "mask@map"
    assert any(m.startswith("  engine mask@map: agreement") for m in messages), messages
    assert any("engine map:" in m and "not deciding: mask@map decides" in m for m in messages), messages
