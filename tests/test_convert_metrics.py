"""The gate's task metrics (--metric topk, lanes, module:function): each on a case it must pass and one it must
fail, on outputs of real exported models run by onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_models import TinyClassifier

from orinkit.convert.errors import MetricError
from orinkit.convert.fp16.gate import GateOptions, run_gate
from orinkit.convert.fp16.task_metrics import parse_metric
from orinkit.convert.onnx_prep import prepare
from orinkit.convert.samples import random_samples
from orinkit.convert.torch_export import export_torch


def _gate(tmp_path, module, sample, samples, metric, **options):
    path = tmp_path / "model.onnx"
    export_torch(module, [sample], path, input_names=["input"])
    prepared = prepare(path, tmp_path / "prepared.onnx").path
    return run_gate(prepared, samples, GateOptions(metric=parse_metric(metric), **options))


@pytest.fixture(scope="module")
def overflowing_mlp():
    """The residual MLP whose sums pass 65504: real FP16 gives inf, so every task metric must fail it."""
    import realistic_models

    model = realistic_models.residual_mlp()
    samples = [{"input": (np.random.default_rng(i).standard_normal((1, 256)) * 3).astype(np.float32)}
               for i in range(4)]
    return model, samples


def test_topk_passes_a_classifier_fp16_keeps(tmp_path):
    samples = random_samples({"input": (np.float32, (2, 3, 32, 32))}, 4)
    report = _gate(tmp_path, TinyClassifier(), torch.rand(2, 3, 32, 32), samples, "topk:5")
    assert report.passed and report.first.task.passed and report.first.task.agreement == 1.0
    assert report.decided_by == "task metric topk:5 (agreement >= 0.99)" and report.keep_fp32 == ()


def test_topk_fails_an_overflowing_model_until_its_nodes_stay_fp32(tmp_path, overflowing_mlp):
    model, samples = overflowing_mlp
    report = _gate(tmp_path, model, torch.from_numpy(samples[0]["input"]), samples, "topk")
    assert not report.first.task.passed and report.first.task.agreement < 0.5
    assert report.passed and report.final.task.agreement == 1.0 and report.overflow_nodes


def test_a_user_metric_passes_and_fails(tmp_path, overflowing_mlp):
    samples = random_samples({"input": (np.float32, (2, 3, 32, 32))}, 3)
    passing = _gate(tmp_path, TinyClassifier(), torch.rand(2, 3, 32, 32), samples,
                    "user_metrics:mean_within_1_percent")
    assert passing.first.task.passed and passing.first.task.name == "user_metrics:mean_within_1_percent"
    model, mlp_samples = overflowing_mlp
    failing = _gate(tmp_path, model, torch.from_numpy(mlp_samples[0]["input"]), mlp_samples,
                    "user_metrics:mean_within_1_percent")
    assert not failing.first.task.passed and failing.passed


def test_metric_specs_that_cannot_work_are_refused():
    for spec, message in (("topk:0", "K must be 1 or more"), ("nosuch", "unknown --metric"),
                          ("user_metrics:missing", "cannot be loaded"), ("no_module_here:f", "cannot be loaded")):
        with pytest.raises(MetricError, match=message) as info:
            parse_metric(spec)
        assert info.value.exit_code == 4
    with pytest.raises(MetricError, match="--min-agreement applies to a --metric only"):
        parse_metric(None, 0.9)
    with pytest.raises(MetricError, match="must lie in"):
        parse_metric("topk", 1.5)
    outputs = [{"y": np.ones((1, 4))}]
    with pytest.raises(MetricError, match="returned 'yes'"):
        parse_metric("user_metrics:not_a_number").evaluate(outputs, outputs)
    with pytest.raises(MetricError, match="no output 'logits'"):
        parse_metric("topk@logits").evaluate(outputs, outputs)


# -- lanes, on LaneATT with realistic weights and drawn roads --------------------------------------------------

@pytest.fixture(scope="module")
def lane_outputs():
    """FP32 proposals of a realistically scaled LaneATT on four drawn roads, and the model's FP16 emulation."""
    import realistic_models

    from orinkit.convert.fp16.emulate import Emulator

    model = realistic_models.laneatt()
    frames = realistic_models.road_frames(4, seed=500)
    folder = __import__("tempfile").mkdtemp(prefix="orinkit-lanes-")
    from pathlib import Path

    path = Path(folder) / "laneatt.onnx"
    export_torch(model, [torch.from_numpy(frames[:1])], path, input_names=["image"], output_names=["proposals"])
    import onnx

    emulator = Emulator(onnx.load(str(prepare(path, Path(folder) / "prepared.onnx").path)))
    samples = [{"image": frame[None]} for frame in frames]
    reference = [{"proposals": o[0]} for o in emulator.reference(samples)]
    candidate = [{"proposals": o[0]} for o in emulator.emulate(samples)]
    __import__("shutil").rmtree(folder)
    return reference, candidate


def test_lanes_agree_when_fp16_keeps_them(lane_outputs):
    reference, candidate = lane_outputs
    result = parse_metric("lanes").evaluate(reference, candidate)
    assert result.passed and result.agreement == 1.0
    assert "16 of 16 FP32 lanes" in result.detail  # 4 lanes per road: the model finds lanes to compare


def test_lanes_disagree_when_fp16_moves_them(lane_outputs):
    reference, _ = lane_outputs
    shifted = [{"proposals": r["proposals"].copy()} for r in reference]
    for sample in shifted:
        sample["proposals"][..., 5:] += 40.0  # every lane 40 px to the right: more than its 30 px width
    result = parse_metric("lanes").evaluate(reference, shifted)
    assert not result.passed and result.agreement == 0.0


def test_lanes_disagree_when_fp16_changes_the_scores(lane_outputs):
    from orinkit.lanes.postprocess import postprocess

    reference, _ = lane_outputs
    demoted = [{"proposals": r["proposals"].copy()} for r in reference]
    for sample in demoted:
        kept = postprocess(sample["proposals"][0], (360, 640)).indices
        sample["proposals"][0, kept[:2], 1] -= 10.0  # the two best lanes drop below the threshold
    result = parse_metric("lanes").evaluate(reference, demoted)
    assert not result.passed and result.agreement < 0.8


def test_lanes_judged_on_no_lanes_prove_nothing_and_say_so():
    proposals = np.zeros((1, 2784, 77), np.float32)
    proposals[..., 0] = 5.0  # every anchor background
    with pytest.raises(MetricError, match="found no lane in the FP32 outputs"):
        parse_metric("lanes").evaluate([{"p": proposals}], [{"p": proposals}])
    with pytest.raises(MetricError, match="needs LaneATT proposals"):
        parse_metric("lanes").evaluate([{"logits": np.zeros((1, 10))}], [{"logits": np.zeros((1, 10))}])
