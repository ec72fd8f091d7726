"""The engine builder's path by the TensorRT it finds, for the releases JetPack 7.2 brings to the Orin: 10.16 on
JetPack 7.2/7.2.1 takes the 10.x path, 11.4.1 (the SBSA build, JetPack 7.2.2+) the 11.x one, and the DLA is built
for only where that TensorRT has one (8.5-10.7 and 11.4.1+). TensorRT is the per-version test double of
tests/fake_tensorrt.py (it cannot run here); the ONNX files, the FP16 gate and the INT8 artifacts are real."""

from __future__ import annotations

import onnx
import pytest
import torch
from fake_tensorrt import install_fakes, make_fake_tensorrt
from torch_models import Overflows, export

from orinkit.convert.errors import DlaError
from orinkit.convert.pipeline import ConvertOptions, convert_onnx
from orinkit.convert.shapes import InputProfile
from orinkit.convert.trt import BuildOptions, build_engine, generation
from orinkit.convert.trt.generation import dla_unavailable
from orinkit.convert.trt.int8 import Int8Sources
from orinkit.formats.manifest import read_manifest

JETPACK_7_2 = "10.16.0"  # JetPack 7.2 and 7.2.1 (L4T R39.2): CUDA 13.2, TensorRT 10.16 (OE4T/meta-tegra #2224)
SBSA_11 = "11.4.1"  # TensorRT 11.4.1's SBSA build, on JetPack 7.2.2 or later
# The FP32 node the FP16 gate finds for Overflows, judged as given, and no onnxsim pass: the search and the
# simplification have their own tests, and each costs seconds in a child process here.
KEPT = {"keep_fp32": ("/Mul_1",), "replay": True, "simplify": False}
SHAPES = {"min_shapes": {"input": (1, 16)}, "opt_shapes": {"input": (2, 16)}, "max_shapes": {"input": (4, 16)},
          "input_ranges": {"input": (-1.0, 1.0)}}


@pytest.fixture(scope="module")
def overflows(tmp_path_factory):
    """A model whose FP16 gate keeps one node in FP32 (squares past FP16's range): where that node lives in the
    engine is what differs between the 10.x path (a layer constraint) and the 11.x one (the FP16 graph)."""
    return export(Overflows(), torch.randn(1, 16), tmp_path_factory.mktemp("onnx") / "overflows.onnx")


def calls(fake, kind: str) -> list[tuple]:
    return [c for c in fake.calls if c[0] == kind]


def flags_set(fake) -> set[str]:
    return {fake.BuilderFlag(c[1]).name for c in calls(fake, "set_flag")}


def strongly_typed(fake) -> bool:
    typed = getattr(fake.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    return typed is not None and bool(calls(fake, "create_network")[-1][1] & (1 << int(typed)))


@pytest.mark.parametrize("version, expected", [(JETPACK_7_2, 10), ("10.16.0.12", 10), (SBSA_11, 11),
                                               ("11.4.1.7", 11)])
def test_the_jetpack_7_2_releases_take_their_generation(version, expected):
    assert generation(make_fake_tensorrt(version)) == expected


@pytest.mark.parametrize("version, fp16_mode, parsed, flags", [
    (JETPACK_7_2, "flag", "model.onnx", {"FP16", "OBEY_PRECISION_CONSTRAINTS"}),
    (SBSA_11, "graph", "model.fp16.onnx", set()),
])
def test_fp16_engine_on_each_tensorrt_of_jetpack_7_2(overflows, tmp_path, monkeypatch, version, fp16_mode, parsed,
                                                      flags):
    """edge-convert's whole device path: 10.16 sets the FP16 flag on the FP32 graph and pins the gate's FP32 node
    by layer precision; 11.4.1 has no such flag and builds the FP16 graph the gate wrote, strongly typed."""
    fake = install_fakes(monkeypatch, version)
    result = convert_onnx(overflows, tmp_path / "out", ConvertOptions(**SHAPES, **KEPT, workspace=256 << 20))
    assert result.engine_built and result.engine["fp16_mode"] == fp16_mode
    assert calls(fake, "parse_from_file")[-1][1].endswith("/" + parsed)  # in the staging folder
    assert flags_set(fake) == flags
    assert hasattr(fake.BuilderFlag, "FP16") == (version == JETPACK_7_2)  # 11 binds no precision flag at all
    # The node kept in FP32: a layer constraint on 10.16, the graph's own FP32 there on 11.4.1.
    pinned = [c for c in fake.calls if c[0] == "layer.precision"]
    assert [c[1] for c in pinned] == (["/Mul_1"] if version == JETPACK_7_2 else [])
    fp16_graph = onnx.load(str(result.output / "model.fp16.onnx"))
    assert any(n.name == "/Mul_1" for n in fp16_graph.graph.node)
    manifest = read_manifest(result.output / "model.plan")
    assert manifest.build["tensorrt_version"] == version and manifest.build["fp16_mode"] == fp16_mode
    assert manifest.build["keep_fp32"] == ["/Mul_1"]


@pytest.fixture(scope="module")
def int8_sources(int8_converted):
    """The INT8 artifacts edge-convert writes where TensorRT is absent: the real ModelOpt's Q/DQ graph (opset 19,
    FP16 elsewhere) and its opset-17 FP32-scale twin."""
    folder = int8_converted[0].output
    return folder, Int8Sources(folder / "model.int8.onnx", folder / "model.int8.opset17.onnx")


@pytest.mark.parametrize("version", [JETPACK_7_2, SBSA_11])
def test_int8_on_the_gpu_is_the_strongly_typed_qdq_graph_on_both(int8_sources, monkeypatch, version):
    folder, sources = int8_sources
    fake = install_fakes(monkeypatch, version)
    built = build_engine(folder / "model.onnx", BuildOptions(profiles={}, workspace=64 << 20, int8=sources))
    assert built.int8_mode == "strongly-typed" and built.generation == generation(fake)
    assert calls(fake, "parse_from_file")[-1][1] == str(sources.qdq)
    assert strongly_typed(fake) and flags_set(fake) == set()  # TensorRT refuses precision flags there
    assert not calls(fake, "default_device_type")


@pytest.mark.parametrize("version, refused", [
    ("8.5.2.2", None), ("10.3.0", None), ("10.7.0", None),  # JetPack 5/6: DLA, FP16 by flag, INT8 implicitly
    ("10.8.0", "10.7 was the last"), (JETPACK_7_2, "10.7 was the last"),
    ("11.1.0", "before 11.4.1"), ("11.4.0", "before 11.4.1"),
    (SBSA_11, None), ("11.5.0", None), ("12.0.0", None),
])
def test_which_tensorrt_builds_for_the_dla(version, refused):
    found = dla_unavailable(version)
    assert (found is None) == (refused is None), found
    if refused:
        assert refused in found


def test_dla_on_jetpack_7_2s_tensorrt_10_16_is_refused_before_any_build(overflows, monkeypatch):
    """10.16 still counts its DLA cores, but has no DLA to build for: one line saying so and where DLA is back."""
    fake = install_fakes(monkeypatch, JETPACK_7_2, dla_cores=2)
    with pytest.raises(DlaError, match="TensorRT 10.16.0 cannot build for the DLA: 10.7 was the last") as caught:
        build_engine(overflows, BuildOptions(profiles={"input": InputProfile((1, 16), (2, 16), (4, 16))},
                                             workspace=64 << 20, dla_core=0))
    assert "leave out --dla-core" in caught.value.hint and "JetPack 7.2.2+" in caught.value.hint
    assert "11.4.1" in caught.value.hint
    assert not calls(fake, "create_network") and not calls(fake, "build_serialized_network")


def test_dla_int8_on_10_16_is_refused(int8_sources, monkeypatch):
    folder, sources = int8_sources
    install_fakes(monkeypatch, JETPACK_7_2, dla_cores=2)
    with pytest.raises(DlaError, match="cannot run INT8 on the DLA: 10.7 was the last"):
        build_engine(folder / "model.onnx", BuildOptions(profiles={}, workspace=64 << 20, dla_core=0, int8=sources))


def test_fp16_dla_engine_on_11_4_1(overflows, tmp_path, monkeypatch):
    """TensorRT 11.4.1 on JetPack 7.2.2+ builds for the DLA again: the FP16 graph, strongly typed, on the asked
    core with GPU fallback (no precision flags: 11 has none). Before the fix orinkit refused DLA on every 11.x."""
    fake = install_fakes(monkeypatch, SBSA_11, dla_cores=2)
    result = convert_onnx(overflows, tmp_path / "out",
                          ConvertOptions(**SHAPES, **KEPT, workspace=256 << 20, dla_core=1))
    assert result.engine_built and result.engine["fp16_mode"] == "graph"
    assert calls(fake, "parse_from_file")[-1][1].endswith("/model.fp16.onnx")
    assert calls(fake, "default_device_type") == [("default_device_type", fake.DeviceType.DLA)]
    assert calls(fake, "DLA_core") == [("DLA_core", 1)] and flags_set(fake) == {"GPU_FALLBACK"}
    assert read_manifest(result.output / "model.plan").build["dla_core"] == 1


def test_dla_int8_engine_on_11_4_1(int8_sources, monkeypatch):
    folder, sources = int8_sources
    fake = install_fakes(monkeypatch, SBSA_11, dla_cores=2)
    built = build_engine(folder / "model.onnx", BuildOptions(profiles={}, workspace=64 << 20, dla_core=0,
                                                             int8=sources))
    assert built.int8_mode == "strongly-typed" and strongly_typed(fake)
    assert calls(fake, "parse_from_file")[-1][1] == str(sources.qdq)
    assert calls(fake, "default_device_type") == [("default_device_type", fake.DeviceType.DLA)]
    assert flags_set(fake) == {"GPU_FALLBACK"} and not calls(fake, "read_calibration_cache")


def test_11_4_1_where_the_board_has_no_dla(overflows, monkeypatch):
    """The SBSA build outside JetPack, a Thor, or an Orin Nano: TensorRT counts no DLA core, and that is said."""
    install_fakes(monkeypatch, SBSA_11, dla_cores=0)
    with pytest.raises(DlaError, match="this device has 0 DLA cores"):
        build_engine(overflows, BuildOptions(profiles={"input": InputProfile((1, 16), (2, 16), (4, 16))},
                                             workspace=64 << 20, dla_core=0), fp16_onnx_path=overflows)
