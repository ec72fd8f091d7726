"""INT8 engines per TensorRT version, through the fake TensorRT and pycuda of tests/fake_tensorrt.py (a test
double: TensorRT cannot run here). The ONNX files are real: the digits classifier quantized by the real ModelOpt."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from fake_tensorrt import install_fakes, make_fake_tensorrt

from orinkit.convert.errors import DlaError, EngineBuildError, StaleEngineError
from orinkit.convert.int8.qdq import quantized_nodes
from orinkit.convert.pipeline import ConvertOptions, convert_onnx
from orinkit.convert.shapes import InputProfile
from orinkit.convert.trt import BuildOptions, build_engine
from orinkit.convert.trt.int8 import Int8Sources
from orinkit.formats.manifest import read_manifest

pytest.importorskip("modelopt")
PROFILE = {"pixels": InputProfile((1, 1, 8, 8), (1, 1, 8, 8), (1, 1, 8, 8))}


@pytest.fixture(scope="module")
def artifacts(int8_converted):
    """The INT8 artifacts edge-convert writes where TensorRT is absent (as on this machine)."""
    return int8_converted[0].output


def sources(folder, excluded=()):
    return Int8Sources(folder / "model.int8.onnx", folder / "model.int8.opset17.onnx", tuple(excluded))


def calls(fake, kind):
    return [c for c in fake.calls if c[0] == kind]


def flags_set(fake):
    return {fake.BuilderFlag(c[1]).name for c in calls(fake, "set_flag")}


@pytest.mark.parametrize("version, mode, parsed, flags", [
    ("8.5.2.2", "explicit-flag", "model.int8.opset17.onnx", {"FP16", "INT8"}),
    ("10.3.0", "strongly-typed", "model.int8.onnx", set()),
    ("11.1.0", "strongly-typed", "model.int8.onnx", set()),
])
def test_int8_engine_per_version(int8_digits, tmp_path, monkeypatch, version, mode, parsed, flags):
    fake = install_fakes(monkeypatch, version)
    messages = []
    # 0.98: the fake engine runs each version's graph on onnxruntime, which is not bit-exact with the judged one
    # (8.5's is FP32 outside the Q/DQ pairs); this test is about the build, the gate has its own tests.
    result = convert_onnx(int8_digits["onnx"], tmp_path / "out", ConvertOptions(
        int8=True, calib=int8_digits["calib"], data=int8_digits["data"], metric="topk", min_agreement=0.98,
        int8_min_share=0), progress=messages.append)
    assert result.engine["int8_mode"] == mode
    assert calls(fake, "parse_from_file")[-1][1].endswith(parsed)
    assert flags_set(fake) == flags  # strongly typed: no precision flag (TensorRT refuses them there)
    network_flags = calls(fake, "create_network")[-1][1]
    typed = getattr(fake.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    assert bool(typed is not None and network_flags & (1 << int(typed))) == (mode == "strongly-typed")
    manifest = read_manifest(result.output / "model.plan")
    assert manifest.precision == "int8" and manifest.build["int8_mode"] == mode
    recorded = manifest.build["int8"]
    assert recorded["calibration_sha256"] == result.int8.calibration_sha256 and recorded["method"] == "entropy"
    assert recorded["excluded"] == [e.node for e in result.int8.excluded]
    assert (recorded["min_share"], recorded["int8_share"]) == (0, round(result.int8.int8_share, 4))
    assert any(m.startswith("  engine topk: agreement") for m in messages), messages


def test_tensorrt_8_5_cannot_parse_modelopts_own_output(artifacts, monkeypatch):
    """Why the opset-17 FP32-scale graph exists: 8.5's parser stops at opset 17 and takes FP32 scales only."""
    install_fakes(monkeypatch, "8.5.2.2")
    wrong = Int8Sources(artifacts / "model.int8.onnx", artifacts / "model.int8.onnx")
    with pytest.raises(EngineBuildError, match="opset"):
        build_engine(artifacts / "model.onnx", BuildOptions(profiles=PROFILE, workspace=64 << 20, int8=wrong))


@pytest.mark.parametrize("version", ["8.5.2.2", "10.3.0"])
def test_dla_int8_goes_through_the_calibration_cache(artifacts, monkeypatch, version):
    """JetPack 5/6: DLA's INT8 is implicit: the Q/DQ-free ONNX, INT8 + FP16 flags, and a cache written from the
    Q/DQ scales whose header names this TensorRT; the excluded nodes are pinned to FP16."""
    fake = install_fakes(monkeypatch, version, dla_cores=2)
    excluded = quantized_nodes(onnx.load(str(artifacts / "model.int8.onnx")))[:1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = build_engine(artifacts / "model.onnx", BuildOptions(
            profiles=PROFILE, workspace=64 << 20, dla_core=1, int8=sources(artifacts, excluded)))
    assert built.int8_mode == "calibration-cache"
    assert calls(fake, "parse_from_file")[-1][1].endswith("model.onnx")
    assert calls(fake, "default_device_type") == [("default_device_type", fake.DeviceType.DLA)]
    assert {"INT8", "FP16", "GPU_FALLBACK", "PREFER_PRECISION_CONSTRAINTS"} <= flags_set(fake)
    cache = calls(fake, "read_calibration_cache")[-1][1].decode()
    number = "8502" if version.startswith("8") else "100300"
    assert cache.splitlines()[0] == f"TRT-{number}-EntropyCalibration2" and len(cache.splitlines()) > 1
    assert not calls(fake, "calibration_cache_ignored")
    assert ("layer.precision", excluded[0], fake.float16) in fake.calls
    deprecated = [w for w in caught if issubclass(w.category, DeprecationWarning) and "10.1" in str(w.message)]
    assert bool(deprecated) == version.startswith("10")  # calibrators are deprecated from 10.1


def test_dla_int8_refused_where_tensorrt_11_has_no_dla(artifacts, monkeypatch):
    install_fakes(monkeypatch, "11.1.0", dla_cores=2)
    with pytest.raises(DlaError, match="before 11.4.1") as caught:
        build_engine(artifacts / "model.onnx", BuildOptions(profiles=PROFILE, workspace=64 << 20, dla_core=0,
                                                            int8=sources(artifacts)))
    assert "leave out --dla-core" in caught.value.hint


def test_dla_int8_on_tensorrt_11_4_1_builds_the_qdq_graph_strongly_typed(artifacts, monkeypatch):
    fake = install_fakes(monkeypatch, "11.4.1", dla_cores=2)
    built = build_engine(artifacts / "model.onnx", BuildOptions(profiles=PROFILE, workspace=64 << 20, dla_core=0,
                                                                int8=sources(artifacts)))
    assert built.int8_mode == "strongly-typed" and not calls(fake, "int8_calibrator")
    assert calls(fake, "parse_from_file")[-1][1].endswith("model.int8.onnx")


def test_the_double_refuses_what_tensorrt_refuses(artifacts, monkeypatch):
    """The strictness the tests above lean on: precision flags on a strongly typed network, and INT8 with neither
    Q/DQ nor a cache of this version."""
    from orinkit.convert.trt.log import capturing_logger

    trt = make_fake_tensorrt("10.3.0")
    logger = capturing_logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    trt.OnnxParser(network, logger).parse_from_file(str(artifacts / "model.int8.onnx"))
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.FP16)
    assert builder.build_serialized_network(network, config) is None
    assert "not allowed with a strongly typed network" in logger.errors()[-1]
    plain = builder.create_network(0)
    trt.OnnxParser(plain, logger).parse_from_file(str(artifacts / "model.onnx"))
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    assert builder.build_serialized_network(plain, config) is None
    assert "no scaling factors detected" in logger.errors()[-1]


def test_a_rebuild_replays_calibration_and_exclusions(int8_digits, tmp_path, monkeypatch):
    from orinkit.convert.verify import ensure_engine, replayed_options

    install_fakes(monkeypatch, "10.3.0")
    calib = tmp_path / "calib.npz"
    calib.write_bytes(int8_digits["calib"].read_bytes())
    built = convert_onnx(int8_digits["onnx"], tmp_path / "out", ConvertOptions(
        int8=True, calib=calib, data=int8_digits["data"], metric="topk", min_agreement=0.98, calib_method="max",
        int8_min_share=0))
    plan = built.output / "model.plan"
    before = read_manifest(plan)
    replay = replayed_options(before)
    assert (replay.int8, replay.calib, replay.calib_method, replay.replay) == (True, calib, "max", True)
    assert replay.calib_sha256 == before.build["int8"]["calibration_sha256"]
    assert replay.int8_exclude == tuple(before.build["int8"]["excluded"])
    assert replay.int8_min_share == 0  # a build accepted below the default share is rebuilt as accepted
    install_fakes(monkeypatch, "11.1.0")  # JetPack upgraded
    verdict, rebuilt = ensure_engine(plan, int8_digits["onnx"])
    after = read_manifest(plan)
    assert rebuilt and after.build["tensorrt_version"] == "11.1.0" and after.precision == "int8"
    assert after.build["int8"] == before.build["int8"]
    install_fakes(monkeypatch, "11.2.0")
    with np.load(calib) as arrays:
        np.savez(calib, pixels=arrays["pixels"][::-1])  # the same digits in another order: another set
    with pytest.raises(StaleEngineError, match="not the one the plan was built with"):
        ensure_engine(plan, int8_digits["onnx"])
    assert read_manifest(plan).build["tensorrt_version"] == "11.1.0"
