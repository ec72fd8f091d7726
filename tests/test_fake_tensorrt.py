"""The TensorRT test double (tests/fake_tensorrt.py) rejects what each real TensorRT release rejects.

Each test names the NVIDIA/TensorRT source that shows the real behaviour (python/src/infer/*.cpp, include/NvInfer.h
and python/packaging/bindings_wheel/tensorrt/__init__.py on the release/8.5, release/10.x and release/11.x branches).
"""

from __future__ import annotations

import pytest
from fake_tensorrt import NPTYPE_ERROR, make_fake_pycuda, make_fake_tensorrt

MIB = 1 << 20


def test_objects_have_fixed_attribute_sets():
    # pybind11 classes have no __dict__ unless bound with py::dynamic_attr(), which pyCore.cpp never uses.
    trt = make_fake_tensorrt("10.3.0")
    config = trt.Builder(trt.Logger()).create_builder_config()
    with pytest.raises(AttributeError):
        config.workspace_limit = 1 << 30
    with pytest.raises(AttributeError):
        trt.Builder(trt.Logger()).num_DLA_cores = 2  # def_property_readonly


def test_max_workspace_size_is_deprecated_in_8_and_gone_from_10():
    # 8.5 pyCore.cpp: def_property("max_workspace_size", deprecateMember(..., "set_memory_pool_limit"), ...);
    # release/10.0 binds no max_workspace_size.
    old = make_fake_tensorrt("8.5.2.2")
    config = old.Builder(old.Logger()).create_builder_config()
    with pytest.warns(DeprecationWarning, match="Use set_memory_pool_limit instead"):
        config.max_workspace_size = 256 * MIB
    assert config.get_memory_pool_limit(old.MemoryPoolType.WORKSPACE) == 256 * MIB
    for version in ("10.3.0", "11.1.0"):
        trt = make_fake_tensorrt(version)
        with pytest.raises(AttributeError):
            trt.Builder(trt.Logger()).create_builder_config().max_workspace_size = 256 * MIB


def _first_layer(trt, onnx_path):
    builder = trt.Builder(trt.Logger())
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH) if trt.__version__.startswith("8") else 0
    network = builder.create_network(flags)
    assert trt.OnnxParser(network, trt.Logger()).parse_from_file(str(onnx_path))
    return network.get_layer(0)


def test_layer_precision_is_gone_in_11_and_deprecated_from_10_12(affine):
    # 11.1 pyGraph.cpp binds ILayer without precision/set_output_type; 10.16 wraps them in deprecateMember(...,
    # "Deprecated in TensorRT 10.12. Superseded by strong typing.").
    strict = make_fake_tensorrt("11.1.0")
    layer = _first_layer(strict, affine)
    with pytest.raises(AttributeError):
        layer.precision = strict.float32
    assert not hasattr(layer, "set_output_type") and not hasattr(layer, "precision_is_set")
    with pytest.raises(AttributeError):
        layer.get_output(0).dtype = strict.float16  # 11.1 pyGraph.cpp: def_property_readonly("dtype")

    late = make_fake_tensorrt("10.16.0")
    with pytest.warns(DeprecationWarning, match="10.12"):
        _first_layer(late, affine).precision = late.float32
    early = make_fake_tensorrt("10.3.0")
    layer = _first_layer(early, affine)
    layer.precision = early.float32
    assert layer.precision_is_set


@pytest.mark.parametrize("version,present,absent", [
    ("8.5.2.2", {"FLOAT", "HALF", "INT8", "INT32", "BOOL", "UINT8"}, {"INT64", "BF16", "FP8", "INT4"}),
    ("8.6.1", {"FP8"}, {"INT64", "BF16", "INT4"}),
    ("10.3.0", {"INT64", "BF16", "FP8", "INT4"}, {"FP4", "E8M0"}),
    ("10.16.0", {"FP4", "E8M0"}, set()),
    ("11.1.0", {"INT64", "BF16", "FP8", "INT4", "FP4", "E8M0"}, set()),
])
def test_data_types_per_release(version, present, absent):
    # pyFoundationalTypes.cpp py::enum_<DataType>: 8.5 has six members; FP8 from 8.6; BF16/INT64/INT4 from 10.0.
    trt = make_fake_tensorrt(version)
    members = set(trt.DataType.__members__)
    assert present <= members and not absent & members
    assert hasattr(trt, "int64") == ("INT64" in members) and hasattr(trt, "bfloat16") == ("BF16" in members)


@pytest.mark.parametrize("version", ["8.5.2.2", "10.3.0", "11.1.0"])
def test_nptype_raises_where_numpy_has_no_type(version):
    # bindings_wheel/tensorrt/__init__.py: "fp8 and bfloat16 have no equivalent numpy type" → TypeError.
    trt = make_fake_tensorrt(version)
    assert trt.nptype(trt.float16).__name__ == "float16"
    for name in ("BF16", "FP8", "INT4", "FP4", "E8M0"):
        if hasattr(trt.DataType, name):
            with pytest.raises(TypeError, match=NPTYPE_ERROR):
                trt.nptype(trt.DataType[name])


def test_builder_flags_per_release():
    # pyCore.cpp py::enum_<BuilderFlag>: 11.0 drops FP16, INT8, BF16, FP8, INT4, FP4, WEIGHTLESS and the
    # precision-constraint flags; STRICT_TYPES exists only in 8.x; BF16 arrives in 10.0.
    flags = {v: set(make_fake_tensorrt(v).BuilderFlag.__members__) for v in ("8.5.2.2", "10.3.0", "11.1.0")}
    assert {"FP16", "INT8", "OBEY_PRECISION_CONSTRAINTS", "STRICT_TYPES"} <= flags["8.5.2.2"]
    assert "BF16" not in flags["8.5.2.2"] and "STRICT_TYPES" not in flags["10.3.0"]
    assert {"FP16", "BF16", "FP8", "INT4", "OBEY_PRECISION_CONSTRAINTS"} <= flags["10.3.0"]
    assert not {"FP16", "INT8", "BF16", "FP8", "OBEY_PRECISION_CONSTRAINTS"} & flags["11.1.0"]
    assert {"GPU_FALLBACK", "REFIT", "TF32"} <= flags["11.1.0"]


def test_network_creation_flags_per_release():
    # 10.x: EXPLICIT_BATCH (deprecated, 0) and STRONGLY_TYPED (1); 11.1 NvInfer.h: kSTRONGLY_TYPED = 0 (deprecated,
    # "always enabled") and no EXPLICIT_BATCH. create_network still takes flags on 11 ("flags"_a = 0U).
    ten, eleven = make_fake_tensorrt("10.3.0"), make_fake_tensorrt("11.1.0")
    assert dict(ten.NetworkDefinitionCreationFlag.__members__) == {"EXPLICIT_BATCH": 0, "STRONGLY_TYPED": 1}
    assert "EXPLICIT_BATCH" not in eleven.NetworkDefinitionCreationFlag.__members__
    assert eleven.NetworkDefinitionCreationFlag.STRONGLY_TYPED == 0
    builder = eleven.Builder(eleven.Logger())
    assert builder.create_network(1 << int(eleven.NetworkDefinitionCreationFlag.STRONGLY_TYPED)).flags == 1


def test_memory_pool_types_per_release():
    # pyCore.cpp py::enum_<MemoryPoolType>: TACTIC_DRAM from 8.6, TACTIC_SHARED_MEMORY from 10.0.
    assert "TACTIC_DRAM" not in make_fake_tensorrt("8.5.2.2").MemoryPoolType.__members__
    assert make_fake_tensorrt("10.3.0").MemoryPoolType.TACTIC_SHARED_MEMORY == 5


def test_platform_has_fast_fp16_is_gone_in_11():
    # Bound as def_property_readonly on 8.5 … 10.16; 11.1 pyCore.cpp's Builder has no platform_has_* at all.
    ten = make_fake_tensorrt("10.3.0")
    assert ten.Builder(ten.Logger()).platform_has_fast_fp16
    trt = make_fake_tensorrt("11.1.0")
    assert not hasattr(trt.Builder(trt.Logger()), "platform_has_fast_fp16")


def test_an_invalid_profile_is_refused_with_minus_one():
    # NvInfer.h addOptimizationProfile: "the index ... if the input is valid, or -1 if the input is not valid";
    # IOptimizationProfile::isValid checks min <= opt <= max. A rank mismatch already fails set_shape
    # (pyCore.cpp opt_profile_set_shape: PY_ASSERT_RUNTIME_ERROR(setDimensions(...))).
    trt = make_fake_tensorrt("10.3.0")
    builder = trt.Builder(trt.Logger())
    config = builder.create_builder_config()
    bad = builder.create_optimization_profile()
    bad.set_shape("input", (4, 3), (1, 3), (8, 3))
    assert not bad and config.add_optimization_profile(bad) == -1 and config.num_optimization_profiles == 0
    good = builder.create_optimization_profile()
    good.set_shape("input", (1, 3), (4, 3), (8, 3))
    assert config.add_optimization_profile(good) == 0
    with pytest.raises(RuntimeError, match="inconsistent"):
        builder.create_optimization_profile().set_shape("input", (1, 3), (4, 3, 1), (8, 3))


def test_pycuda_context_pop_is_static():
    # pycuda src/wrapper/wrap_cudadrv.cpp: .DEF_SIMPLE_METHOD(pop) .staticmethod("pop"); popping an empty stack
    # throws "cannot pop non-current context".
    _, driver = make_fake_pycuda(make_fake_tensorrt("10.3.0"))
    first = driver.Device(0).make_context()
    second = driver.Device(0).make_context()
    assert driver.Context.get_current() is second
    first.pop()  # pops the current context, whichever object it is called on
    assert driver.stack == [first]
    driver.Context.pop()
    with pytest.raises(driver.LogicError, match="cannot pop non-current context"):
        driver.Context.pop()


@pytest.fixture(scope="module")
def affine(tmp_path_factory):
    import torch
    from torch_models import Affine, export

    return export(Affine(2.0), torch.zeros(1, 4), tmp_path_factory.mktemp("onnx") / "affine.onnx",
                  dynamic_batch=False)

