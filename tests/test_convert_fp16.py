"""FP16 emulation, the accuracy gate and its search, the FP16 graph, on real torch exports run by onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from torch_models import LosesPrecision, Overflows, TinyClassifier, export

from orinkit.convert.errors import (
    AccuracyGateError,
    ConvertError,
    Fp16GraphError,
    LibraryCrashError,
)
from orinkit.convert.fp16.convert import build_fp16, prefix_graph
from orinkit.convert.fp16.criteria import Criterion, compare
from orinkit.convert.fp16.emulate import (
    Emulator,
    activation_ranges,
    run,
    run_emulated,
    switchable_fp16,
)
from orinkit.convert.fp16.gate import GateOptions, run_gate
from orinkit.convert.fp16.graphs import session
from orinkit.convert.fp16.repair import to_fp16
from orinkit.convert.onnx_prep import prepare
from orinkit.convert.samples import random_samples


def _prepared_path(tmp_path, module, shape, name):
    path = export(module, torch.randn(*shape), tmp_path / f"{name}.onnx")
    return prepare(path, tmp_path / f"{name}.prepared.onnx").path


def _prepared(tmp_path, module, shape, name):
    return onnx.load(str(_prepared_path(tmp_path, module, shape, name)))


def _samples(shape, count=4, low=-1.0, high=1.0):
    return random_samples({"input": (np.float32, shape)}, count, ranges={"input": (low, high)})


def test_emulation_overflows_where_plain_fp16_on_the_cpu_hides_it(tmp_path):
    model = _prepared(tmp_path, Overflows(), (1, 16), "overflows")
    samples = _samples((2, 16))
    fp32 = run(model, samples)
    assert all(np.isfinite(o[0]).all() for o in fp32)
    emulated = run_emulated(model, samples)
    assert not np.isfinite(emulated[0][0]).all(), "the squared activations must overflow FP16"
    # The FP16 graph on onnxruntime's CPU provider does not overflow: it computes many ops in FP32.
    half, _ = to_fp16(model, sample=samples[0])
    plain = session(half).run(None, samples[0])[0]
    assert np.isfinite(plain).all()


def test_one_switchable_graph_gives_every_fp32_set(tmp_path):
    model = _prepared(tmp_path, Overflows(), (1, 16), "overflows")
    samples = _samples((2, 16))
    emulator = Emulator(model)
    assert emulator.units == [n.name for n in model.graph.node if n.name in emulator.units]
    reference = emulator.reference(samples)
    everything_fp32 = emulator.emulate(samples, keep_fp32=emulator.units)
    assert np.allclose(everything_fp32[0][0], reference[0][0], rtol=1e-6)
    kept = emulator.emulate(samples, keep_fp32=["/Mul_1"])
    assert np.isfinite(kept[0][0]).all() and not np.isfinite(emulator.emulate(samples)[0][0]).all()
    only_mul = emulator.emulate(samples, converted=["/Mul_1"])
    assert not np.isfinite(only_mul[0][0]).all()
    graph, units = switchable_fp16(model)
    # The weights a converted node reads are rounded to FP16 copies, picked by the mask.
    rounded = [i for i in graph.graph.initializer if i.name.endswith("__rounded")]
    values = onnx.numpy_helper.to_array(rounded[0])
    assert np.array_equal(values, values.astype(np.float16).astype(np.float32))


def test_activation_ranges_name_the_overflowing_node(tmp_path):
    model = _prepared(tmp_path, Overflows(), (1, 16), "overflows")
    ranges = activation_ranges(model, _samples((2, 16)))
    assert [name for name, peak in ranges.items() if peak > 65504] == ["/Mul_1"]
    assert all(np.isfinite(v) for v in ranges.values())


def test_gate_passes_a_benign_model_without_keeping_anything(tmp_path):
    path = _prepared_path(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    report = run_gate(path, _samples((1, 3, 32, 32), low=0.0))
    assert report.passed and report.keep_fp32 == () and report.evaluations == 1
    assert report.final.metrics[0].cosine > 0.9999 and report.fp16_fraction == 1.0
    assert report.decided_by.startswith("range criterion")


def test_gate_fails_on_overflow_then_passes_keeping_the_node_in_fp32(tmp_path):
    path = _prepared_path(tmp_path, Overflows(), (1, 16), "overflows")
    messages = []
    report = run_gate(path, _samples((2, 16)), progress=messages.append)
    assert not report.first.passed and report.first.metrics[0].nonfinite > 0
    assert report.passed and report.keep_fp32 == ("/Mul_1",) == report.overflow_nodes
    assert report.searched_nodes == ()
    assert any("leave the FP16 range" in m for m in messages)


def test_search_ranks_and_finds_the_node_that_loses_precision(tmp_path):
    path = _prepared_path(tmp_path, LosesPrecision(), (1, 16), "precision")
    messages = []
    report = run_gate(path, _samples((2, 16)), GateOptions(criterion=Criterion(max_range_error=1e-3)),
                      progress=messages.append)
    assert not report.first.passed and report.overflow_nodes == ()
    assert report.passed and report.searched_nodes == ("/Add",) == report.keep_fp32
    assert any("largest contributions: /Add" in m for m in messages), messages


def test_realistic_resnet18_stays_fp16_under_the_default_criterion(tmp_path):
    """The first round's element-wise test kept 19 of ResNet-18's 49 nodes in FP32 although real FP16 agrees with
    FP32 to a cosine of 0.9999997; with realistic weights the default criterion keeps none."""
    import realistic_models

    from orinkit.convert.torch_export import export_torch

    frames = realistic_models.smooth_images(4, 224, 224, seed=500)[:, None]
    path = tmp_path / "resnet18.onnx"
    export_torch(realistic_models.resnet18(), [torch.from_numpy(frames[0])], path, input_names=["input"])
    prepared = prepare(path, tmp_path / "prepared.onnx").path
    samples = [{"input": f} for f in frames]
    report = run_gate(prepared, samples)
    assert report.passed and report.keep_fp32 == () and report.evaluations == 1
    assert report.final.metrics[0].cosine > 0.9999 and report.final.metrics[0].range_error < 0.01
    strict = run_gate(prepared, samples, GateOptions(criterion=Criterion(kind="elementwise"), budget_s=15))
    assert strict.keep_fp32, "the element-wise test refuses some of the FP16 rounding of realistic logits"
    assert not strict.first.passed and strict.first.metrics[0].violations > 0


def test_a_spent_budget_ends_with_the_best_passing_set_and_says_so(tmp_path):
    path = _prepared_path(tmp_path, LosesPrecision(), (1, 16), "precision")
    messages = []
    report = run_gate(path, _samples((2, 16)), GateOptions(criterion=Criterion(max_range_error=1e-3),
                                                           budget_s=1e-3), progress=messages.append)
    assert report.passed and report.budget_exhausted and report.final.passed
    assert report.fp16_fraction == 0.0  # nothing better than every node in FP32 was found in the time
    assert any("budget" in n for n in report.notes) and any("--gate-budget" in m for m in messages)


def test_forced_nodes_stay_fp32_and_unknown_ones_are_refused(tmp_path):
    path = _prepared_path(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    model = onnx.load(str(path))
    conv = next(n.name for n in model.graph.node if n.op_type == "Conv")
    report = run_gate(path, _samples((1, 3, 32, 32)), GateOptions(keep_fp32=(conv,)))
    assert report.keep_fp32 == (conv,) == report.forced
    with pytest.raises(ConvertError, match="--keep-fp32 names /nope"):
        run_gate(path, _samples((1, 3, 32, 32)), GateOptions(keep_fp32=("/nope",)))


def test_limits_no_model_can_meet_are_refused_before_searching(tmp_path):
    path = _prepared_path(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    with pytest.raises(AccuracyGateError, match="rejects the FP32 outputs compared with themselves") as info:
        run_gate(path, _samples((1, 3, 32, 32)), GateOptions(metric=_never()))
    assert info.value.exit_code == 7


def _never():
    from orinkit.convert.fp16.task_metrics import parse_metric

    return parse_metric("user_metrics:never_agrees")


def test_a_crash_in_the_gate_becomes_a_typed_error(tmp_path, monkeypatch):
    path = _prepared_path(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    monkeypatch.setenv("ORINKIT_FAILPOINT", "fp16-gate-crash")
    with pytest.raises(LibraryCrashError, match=r"onnxruntime \(running the FP16 gate\) crashed \(SIGSEGV") as info:
        run_gate(path, _samples((1, 3, 32, 32)))
    assert info.value.exit_code == 6


def test_fp16_graph_keeps_fp32_io_and_the_kept_nodes(tmp_path):
    model = _prepared(tmp_path, Overflows(), (1, 16), "overflows")
    samples = _samples((2, 16))
    half, kept = to_fp16(model, ["/Mul_1"], sample=samples[0])
    assert kept == ("/Mul_1",)
    graph = onnx.shape_inference.infer_shapes(half).graph
    assert [i.type.tensor_type.elem_type for i in graph.input] == [onnx.TensorProto.FLOAT]
    assert [o.type.tensor_type.elem_type for o in graph.output] == [onnx.TensorProto.FLOAT]
    types = {v.name: v.type.tensor_type.elem_type for v in graph.value_info}
    mul = next(n for n in half.graph.node if n.name == "/Mul_1")
    assert types[mul.output[0]] == onnx.TensorProto.FLOAT
    gemm = next(n for n in half.graph.node if n.op_type in ("Gemm", "MatMul"))
    assert types[gemm.output[0]] == onnx.TensorProto.FLOAT16
    expected = run(model, samples)
    got = [session(half).run(None, s) for s in samples]
    assert all(m.passed for m in compare(["output"], expected, got, Criterion()))


def test_prefix_graphs_are_valid_models_that_end_where_asked(tmp_path):
    model = _prepared(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    built = build_fp16(model)
    for count in range(1, len(built.model.graph.node) + 1):
        prefix = prefix_graph(built, count)
        onnx.checker.check_model(prefix)
        assert list(prefix.graph.node) == list(built.model.graph.node[:count])
    assert len(built.origins) == len(built.model.graph.node) and set(built.origins) <= {
        n.name for n in model.graph.node}


def test_a_crash_validating_the_fp16_graph_is_blamed_on_its_node_and_repaired(tmp_path, monkeypatch):
    """ORINKIT_FAILPOINT stands for onnxruntime's optimiser crashing (SIGSEGV, for real, in the child) on any
    graph holding an FP16 Relu: the blame must find the Relu from the graph's structure and keep it in FP32."""
    model = _prepared(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    relu = next(n.name for n in model.graph.node if n.op_type == "Relu")
    monkeypatch.setenv("ORINKIT_FAILPOINT", "fp16-validate-crash:Relu")
    messages = []
    half, kept = to_fp16(model, sample=_samples((1, 3, 32, 32))[0], progress=messages.append)
    assert kept == (relu,)
    assert any(f"fails at node {relu} (onnxruntime crashed (SIGSEGV))" in m for m in messages), messages


def test_a_crash_no_fp32_node_can_fix_is_a_typed_error(tmp_path, monkeypatch):
    model = _prepared(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    monkeypatch.setenv("ORINKIT_FAILPOINT", "fp16-validate-crash:Relu")
    relu = next(n.name for n in model.graph.node if n.op_type == "Relu")
    with pytest.raises(Fp16GraphError) as info:
        to_fp16(model, sample=_samples((1, 3, 32, 32))[0], max_repairs=0)
    assert info.value.exit_code == 7 and "after 0 repairs" in str(info.value)
    assert relu
