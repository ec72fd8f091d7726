"""TrtRunner and the benchmark statistics. The statistics need no GPU; the runner's data path runs against the fake
TensorRT and pycuda of tests/fake_tensorrt.py (test doubles: neither can run on this machine); one test builds and
runs a real engine where TensorRT, pycuda and a GPU are present."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from fake_tensorrt import make_fake_pycuda, make_fake_tensorrt
from torch_models import TinyClassifier, export

from orinkit.convert.errors import ConvertError, EngineRunError, StaleEngineError
from orinkit.convert.shapes import InputProfile
from orinkit.convert.trt import BenchmarkReport, BuildOptions, TrtRunner, build_engine, latency_stats
from orinkit.core.errors import MissingExtraError

PROFILE = {"input": InputProfile((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16))}


def test_latency_stats_match_numpy():
    rng = np.random.default_rng(7)
    samples = list(rng.gamma(4.0, 0.5, size=257))
    stats = latency_stats(samples)
    assert stats["count"] == 257
    assert stats["min"] == min(samples) and stats["max"] == max(samples)
    assert stats["mean"] == pytest.approx(np.mean(samples))
    assert stats["median"] == pytest.approx(np.median(samples))
    for q in (90, 95, 99):
        assert stats[f"p{q}"] == pytest.approx(np.percentile(samples, q))
    assert stats["std"] == pytest.approx(np.std(samples))
    assert stats["cv"] == pytest.approx(np.std(samples) / np.mean(samples))


def test_latency_stats_small_cases():
    assert latency_stats([2.0]) == {"count": 1.0, "min": 2.0, "max": 2.0, "mean": 2.0, "median": 2.0, "p90": 2.0,
                                    "p95": 2.0, "p99": 2.0, "std": 0.0, "cv": 0.0}
    stats = latency_stats([4, 1, 3, 2])
    assert stats["median"] == 2.5 and stats["p90"] == pytest.approx(3.7)
    with pytest.raises(ValueError):
        latency_stats([])


def test_summary_warns_when_gpu_compute_is_unstable():
    steady = BenchmarkReport.from_samples([1.2] * 100, [1.0] * 100, total_wall_s=0.12)
    assert steady.cv_gpu_compute == 0 and not steady.unstable
    text = steady.summary()
    assert text.startswith("=== Performance summary ===")
    assert "Throughput: 833.3 qps" in text
    assert "GPU Compute Time: min = 1 ms" in text and "percentile(99%) = 1 ms" in text
    assert "unstable" not in text

    jittery = BenchmarkReport.from_samples([1.2] * 100, [1.0, 1.1] * 50, total_wall_s=0.12)
    assert jittery.cv_gpu_compute == pytest.approx(0.05 / 1.05)
    assert "[W] * GPU compute time is unstable, with coefficient of variance = 4.76%." in jittery.summary()


def test_runner_without_tensorrt_names_jetpack(monkeypatch):
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    with pytest.raises(MissingExtraError, match="JetPack") as caught:
        TrtRunner(b"plan")
    assert caught.value.module == "tensorrt"


@pytest.fixture
def classifier(tmp_path):
    return export(TinyClassifier(seed=3), torch.zeros(1, 3, 16, 16), tmp_path / "classifier.onnx")


@pytest.fixture
def fakes(monkeypatch):
    trt = make_fake_tensorrt("10.3.0")
    package, driver = make_fake_pycuda(trt)
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    return trt, driver


def reference(onnx_path, feeds):
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_runner_data_path_on_the_fakes(fakes, classifier):
    trt, driver = fakes
    plan = build_engine(classifier, BuildOptions(profiles=PROFILE, fp16=False, workspace=1 << 26)).plan
    rng = np.random.default_rng(0)
    with TrtRunner(plan) as runner:
        assert runner.inputs == ("input",) and runner.outputs == ("output",)
        for batch in (2, 1, 4):
            # float64 in: the runner casts to the engine's FP32.
            x = rng.standard_normal((batch, 3, 16, 16))
            out = runner.infer({"input": x})["output"]
            assert out.shape == (batch, 10) and out.dtype == np.float32
            np.testing.assert_allclose(out, reference(classifier, {"input": x.astype(np.float32)}), rtol=1e-5,
                                       atol=1e-6)
        # Buffers grow only for a larger shape: batch 2, then 4 (batch 1 reuses batch 2's).
        assert [c[1] for c in driver.calls if c[0] == "mem_alloc"] == [2 * 3 * 16 * 16 * 4, 2 * 10 * 4,
                                                                        4 * 3 * 16 * 16 * 4, 4 * 10 * 4]
        report = runner.benchmark({"input": x}, iterations=5, warmup=2)
        assert report.iterations == 5 and report.throughput_qps > 0
        assert report.latency_ms["min"] <= report.latency_ms["median"] <= report.latency_ms["p99"]
        with pytest.raises(ConvertError, match="does not fit the engine"):
            runner.infer({"input": np.zeros((5, 3, 16, 16), np.float32)})
        with pytest.raises(ConvertError, match="lack 'input'") as caught:
            runner.infer({"image": x})
        assert "inputs are input" in caught.value.hint
    assert not driver.stack and not driver.live and ("detach",) in driver.calls
    with pytest.raises(ConvertError, match="closed"):
        runner.infer({"input": x})


def test_a_failed_run_is_a_run_time_error_with_exit_6(fakes, classifier, monkeypatch):
    """execute_async_v3 returns False when TensorRT cannot run the engine (a CUDA error, a lost context): that is
    a failure at run time (exit 6), not bad input (exit 4)."""
    plan = build_engine(classifier, BuildOptions(profiles=PROFILE, fp16=False, workspace=1 << 26)).plan
    with TrtRunner(plan) as runner:
        monkeypatch.setattr(type(runner._context), "execute_async_v3", lambda self, stream_handle: False)
        with pytest.raises(EngineRunError, match="could not run the engine") as caught:
            runner.infer({"input": np.zeros((1, 3, 16, 16), np.float32)})
        assert caught.value.exit_code == 6
        with pytest.raises(ConvertError, match="iterations must be at least 1"):
            runner.benchmark({"input": np.zeros((1, 3, 16, 16), np.float32)}, iterations=0)
    assert not fakes[1].stack


def test_runner_refuses_a_plan_from_another_tensorrt(fakes, classifier, monkeypatch):
    older = make_fake_tensorrt("8.6.1")
    monkeypatch.setitem(sys.modules, "tensorrt", older)
    plan = build_engine(classifier, BuildOptions(profiles=PROFILE, fp16=False, workspace=1 << 26)).plan
    monkeypatch.setitem(sys.modules, "tensorrt", fakes[0])
    with pytest.raises(StaleEngineError, match="does not load with this TensorRT/GPU") as caught:
        TrtRunner(plan)
    assert "not compatible with this version of TensorRT" in caught.value.message
    assert "rebuild" in caught.value.hint
    assert not fakes[1].stack


def _install(monkeypatch, version: str, **options):
    trt = make_fake_tensorrt(version, **options)
    package, driver = make_fake_pycuda(trt)
    for name, module in (("tensorrt", trt), ("pycuda", package), ("pycuda.driver", driver)):
        monkeypatch.setitem(sys.modules, name, module)
    return trt, driver


@pytest.mark.parametrize("version", ["10.3.0", "11.1.0"])
def test_runner_converts_bf16_io(monkeypatch, classifier, version):
    # trt.nptype raises TypeError for BF16; the runner carries BF16 bits and gives and takes float32.
    _install(monkeypatch, version, io_types={"input": "BF16", "output": "BF16"})
    plan = build_engine(classifier, BuildOptions(profiles=PROFILE, fp16=False, workspace=1 << 26)).plan
    x = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype(np.float32)
    with TrtRunner(plan) as runner:
        out = runner.infer({"input": x})["output"]
    assert out.dtype == np.float32 and out.shape == (2, 10)
    # BF16 keeps 8 significant bits: the input is rounded, then the output.
    np.testing.assert_allclose(out, reference(classifier, {"input": x}), rtol=2e-2, atol=2e-2)


def test_bf16_conversion_rounds_to_nearest_even():
    from orinkit.convert.trt.runner import _from_bf16, _to_bf16

    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, 65504.0], np.float32)
    # 1 + 2**-8 is halfway between 1 and 1 + 2**-7: ties go to the even mantissa (1.0); 1 + 3 * 2**-8 goes up.
    assert _from_bf16(_to_bf16(values)).tolist() == [1.0, 1.0, 1.015625, -2.5, np.inf, 65536.0]
    assert np.isnan(_from_bf16(_to_bf16(np.array([np.nan], np.float32))))[0]


def test_runner_refuses_io_numpy_cannot_hold_by_name(monkeypatch, classifier):
    trt, driver = _install(monkeypatch, "10.3.0", io_types={"output": "FP8"})
    plan = build_engine(classifier, BuildOptions(profiles=PROFILE, fp16=False, workspace=1 << 26)).plan
    with pytest.raises(ConvertError, match="tensor 'output' of the engine is FP8") as caught:
        TrtRunner(plan)
    assert "I/O" in caught.value.hint
    assert not driver.stack and ("detach",) in driver.calls


def _gpu_or_skip():
    trt = pytest.importorskip("tensorrt", reason="needs TensorRT, pycuda and a GPU (a Jetson or a CUDA machine)")
    cuda = pytest.importorskip("pycuda.driver", reason="needs TensorRT, pycuda and a GPU (a Jetson or a CUDA "
                                                       "machine)")
    try:
        cuda.init()
        if cuda.Device.count() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as exc:
        pytest.skip(f"needs TensorRT, pycuda and a GPU: {exc}")
    return trt


def test_real_engine_matches_onnxruntime(tmp_path, classifier):
    _gpu_or_skip()
    result = build_engine(classifier, BuildOptions(profiles=PROFILE, fp16=False, timing_cache=tmp_path / "t.cache"))
    assert (tmp_path / "t.cache").stat().st_size > 0
    x = np.random.default_rng(1).standard_normal((3, 3, 16, 16)).astype(np.float32)
    with TrtRunner(result.plan) as runner:
        out = runner.infer({"input": x})["output"]
        report = runner.benchmark({"input": x}, iterations=20, warmup=5)
    np.testing.assert_allclose(out, reference(classifier, {"input": x}), rtol=1e-3, atol=1e-3)
    assert report.iterations == 20 and report.gpu_compute_ms["median"] > 0
