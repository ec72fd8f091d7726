"""FP16 emulation, the accuracy gate and the FP16 graph, on real torch exports run by onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from orinkit.convert.errors import AccuracyGateError
from orinkit.convert.fp16.convert import to_fp16
from orinkit.convert.fp16.emulate import activation_ranges, emulated_fp16, run, run_emulated
from orinkit.convert.fp16.gate import run_gate
from orinkit.convert.fp16.graphs import session
from orinkit.convert.fp16.metrics import Tolerances, compare
from orinkit.convert.onnx_prep import prepare
from orinkit.convert.samples import random_samples
from torch_models import LosesPrecision, Overflows, TinyClassifier, export


def _prepared(tmp_path, module, shape, name):
    path = export(module, torch.randn(*shape), tmp_path / f"{name}.onnx")
    return onnx.load(str(prepare(path, tmp_path / f"{name}.prepared.onnx").path))


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


def test_activation_ranges_name_the_overflowing_node(tmp_path):
    model = _prepared(tmp_path, Overflows(), (1, 16), "overflows")
    ranges = activation_ranges(model, _samples((2, 16)))
    over = [name for name, peak in ranges.items() if peak > 65504]
    assert over == ["/Mul_1"]
    assert all(np.isfinite(v) for v in ranges.values())


def test_gate_passes_a_benign_model_without_keeping_anything(tmp_path):
    model = _prepared(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    report = run_gate(model, _samples((1, 3, 32, 32), low=0.0), Tolerances())
    assert report.passed and report.keep_fp32 == () and report.evaluations == 1
    assert report.metrics[0].cosine > 0.9999


def test_gate_fails_on_overflow_then_passes_keeping_the_node_in_fp32(tmp_path):
    model = _prepared(tmp_path, Overflows(), (1, 16), "overflows")
    messages = []
    report = run_gate(model, _samples((2, 16)), Tolerances(), progress=messages.append)
    assert not report.first_metrics[0].passed and report.first_metrics[0].nonfinite > 0
    assert report.passed and report.keep_fp32 == ("/Mul_1",) == report.overflow_nodes
    assert report.bisected_nodes == ()
    assert any("leave the FP16 range" in m for m in messages)


def test_bisection_finds_the_node_that_loses_precision(tmp_path):
    model = _prepared(tmp_path, LosesPrecision(), (1, 16), "precision")
    report = run_gate(model, _samples((2, 16)), Tolerances(atol=1e-3, rtol=1e-3))
    assert not report.first_metrics[0].passed and report.overflow_nodes == ()
    assert report.passed
    assert report.bisected_nodes == ("/Add",), report.bisected_nodes
    assert report.evaluations > 2


def test_gate_that_cannot_pass_says_so(tmp_path):
    model = _prepared(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    with pytest.raises(AccuracyGateError, match="even with every node kept in FP32") as info:
        run_gate(model, _samples((1, 3, 32, 32), low=0.0), Tolerances(atol=0.0, rtol=0.0, min_cosine=1.0))
    assert info.value.exit_code == 7 and info.value.report is not None


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
    assert any(i.data_type == onnx.TensorProto.FLOAT16 for i in half.graph.initializer)
    expected = run(model, samples)
    got = [session(half).run(None, s) for s in samples]
    assert all(m.passed for m in compare(["output"], expected, got, Tolerances()))


def test_emulation_rounds_weights_and_keeps_names(tmp_path):
    model = _prepared(tmp_path, TinyClassifier(), (1, 3, 32, 32), "tiny")
    emulated = emulated_fp16(model)
    assert [o.name for o in emulated.graph.output] == [o.name for o in model.graph.output]
    rounded = [i for i in emulated.graph.initializer if i.name.endswith("__rounded")]
    assert rounded
    values = onnx.numpy_helper.to_array(rounded[0])
    assert np.array_equal(values, values.astype(np.float16).astype(np.float32))


def test_metrics_count_violations_and_non_finite_values():
    reference = [[np.array([1.0, 2.0, 3.0, 4.0])]]
    candidate = [[np.array([1.0, 2.5, np.inf, 4.0])]]
    (metric,) = compare(["y"], reference, candidate, Tolerances(atol=0.1, rtol=0.0))
    assert (metric.violations, metric.nonfinite, metric.passed) == (2, 1, False)
    assert metric.max_abs == float("inf")
    (clean,) = compare(["y"], reference, [[np.array([1.0, 2.0, 3.0, 4.0001])]], Tolerances())
    assert clean.passed and clean.cosine == pytest.approx(1.0)
