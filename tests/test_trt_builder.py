"""The TensorRT engine builder against fake TensorRT modules of each API generation (tests/fake_tensorrt.py is a
test double: TensorRT cannot run on this machine). The ONNX files are real, exported from torch."""

from __future__ import annotations

import sys

import pytest
import torch
from fake_tensorrt import CACHE_MAGIC, PLAN_MAGIC, make_fake_tensorrt
from torch_models import Affine, TinyClassifier, export

from orinkit.convert.errors import DlaError, EngineBuildError, InputModelError
from orinkit.convert.shapes import InputProfile
from orinkit.convert.trt import BuildOptions, build_engine, generation
from orinkit.convert.trt.memory import GIB, available_memory
from orinkit.convert.trt.precision import match_layers

MIB = 1 << 20
VERSIONS = ["8.5.2.2", "10.3.0", "11.1.0"]
PROFILE = {"input": InputProfile((1, 3, 16, 16), (4, 3, 16, 16), (8, 3, 16, 16))}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    classifier = export(TinyClassifier(), torch.zeros(1, 3, 16, 16), folder / "classifier.onnx")
    fp16 = export(TinyClassifier(), torch.zeros(1, 3, 16, 16), folder / "classifier.fp16.onnx")
    affine = export(Affine(2.0), torch.zeros(1, 4), folder / "affine.onnx", dynamic_batch=False)
    return {"classifier": classifier, "fp16": fp16, "affine": affine}


def install(monkeypatch, version: str, **kwargs):
    fake = make_fake_tensorrt(version, **kwargs)
    monkeypatch.setitem(sys.modules, "tensorrt", fake)
    return fake


def calls(fake, kind: str) -> list[tuple]:
    return [c for c in fake.calls if c[0] == kind]


def options(**kwargs) -> BuildOptions:
    return BuildOptions(**{"profiles": PROFILE, "workspace": 256 * MIB, **kwargs})


@pytest.mark.parametrize("version,expected", [("8.6.1", 8), ("8.5.2.2", 8), ("9.2.0", 10), ("10.3.0", 10),
                                              ("11.1.0", 11), ("12.0.0", 11)])
def test_generation(version, expected):
    assert generation(make_fake_tensorrt(version)) == expected


def test_generation_before_8_5_is_refused():
    with pytest.raises(EngineBuildError, match="tensor-name API needs TensorRT 8.5"):
        generation(make_fake_tensorrt("8.4.3"))


@pytest.mark.parametrize("version,flags", [("8.5.2.2", 1), ("8.6.1", 1), ("10.3.0", 0), ("11.1.0", 0)])
def test_network_flags_by_generation(monkeypatch, models, version, flags):
    fake = install(monkeypatch, version)
    result = build_engine(models["classifier"], options(fp16=False))
    assert calls(fake, "create_network") == [("create_network", flags)]
    assert result.plan.startswith(PLAN_MAGIC) and isinstance(result.plan, bytes)
    assert result.generation == generation(fake) and result.tensorrt_version == version
    assert result.fp16_mode == "off" and not calls(fake, "set_flag")


@pytest.mark.parametrize("version", ["8.5.2.2", "10.3.0"])
def test_fp16_by_flag_on_8_and_10(monkeypatch, models, version):
    fake = install(monkeypatch, version)
    result = build_engine(models["classifier"], options(), fp16_onnx_path=models["fp16"])
    assert result.fp16_mode == "flag"
    assert calls(fake, "set_flag") == [("set_flag", fake.BuilderFlag.FP16)]
    # The flag is the FP16 mechanism here: the FP32 graph is what TensorRT parses.
    assert calls(fake, "parse_from_file") == [("parse_from_file", str(models["classifier"]))]
    assert result.source == models["classifier"]


def test_fp16_by_graph_on_11(monkeypatch, models):
    fake = install(monkeypatch, "11.1.0")
    assert not hasattr(fake.BuilderFlag, "FP16")
    result = build_engine(models["classifier"], options(keep_fp32=("/conv/Conv",)), fp16_onnx_path=models["fp16"])
    assert result.fp16_mode == "graph"
    assert calls(fake, "parse_from_file") == [("parse_from_file", str(models["fp16"]))]
    assert not calls(fake, "set_flag") and not calls(fake, "layer.precision")
    assert result.fp32_layers == () and result.unmatched_fp32_nodes == ()


def test_fp16_on_11_needs_the_fp16_graph(monkeypatch, models):
    fake = install(monkeypatch, "11.1.0")
    with pytest.raises(EngineBuildError, match="FP16 ONNX graph is required on TensorRT 11") as caught:
        build_engine(models["classifier"], options())
    assert "fp16_onnx_path" in caught.value.hint
    assert not calls(fake, "create_network")


@pytest.mark.parametrize("version", ["8.5.2.2", "10.3.0"])
def test_keep_fp32_pins_matching_layers(monkeypatch, models, version):
    fake = install(monkeypatch, version, layers=("/conv/Conv_7", "/conv/Conv/reshape", "/fc/Gemm_2"))
    result = build_engine(models["classifier"], options(keep_fp32=("/conv/Conv", "/Constant", "/missing")))
    float32 = fake.float32
    assert result.fp32_layers == ("/conv/Conv", "/conv/Conv_7", "/conv/Conv/reshape")
    assert [c[1:] for c in calls(fake, "layer.precision")] == [(name, float32) for name in result.fp32_layers]
    assert [c[1:] for c in calls(fake, "layer.set_output_type")] == [(name, 0, float32)
                                                                     for name in result.fp32_layers]
    # /Constant has an integer output (ReduceMean's axes): matched, but nothing to keep in FP32.
    assert result.unmatched_fp32_nodes == ("/missing",)
    assert calls(fake, "set_flag") == [("set_flag", fake.BuilderFlag.FP16),
                                       ("set_flag", fake.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)]


def test_keep_fp32_exact_name_before_prefix(monkeypatch, models):
    fake = install(monkeypatch, "8.6.1")
    result = build_engine(models["affine"], options(keep_fp32=("/Constant",)))
    # /Constant_1 is another ONNX node, not a layer split off /Constant.
    assert result.fp32_layers == ("/Constant",)
    assert calls(fake, "set_flag")[-1] == ("set_flag", fake.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)


def test_keep_fp32_without_any_layer_sets_no_constraint_flag(monkeypatch, models):
    fake = install(monkeypatch, "10.3.0")
    result = build_engine(models["affine"], options(keep_fp32=("/nowhere",)))
    assert result.fp32_layers == () and result.unmatched_fp32_nodes == ("/nowhere",)
    assert calls(fake, "set_flag") == [("set_flag", fake.BuilderFlag.FP16)]


def test_match_layers_prefers_the_longest_node():
    layers = ["/a/Conv", "/a/Conv_1", "/a/Conv_1_3", "/a/Conv_9", "/a/Conv/x", "/b/Add"]
    matches = match_layers(layers, ["/a/Conv", "/a/Conv_1"], ["/a/Conv", "/a/Conv_1", "/b/Add"])
    assert matches == {"/a/Conv": ["/a/Conv", "/a/Conv_9", "/a/Conv/x"], "/a/Conv_1": ["/a/Conv_1", "/a/Conv_1_3"]}
    assert match_layers(layers, ["/a/Conv"], ["/a/Conv", "/a/Conv_1"])["/a/Conv"] == ["/a/Conv", "/a/Conv_9",
                                                                                      "/a/Conv/x"]


@pytest.mark.parametrize("version", VERSIONS)
def test_profile_for_a_dynamic_batch(monkeypatch, models, version):
    fake = install(monkeypatch, version)
    result = build_engine(models["classifier"], options(fp16=False))
    shapes = ((1, 3, 16, 16), (4, 3, 16, 16), (8, 3, 16, 16))
    assert calls(fake, "profile.set_shape") == [("profile.set_shape", "input", *shapes)]
    assert calls(fake, "add_optimization_profile") == [("add_optimization_profile", {"input": shapes})]
    assert result.profiles == {"input": shapes}


@pytest.mark.parametrize("version", VERSIONS)
def test_no_profile_for_a_static_model(monkeypatch, models, version):
    fake = install(monkeypatch, version)
    result = build_engine(models["affine"], options(fp16=False, profiles={"input": InputProfile((9, 4), (9, 4),
                                                                                               (9, 4))}))
    assert not calls(fake, "profile.set_shape") and not calls(fake, "add_optimization_profile")
    assert result.profiles == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_profile_tensorrt_refuses_is_a_build_error(monkeypatch, models, version):
    # opt below min passes set_shape but fails isValid(): add_optimization_profile returns -1.
    fake = install(monkeypatch, version)
    bad = {"input": InputProfile((4, 3, 16, 16), (1, 3, 16, 16), (8, 3, 16, 16))}
    with pytest.raises(EngineBuildError, match="rejects the optimization profile") as caught:
        build_engine(models["classifier"], options(profiles=bad, fp16=False))
    assert "min [4, 3, 16, 16], opt [1, 3, 16, 16]" in caught.value.message and "min <= opt" in caught.value.hint
    assert not calls(fake, "build_serialized_network")


def test_missing_profile_names_the_input_and_the_fix(monkeypatch, models):
    install(monkeypatch, "10.3.0")
    with pytest.raises(EngineBuildError, match="input 'input' has dynamic axes") as caught:
        build_engine(models["classifier"], options(profiles={}))
    assert "--shapes input:1x3x16x16" in caught.value.hint and "--min-shapes" in caught.value.hint


def test_auto_workspace_and_halving_retries(monkeypatch, models):
    fake = install(monkeypatch, "8.6.1", oom_above=100 * MIB)
    messages = []
    result = build_engine(models["classifier"], options(workspace=None), free_memory=lambda: 1 * GIB,
                          progress=messages.append)
    sizes = [c[2] for c in calls(fake, "set_memory_pool_limit")]
    assert sizes == [512 * MIB, 256 * MIB, 128 * MIB, 64 * MIB]
    assert all(c[1] == fake.MemoryPoolType.WORKSPACE for c in calls(fake, "set_memory_pool_limit"))
    assert [(a.workspace, a.ok) for a in result.attempts] == [(512 * MIB, False), (256 * MIB, False),
                                                              (128 * MIB, False), (64 * MIB, True)]
    assert result.workspace == 64 * MIB
    assert "Could not find any implementation" in result.attempts[0].error
    retries = [m for m in messages if "retrying" in m]
    assert retries[0].startswith("workspace 512 MiB failed (") and retries[0].endswith("retrying with 256 MiB")
    assert len(retries) == 3


@pytest.mark.parametrize("free,expected", [(64 * GIB, 4 * GIB), (10 * MIB, 64 * MIB), (3 * GIB, 1536 * MIB)])
def test_auto_workspace_cap_and_floor(monkeypatch, models, free, expected):
    fake = install(monkeypatch, "10.3.0")
    result = build_engine(models["affine"], options(workspace=None), free_memory=lambda: free)
    assert result.workspace == expected == calls(fake, "set_memory_pool_limit")[0][2]


def test_out_of_memory_below_the_floor_lists_every_attempt(monkeypatch, models):
    install(monkeypatch, "10.3.0", oom_above=10 * MIB)
    with pytest.raises(EngineBuildError, match="ran out of memory at every workspace size") as caught:
        build_engine(models["classifier"], options(workspace=None), free_memory=lambda: 1 * GIB)
    for size in (512, 256, 128, 64):
        assert f"{size} MiB: " in caught.value.message
    assert "32 MiB" not in caught.value.message
    assert "free memory" in caught.value.hint


def test_other_build_failures_are_not_retried(monkeypatch, models):
    fake = install(monkeypatch, "10.3.0", fail_build="Error Code 9: API Usage Error (fake unsupported layer)")
    with pytest.raises(EngineBuildError, match="fake unsupported layer"):
        build_engine(models["classifier"], options())
    assert len(calls(fake, "build_serialized_network")) == 1


def test_timing_cache_loaded_and_written_back(monkeypatch, models, tmp_path):
    fake = install(monkeypatch, "10.3.0")
    cache = tmp_path / "timing.cache"
    cache.write_bytes(CACHE_MAGIC + b"10.3.0 old")
    build_engine(models["classifier"], options(timing_cache=cache))
    assert calls(fake, "create_timing_cache") == [("create_timing_cache", CACHE_MAGIC + b"10.3.0 old")]
    assert calls(fake, "set_timing_cache") == [("set_timing_cache", CACHE_MAGIC + b"10.3.0 old", False)]
    assert calls(fake, "timing_cache.serialize")
    assert cache.read_bytes() == CACHE_MAGIC + b"10.3.0 old+tactics"


def test_timing_cache_created_when_absent(monkeypatch, models, tmp_path):
    fake = install(monkeypatch, "8.6.1")
    cache = tmp_path / "new" / "timing.cache"
    build_engine(models["affine"], options(timing_cache=cache))
    assert calls(fake, "create_timing_cache") == [("create_timing_cache", b"")]
    assert cache.read_bytes() == CACHE_MAGIC + b"8.6.1+tactics"


def test_timing_cache_from_another_tensorrt_is_replaced(monkeypatch, models, tmp_path):
    fake = install(monkeypatch, "10.3.0")
    cache = tmp_path / "timing.cache"
    cache.write_bytes(CACHE_MAGIC + b"8.6.1")
    messages = []
    build_engine(models["affine"], options(timing_cache=cache), progress=messages.append)
    assert [c[1] for c in calls(fake, "create_timing_cache")] == [CACHE_MAGIC + b"8.6.1", b""]
    assert any("does not fit" in m for m in messages)
    assert cache.read_bytes() == CACHE_MAGIC + b"10.3.0+tactics"


@pytest.mark.parametrize("version", ["8.5.2.2", "10.3.0"])
def test_dla_settings(monkeypatch, models, version):
    fake = install(monkeypatch, version, dla_cores=2)
    build_engine(models["classifier"], options(dla_core=1))
    assert calls(fake, "default_device_type") == [("default_device_type", fake.DeviceType.DLA)]
    assert calls(fake, "DLA_core") == [("DLA_core", 1)]
    assert ("set_flag", fake.BuilderFlag.GPU_FALLBACK) in fake.calls
    assert ("set_flag", fake.BuilderFlag.FP16) in fake.calls


def test_dla_core_beyond_the_device(monkeypatch, models):
    install(monkeypatch, "10.3.0", dla_cores=0)
    with pytest.raises(DlaError, match="this device has 0 DLA cores") as caught:
        build_engine(models["classifier"], options(dla_core=0))
    assert "leave out --dla-core" in caught.value.hint


def test_dla_needs_fp16(monkeypatch, models):
    install(monkeypatch, "8.6.1", dla_cores=2)
    with pytest.raises(DlaError, match="FP16 is off"):
        build_engine(models["classifier"], options(dla_core=0, fp16=False))


def test_dla_refused_on_11(monkeypatch, models):
    install(monkeypatch, "11.1.0", dla_cores=2)
    with pytest.raises(DlaError, match="TensorRT 11.1.0") as caught:
        build_engine(models["classifier"], options(dla_core=0), fp16_onnx_path=models["fp16"])
    assert "JetPack 7.2.2" in caught.value.hint


def test_parse_failure_reports_the_parser_errors(monkeypatch, models):
    install(monkeypatch, "8.6.1", fail_parse=True)
    with pytest.raises(EngineBuildError, match="cannot parse") as caught:
        build_engine(models["classifier"], options())
    assert "No importer registered for op: FakeOp" in caught.value.message
    assert "fake parse failure" in caught.value.message


def test_missing_onnx_file(monkeypatch, tmp_path):
    install(monkeypatch, "10.3.0")
    with pytest.raises(InputModelError, match="does not exist"):
        build_engine(tmp_path / "absent.onnx", options())


def test_available_memory_on_a_jetson_reads_meminfo(tmp_path):
    release, meminfo = tmp_path / "nv_tegra_release", tmp_path / "meminfo"
    release.write_text("# R36 (release), REVISION: 4.3\n")
    meminfo.write_text("MemTotal:       7995060 kB\nMemFree:         123456 kB\nMemAvailable:    5242880 kB\n")
    assert available_memory(tegra_release=release, meminfo=meminfo) == 5 * GIB


def test_available_memory_without_pycuda_guesses(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda", None)  # makes `import pycuda` fail, wherever this runs
    monkeypatch.setitem(sys.modules, "pycuda.driver", None)
    assert available_memory(tegra_release=tmp_path / "absent") == GIB
