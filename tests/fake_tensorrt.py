"""TEST DOUBLE: fake ``tensorrt`` (and ``pycuda.driver``) modules standing in for NVIDIA TensorRT, which cannot
run on this machine (no GPU, no TensorRT). Nothing here is TensorRT; it imitates its Python API surface.

``make_fake_tensorrt(version)`` imitates one release's bindings, read from NVIDIA/TensorRT's
python/src/infer/pyCore.cpp, pyGraph.cpp, pyFoundationalTypes.cpp, include/NvInfer.h and the wheel's
``tensorrt/__init__.py`` on the release/8.5 … release/11.1 branches:

* enum members (and their C++ values) per release: ``DataType`` gains FP8 in 8.6, BF16/INT64/INT4 in 10.0, FP4 in
  10.8, E8M0 in 10.12; ``BuilderFlag`` loses FP16/INT8/BF16/FP8/INT4/FP4 and the precision-constraint flags in 11;
  ``NetworkDefinitionCreationFlag`` has EXPLICIT_BATCH up to 10.x and keeps only STRONGLY_TYPED (always on) and the
  plugin flags in 11;
* objects have fixed attribute sets, as pybind11 classes do: assigning an attribute a release does not bind raises
  AttributeError (``config.max_workspace_size`` exists, deprecated, only in 8.x; ``layer.precision`` and
  ``set_output_type`` are gone in 11, deprecated from 10.12; ``builder.platform_has_fast_fp16`` is gone in 11);
* ``trt.nptype`` raises TypeError for the types numpy lacks (BF16, FP8, INT4, FP4, E8M0), as the real one does;
* ``config.add_optimization_profile`` returns -1 for a profile that fails ``IOptimizationProfile::isValid``;
* the fake ``pycuda.driver.Context.pop`` is a static method that pops whatever context is current, as pycuda's;
* INT8 as each release has it: ``IInt8EntropyCalibrator2`` and ``config.int8_calibrator`` up to 10.x (setting the
  calibrator warns from 10.1, where NvInfer.h deprecates it "superseded by explicit quantization"; 11 binds
  neither); a build with the INT8 flag and neither Q/DQ layers nor a calibration cache (or one that names another
  TensorRT version in its ``TRT-<getInferLibVersion()>-EntropyCalibration2`` header) fails as TensorRT's does
  ("Calibration failure occurred with no scaling factors detected"), the calibrator's ``get_batch`` returning None;
  a strongly typed network refuses the precision flags (FP16, INT8, BF16, FP8: "not allowed"); a weakly typed
  network with Q/DQ layers needs the INT8 flag; the 8.x ONNX parser takes Q/DQ only up to opset 17 and with FP32
  scales.

Every call that matters is appended to the module's ``calls`` list as a tuple, so tests assert what the code
under test asked TensorRT to do. The parser reads the real ONNX file with the ``onnx`` package: network inputs
get the model's names and shapes (-1 for dynamic axes), and there is one layer per ONNX node, named after it.
The "plan" it builds is a JSON note naming the ONNX file; the fake runtime runs it with onnxruntime on the CPU,
through the fake pycuda's host-memory "device" buffers, so the runner's data path is exercised too.
"""

from __future__ import annotations

import enum
import itertools
import json
import sys
import time
import types
import warnings

import numpy as np
import onnx
from fake_tensorrt_layers import install_network_api, problems
from fake_tensorrt_nms import evaluate, install_plugin_api, serialize

PLAN_MAGIC = b"FAKEPLAN"
CACHE_MAGIC = b"FAKECACHE:"
NPTYPE_ERROR = "Could not resolve TensorRT datatype to an equivalent numpy datatype."

# (name, C++ value, first release). NvInferRuntimeBase.h numbers DataType; pyFoundationalTypes.cpp binds it.
_DATA_TYPES = [("FLOAT", 0, (8, 5)), ("HALF", 1, (8, 5)), ("INT8", 2, (8, 5)), ("INT32", 3, (8, 5)),
               ("BOOL", 4, (8, 5)), ("UINT8", 5, (8, 5)), ("FP8", 6, (8, 6)), ("BF16", 7, (10, 0)),
               ("INT64", 8, (10, 0)), ("INT4", 9, (10, 0)), ("FP4", 10, (10, 8)), ("E8M0", 11, (10, 12))]
_ALIASES = {"float32": "FLOAT", "float16": "HALF", "bfloat16": "BF16", "int8": "INT8", "int32": "INT32",
            "int64": "INT64", "bool": "BOOL", "uint8": "UINT8", "fp8": "FP8", "int4": "INT4", "fp4": "FP4",
            "e8m0": "E8M0"}
# What the wheel's nptype() maps; every other type raises TypeError ("fp8 and bfloat16 have no equivalent").
_NUMPY = {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32, "INT64": np.int64,
          "BOOL": np.bool_, "UINT8": np.uint8}

# BuilderFlag as bound per release, with NvInfer.h's values (11 renumbers what it keeps).
_BUILDER_FLAGS = {
    (8, 5): "FP16=0 INT8=1 DEBUG=2 GPU_FALLBACK=3 STRICT_TYPES=4 REFIT=5 DISABLE_TIMING_CACHE=6 TF32=7 "
            "SPARSE_WEIGHTS=8 SAFETY_SCOPE=9 OBEY_PRECISION_CONSTRAINTS=10 PREFER_PRECISION_CONSTRAINTS=11 "
            "DIRECT_IO=12 REJECT_EMPTY_ALGORITHMS=13 ENABLE_TACTIC_HEURISTIC=14",
    (8, 6): "-REJECT_EMPTY_ALGORITHMS -ENABLE_TACTIC_HEURISTIC VERSION_COMPATIBLE=15 EXCLUDE_LEAN_RUNTIME=16 FP8=17",
    (10, 0): "FP16=0 INT8=1 DEBUG=2 GPU_FALLBACK=3 REFIT=4 DISABLE_TIMING_CACHE=5 TF32=6 SPARSE_WEIGHTS=7 "
             "SAFETY_SCOPE=8 OBEY_PRECISION_CONSTRAINTS=9 PREFER_PRECISION_CONSTRAINTS=10 DIRECT_IO=11 "
             "VERSION_COMPATIBLE=13 EXCLUDE_LEAN_RUNTIME=14 FP8=15 ERROR_ON_TIMING_CACHE_MISS=16 BF16=17 "
             "DISABLE_COMPILATION_CACHE=18 STRIP_PLAN=19 WEIGHTLESS=19 REFIT_IDENTICAL=20 WEIGHT_STREAMING=21",
    (10, 1): "INT4=22", (10, 2): "REFIT_INDIVIDUAL=23", (10, 6): "STRICT_NANS=24 MONITOR_MEMORY=25",
    (10, 8): "FP4=26 EDITABLE_TIMING_CACHE=27", (10, 12): "DISTRIBUTIVE_INDEPENDENCE=28",
    (11, 0): "DEBUG=2 GPU_FALLBACK=3 REFIT=4 DISABLE_TIMING_CACHE=5 TF32=6 SPARSE_WEIGHTS=7 SAFETY_SCOPE=8 "
             "DIRECT_IO=11 VERSION_COMPATIBLE=12 EXCLUDE_LEAN_RUNTIME=13 ERROR_ON_TIMING_CACHE_MISS=15 "
             "DISABLE_COMPILATION_CACHE=17 STRIP_PLAN=18 REFIT_IDENTICAL=19 WEIGHT_STREAMING=20 "
             "REFIT_INDIVIDUAL=22 STRICT_NANS=23 MONITOR_MEMORY=24 EDITABLE_TIMING_CACHE=26 "
             "DISTRIBUTIVE_INDEPENDENCE=27",
}
_NETWORK_FLAGS = {(8, 5): "EXPLICIT_BATCH=0 EXPLICIT_PRECISION=1", (10, 0): "EXPLICIT_BATCH=0 STRONGLY_TYPED=1",
                  (10, 9): "PREFER_JIT_PYTHON_PLUGINS=2 PREFER_AOT_PYTHON_PLUGINS=3",
                  (11, 0): "STRONGLY_TYPED=0 PREFER_JIT_PYTHON_PLUGINS=1 PREFER_AOT_PYTHON_PLUGINS=2"}
_MEMORY_POOLS = {(8, 5): "WORKSPACE=0 DLA_MANAGED_SRAM=1 DLA_LOCAL_DRAM=2 DLA_GLOBAL_DRAM=3",
                 (8, 6): "TACTIC_DRAM=4", (10, 0): "TACTIC_SHARED_MEMORY=5"}
_DEPRECATED_PRECISION = "Deprecated in TensorRT 10.12. Superseded by strong typing."


def _release(version: str) -> tuple[int, int]:
    major, minor = (int(part) for part in version.split(".")[:2])
    return major, minor


def _generation(version: str) -> int:
    major = _release(version)[0]
    return 8 if major <= 8 else 10 if major in (9, 10) else 11


def _imitated(version: str) -> tuple[int, int]:
    """The release whose bindings the fake copies: releases before 8.5 get 8.5's, and 9.x (between 8.6 and 10.0,
    which orinkit treats as generation 10) gets 10.0's."""
    gen = _generation(version)
    return max(_release(version), (8, 5) if gen == 8 else (gen, 0))


def _enum(name: str, table: dict, version: str, *, per_generation: bool = True) -> type[enum.IntEnum]:
    """The members ``table`` gives ``version``: the entries up to that release (only its generation's where each
    generation rebinds the enum), in order; an entry adds ``NAME=value`` items and drops ``-NAME`` ones."""
    gen, release = _generation(version), _imitated(version)
    members: dict[str, int] = {}
    for since, text in sorted(table.items()):
        if (per_generation and _generation(f"{since[0]}.{since[1]}") != gen) or since > release:
            continue
        for item in text.split():
            if item.startswith("-"):
                members.pop(item[1:])
            else:
                key, value = item.split("=")
                members[key] = int(value)
    return enum.IntEnum(name, list(members.items()))


class _Fixed:
    """pybind11 classes have no instance __dict__: assigning an attribute the bindings do not define raises
    AttributeError. ``__slots__`` in each subclass gives the fake the same fixed attribute set."""

    __slots__ = ()


def _deprecated(use_instead: str) -> None:
    # utils::issueDeprecationWarning: PyErr_WarnEx(PyExc_DeprecationWarning, "Use ... instead.", 1)
    warnings.warn(f"Use {use_instead} instead.", DeprecationWarning, stacklevel=3)


def _to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 → BF16 bits (uint16), rounding to nearest even; NaN stays NaN."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def _from_bf16(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def make_fake_tensorrt(version: str, *, dla_cores: int = 0, oom_above: int | None = None, fail_parse: bool = False,
                       layers: tuple[str, ...] = (), fail_build: str | None = None,
                       io_types: dict[str, str] | None = None, plugins: bool = True) -> types.ModuleType:
    """A fake ``tensorrt`` module of ``version``.

    dla_cores: ``builder.num_DLA_cores``. oom_above: builds return None, logging an out-of-memory warning and the
    "Could not find any implementation" error, while the workspace limit exceeds it. fail_parse: the parser
    fails with two errors. layers: extra layer names the parser adds after the per-node ones (how TensorRT names
    the further layers of one node, e.g. ``/conv/Conv_7``). fail_build: builds fail with this error message.
    io_types: engine I/O tensor name → DataType member name (e.g. ``{"output": "BF16"}``), for engines whose I/O
    TensorRT keeps in a type the ONNX does not name; BF16 tensors hold BF16 bits in "device" memory.
    plugins: whether ``init_libnvinfer_plugins`` finds the standard plugins (EfficientNMS_TRT); False imitates a
    device without libnvinfer-plugin. The layer and plugin API of each release is in tests/fake_tensorrt_layers.py
    and tests/fake_tensorrt_nms.py.
    """
    gen, release = _generation(version), _imitated(version)
    trt = types.ModuleType("tensorrt", "TEST DOUBLE standing in for TensorRT " + version)
    trt.__version__ = version
    trt.calls = calls = []
    trt.device_memory = {}  # address → bytearray, shared with make_fake_pycuda

    DataType = enum.IntEnum("DataType", [(n, v) for n, v, since in _DATA_TYPES if since <= release])
    trt.DataType = DataType
    for alias, member in _ALIASES.items():
        if hasattr(DataType, member):
            setattr(trt, alias, DataType[member])

    def nptype(trt_type):
        if isinstance(trt_type, DataType) and trt_type.name in _NUMPY:
            return _NUMPY[trt_type.name]
        raise TypeError(NPTYPE_ERROR)

    trt.nptype = nptype
    onnx_types = {onnx.TensorProto.FLOAT: DataType.FLOAT, onnx.TensorProto.FLOAT16: DataType.HALF,
                  onnx.TensorProto.INT8: DataType.INT8, onnx.TensorProto.INT32: DataType.INT32,
                  onnx.TensorProto.BOOL: DataType.BOOL, onnx.TensorProto.UINT8: DataType.UINT8,
                  # TensorRT 8 has no INT64 tensors: the parser narrows them to INT32.
                  onnx.TensorProto.INT64: getattr(DataType, "INT64", DataType.INT32)}

    trt.NetworkDefinitionCreationFlag = _enum("NetworkDefinitionCreationFlag", _NETWORK_FLAGS, version)
    trt.BuilderFlag = _enum("BuilderFlag", _BUILDER_FLAGS, version)
    trt.MemoryPoolType = _enum("MemoryPoolType", _MEMORY_POOLS, version, per_generation=False)
    trt.DeviceType = enum.IntEnum("DeviceType", [("GPU", 0), ("DLA", 1)])
    trt.TensorIOMode = enum.IntEnum("TensorIOMode", [("NONE", 0), ("INPUT", 1), ("OUTPUT", 2)])
    _add_logger(trt)
    check_logger = trt._check_logger

    class Tensor(_Fixed):
        __slots__ = ("name", "shape", "_dtype")

        def __init__(self, name: str, shape: tuple[int, ...], dtype) -> None:
            self.name, self.shape, self._dtype = name, tuple(shape), dtype

        def _set_dtype(self, dtype) -> None:
            self._dtype = dtype

        # pyGraph.cpp on 11: def_property_readonly("dtype"): strongly typed networks fix tensor types.
        dtype = property(lambda self: self._dtype, _set_dtype if gen < 11 else None)

    class Layer(_Fixed):
        """11.x ILayer: name, type, inputs and outputs; precision constraints are not bound at all."""

        __slots__ = ("name", "_type", "_outputs", "metadata")

        def __init__(self, name: str, op: str, outputs: list[Tensor]) -> None:
            self.name, self._type, self._outputs, self.metadata = name, op, outputs, ""

        type = property(lambda self: self._type)
        num_outputs = property(lambda self: len(self._outputs))

        def get_output(self, index: int) -> Tensor:
            return self._outputs[index]

        def get_output_type(self, index: int):
            return self._outputs[index].dtype

    class PrecisionLayer(Layer):
        """8.x/10.x ILayer: precision constraints exist (deprecated from 10.12, gone in 11)."""

        __slots__ = ("_precision", "_precision_is_set")

        def __init__(self, name: str, op: str, outputs: list[Tensor]) -> None:
            super().__init__(name, op, outputs)
            self._precision, self._precision_is_set = DataType.FLOAT, False

        def _set_precision(self, dtype) -> None:
            if release >= (10, 12):
                warnings.warn(_DEPRECATED_PRECISION, DeprecationWarning, stacklevel=2)
            calls.append(("layer.precision", self.name, dtype))
            self._precision, self._precision_is_set = dtype, True

        precision = property(lambda self: self._precision, _set_precision)
        precision_is_set = property(lambda self: self._precision_is_set)

        def set_output_type(self, index: int, dtype) -> None:
            if release >= (10, 12):
                warnings.warn(_DEPRECATED_PRECISION, DeprecationWarning, stacklevel=2)
            if not 0 <= index < len(self._outputs):
                raise IndexError(index)
            calls.append(("layer.set_output_type", self.name, index, dtype))

    layer_class = PrecisionLayer if gen < 11 else Layer

    class Network(_Fixed):
        __slots__ = ("_flags", "_inputs", "_layers", "_outputs", "_source", "_program", "_errors")

        def __init__(self, flags: int) -> None:
            self._flags, self._inputs, self._layers, self._outputs, self._source = flags, [], [], [], None
            self._program, self._errors = [], []  # layers added after parsing; API misuse TensorRT reports

        flags = property(lambda self: self._flags)
        num_inputs = property(lambda self: len(self._inputs))
        num_layers = property(lambda self: len(self._layers))
        num_outputs = property(lambda self: len(self._outputs))

        def get_input(self, index: int) -> Tensor:
            return self._inputs[index]

        def get_layer(self, index: int):
            return self._layers[index]

        def get_output(self, index: int) -> Tensor:
            return self._outputs[index]

    class ParserError(_Fixed):
        __slots__ = ("_text",)

        def __init__(self, text: str) -> None:
            self._text = text

        def desc(self) -> str:
            return self._text

        def __str__(self) -> str:
            return f"In node -1 (parseGraph): INVALID_NODE: {self._text}"

    class OnnxParser(_Fixed):
        __slots__ = ("_network", "_logger", "_errors")

        def __init__(self, network: Network, logger) -> None:
            check_logger(logger)
            self._network, self._logger, self._errors = network, logger, []

        num_errors = property(lambda self: len(self._errors))

        def get_error(self, index: int) -> ParserError:
            return self._errors[index]

        def parse_from_file(self, path: str) -> bool:
            calls.append(("parse_from_file", path))
            if fail_parse:
                self._errors = [ParserError("No importer registered for op: FakeOp"),
                                ParserError("Assertion failed: fake parse failure")]
                return False
            if gen == 8 and not self._network.flags & (1 << trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH):
                self._errors = [ParserError("Network must have explicit batch dimension")]
                return False
            model = onnx.load(path)
            problem = _parser_limits(model) if gen == 8 else None
            if problem:
                self._errors = [ParserError(problem)]
                return False
            _populate(self._network, model, path)
            return True

    def _parser_limits(model: onnx.ModelProto) -> str | None:
        # onnx-tensorrt 8.5/8.6: opsets 7..17; QuantizeLinear/DequantizeLinear scales must be FLOAT.
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        qdq = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
        if opset > 17 and qdq:  # other ops of a newer opset often import anyway; Q/DQ's opset-19 form does not
            return f"{qdq[0].op_type} {qdq[0].name}: unsupported at ONNX opset {opset}; this parser supports opsets " \
                   "up to 17"
        scale_types = {i.name: i.data_type for i in model.graph.initializer}
        for node in model.graph.node:
            if node.op_type == "Constant":
                for attribute in node.attribute:
                    if attribute.name == "value":
                        scale_types[node.output[0]] = attribute.t.data_type
        for node in model.graph.node:
            if node.op_type in ("QuantizeLinear", "DequantizeLinear") and \
                    scale_types.get(node.input[1], onnx.TensorProto.FLOAT) != onnx.TensorProto.FLOAT:
                return f"{node.op_type} {node.name}: Assertion failed: scale must be FLOAT (FP32) in this version"
        return None

    def _populate(network: Network, model: onnx.ModelProto, path: str) -> None:
        inferred = onnx.shape_inference.infer_shapes(model)
        types_by_name = {v.name: v.type.tensor_type.elem_type
                         for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]}
        initializers = {i.name for i in model.graph.initializer}
        for value in model.graph.input:
            if value.name in initializers:
                continue
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1
                         for d in value.type.tensor_type.shape.dim)
            network._inputs.append(Tensor(value.name, dims, onnx_types[value.type.tensor_type.elem_type]))
        for node in model.graph.node:
            outputs = [Tensor(out, (), onnx_types.get(types_by_name.get(out), DataType.FLOAT)) for out in node.output]
            network._layers.append(layer_class(node.name or f"node_of_{node.output[0]}", node.op_type, outputs))
        for name in layers:
            network._layers.append(layer_class(name, "Extra", [Tensor(name + "_out", (), DataType.FLOAT)]))
        # Network outputs carry their shapes, as TensorRT's shape inference gives them (-1 where dynamic).
        network._outputs = [Tensor(v.name, tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1
                                                  for d in v.type.tensor_type.shape.dim),
                                   onnx_types[v.type.tensor_type.elem_type]) for v in model.graph.output]
        network._source = path

    trt.OnnxParser = OnnxParser
    trt.IOptimizationProfile = _profile_class(calls)
    install_network_api(trt, release=release, Tensor=Tensor, layer_class=layer_class, network_class=Network)
    install_plugin_api(trt, release=release, plugins=plugins)
    _add_builder(trt, version, gen, release, Network, dla_cores=dla_cores, oom_above=oom_above,
                 fail_build=fail_build)
    _add_runtime(trt, version, check_logger, dict(io_types or {}))
    return trt


def _add_logger(trt: types.ModuleType) -> None:
    class ILogger:
        # A Python subclass of a pybind11 class gets a __dict__ (so no __slots__ here): orinkit's logger adds fields.
        class Severity(enum.IntEnum):
            INTERNAL_ERROR = 0
            ERROR = 1
            WARNING = 2
            INFO = 3
            VERBOSE = 4

        def __init__(self) -> None:
            self._fake_ilogger_initialised = True

        def log(self, severity, msg) -> None:
            raise NotImplementedError

    class Logger(ILogger):
        INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = ILogger.Severity

        def __init__(self, min_severity=ILogger.Severity.WARNING) -> None:
            super().__init__()
            self.min_severity = min_severity

        def log(self, severity, msg) -> None:
            pass

    def check_logger(logger) -> None:
        # pybind11 raises this when a Python subclass's __init__ skips the base class's.
        if not getattr(logger, "_fake_ilogger_initialised", False):
            raise TypeError("tensorrt.ILogger.__init__() must be called when overriding __init__")

    trt.ILogger, trt.Logger, trt._check_logger = ILogger, Logger, check_logger


def _profile_class(calls: list) -> type:
    class IOptimizationProfile(_Fixed):
        """set_shape raises RuntimeError where IOptimizationProfile::setDimensions returns false (pyCore.cpp's
        opt_profile_set_shape): a rank that disagrees, or a negative extent. min <= opt <= max is checked by
        isValid() (bound as __bool__), which IBuilderConfig::addOptimizationProfile consults: -1 when invalid."""

        __slots__ = ("_shapes", "extra_memory_target")

        def __init__(self) -> None:
            self._shapes, self.extra_memory_target = {}, 1.0

        def set_shape(self, input: str, min, opt, max) -> None:  # noqa: A002 - the bindings' keyword names
            calls.append(("profile.set_shape", input, tuple(min), tuple(opt), tuple(max)))
            for which, dims in (("min", min), ("opt", opt), ("max", max)):
                if len(dims) != len(min) or any(d < 0 for d in dims):
                    raise RuntimeError(f"Shape provided for {which} is inconsistent with other shapes.")
            self._shapes[input] = (tuple(min), tuple(opt), tuple(max))

        def get_shape(self, input: str) -> list[tuple[int, ...]]:  # noqa: A002
            return list(self._shapes.get(input, ()))

        def __bool__(self) -> bool:
            return all(a <= b <= c for low, opt, high in self._shapes.values() for a, b, c in zip(low, opt, high))

    return IOptimizationProfile


def _add_builder(trt: types.ModuleType, version: str, gen: int, release: tuple[int, int], network_class: type, *,
                 dla_cores: int, oom_above: int | None, fail_build: str | None) -> None:
    calls, severity = trt.calls, trt.ILogger.Severity

    class HostMemory(bytes):
        nbytes = property(len)

    class ITimingCache(_Fixed):
        __slots__ = ("data",)

        def __init__(self, data: bytes) -> None:
            self.data = data

        def serialize(self) -> HostMemory:
            calls.append(("timing_cache.serialize",))
            return HostMemory(self.data)

    class IBuilderConfig(_Fixed):
        __slots__ = ("_flags", "_pools", "_profiles", "_timing_cache", "_device_type", "_dla_core", "profile_stream",
                     "_calibrator", *(("builder_optimization_level",) if gen >= 10 else ()))

        def __init__(self) -> None:
            self._flags, self._pools, self._profiles, self._timing_cache = 0, {}, [], None
            self._calibrator = None
            self._device_type, self._dla_core, self.profile_stream = trt.DeviceType.GPU, -1, 0
            if gen >= 10:
                self.builder_optimization_level = 3

        def _set_device_type(self, value) -> None:
            calls.append(("default_device_type", value))
            self._device_type = value

        def _set_dla_core(self, value: int) -> None:
            calls.append(("DLA_core", value))
            self._dla_core = value

        default_device_type = property(lambda self: self._device_type, _set_device_type)
        DLA_core = property(lambda self: self._dla_core, _set_dla_core)
        num_optimization_profiles = property(lambda self: len(self._profiles))

        def _set_flags(self, value: int) -> None:
            self._flags = int(value)

        flags = property(lambda self: self._flags, _set_flags)

        def set_flag(self, flag) -> None:
            calls.append(("set_flag", flag))
            self._flags |= 1 << int(flag)

        def get_flag(self, flag) -> bool:
            return bool(self._flags & (1 << int(flag)))

        def clear_flag(self, flag) -> None:
            self._flags &= ~(1 << int(flag))

        def set_memory_pool_limit(self, pool, pool_size: int) -> None:
            calls.append(("set_memory_pool_limit", pool, pool_size))
            self._pools[pool] = pool_size

        def get_memory_pool_limit(self, pool) -> int:
            return self._pools.get(pool, 1 << 40)

        def add_optimization_profile(self, profile) -> int:
            calls.append(("add_optimization_profile", dict(profile._shapes)))
            if not profile:
                return -1  # NvInfer.h: "or -1 if the input is not valid"
            self._profiles.append(profile)
            return len(self._profiles) - 1

        def create_timing_cache(self, serialized_timing_cache) -> ITimingCache:
            data = bytes(serialized_timing_cache)
            calls.append(("create_timing_cache", data))
            return ITimingCache(data or CACHE_MAGIC + version.encode())

        def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
            calls.append(("set_timing_cache", cache.data, ignore_mismatch))
            if not cache.data.startswith(CACHE_MAGIC + version.encode()) and not ignore_mismatch:
                return False
            self._timing_cache = cache
            return True

        def get_timing_cache(self) -> ITimingCache:
            return self._timing_cache

    if gen < 11:
        class IInt8Calibrator:
            # A pybind11 trampoline class: a Python subclass must call the base __init__ (pybind11 raises
            # "__init__() must be called when overriding __init__" otherwise); 11 binds no calibrators.
            def __init__(self) -> None:
                self._initialised = True

        class IInt8EntropyCalibrator2(IInt8Calibrator):
            pass

        trt.IInt8Calibrator, trt.IInt8EntropyCalibrator2 = IInt8Calibrator, IInt8EntropyCalibrator2

        def _get_calibrator(self):
            return self._calibrator

        def _set_calibrator(self, calibrator) -> None:
            if release >= (10, 1):
                warnings.warn("Deprecated in TensorRT 10.1. Superseded by explicit quantization.",
                              DeprecationWarning, stacklevel=2)
            if calibrator is not None and not (isinstance(calibrator, IInt8Calibrator)
                                               and getattr(calibrator, "_initialised", False)):
                raise TypeError("int8_calibrator: incompatible type (an IInt8Calibrator whose __init__ ran)")
            calls.append(("int8_calibrator", type(calibrator).__name__))
            self._calibrator = calibrator

        IBuilderConfig.int8_calibrator = property(_get_calibrator, _set_calibrator)

    if gen == 8:
        # pyCore.cpp (8.5): max_workspace_size = deprecateMember(get/setMaxWorkspaceSize, "set_memory_pool_limit");
        # 10.0 removed it, so the fixed attribute set rejects it there.
        def _get_workspace(self) -> int:
            _deprecated("get_memory_pool_limit")
            return self.get_memory_pool_limit(trt.MemoryPoolType.WORKSPACE)

        def _set_workspace(self, size: int) -> None:
            _deprecated("set_memory_pool_limit")
            self._pools[trt.MemoryPoolType.WORKSPACE] = size

        IBuilderConfig.max_workspace_size = property(_get_workspace, _set_workspace)

    def _lib_version() -> int:
        # getInferLibVersion(): 8.x as MAJOR*1000 + MINOR*100 + PATCH, 10 and later as MAJOR*10000 + ...
        parts = (list(int(p) for p in version.split(".")[:3]) + [0, 0])[:3]
        return parts[0] * (1000 if parts[0] < 10 else 10000) + parts[1] * 100 + parts[2]

    def _precision_problem(network, config: IBuilderConfig) -> str | None:
        # 11 is strongly typed always; 10.x when created with the flag; 8.x has no such network.
        typed_flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
        strongly = gen >= 11 or (typed_flag is not None and bool(network.flags & (1 << int(typed_flag))))
        names = [n for n in ("FP16", "INT8", "BF16", "FP8") if hasattr(trt.BuilderFlag, n)
                 and config.get_flag(getattr(trt.BuilderFlag, n))]
        if strongly and names:
            return ("4: [network.cpp::validate::2925] Error Code 4: API Usage Error (Builder flags "
                    f"{', '.join('k' + n for n in names)} are not allowed with a strongly typed network.)")
        has_qdq = any(network.get_layer(i).type in ("QuantizeLinear", "DequantizeLinear")
                      for i in range(network.num_layers))
        int8 = hasattr(trt.BuilderFlag, "INT8") and config.get_flag(trt.BuilderFlag.INT8)
        if has_qdq and not strongly and not int8:
            return ("4: [network.cpp::validate::3011] Error Code 4: Internal Error (Int8 precision has been set for "
                    "a layer or layer output, but int8 is not configured in the builder)")
        if int8 and not has_qdq and not strongly:
            calibrator = getattr(config, "_calibrator", None)
            cache = calibrator.read_calibration_cache() if calibrator is not None else None
            calls.append(("read_calibration_cache", bytes(cache) if cache else None))
            header = f"TRT-{_lib_version()}-EntropyCalibration2"
            if cache and bytes(cache).decode("ascii", "replace").splitlines()[0] == header:
                return None
            if cache:  # another version's cache is ignored, and calibration asks for batches
                calls.append(("calibration_cache_ignored", header))
            if calibrator is None or calibrator.get_batch([network.get_input(0).name]) is None:
                return ("4: [standardEngineBuilder.cpp::initCalibrationParams::1460] Error Code 4: Internal Error "
                        "(Calibration failure occurred with no scaling factors detected. This could be due to no "
                        "int8 calibrator or insufficient custom scales for network layers.)")
        return None

    class Builder(_Fixed):
        __slots__ = ("_logger", "max_threads")

        def __init__(self, logger) -> None:
            trt._check_logger(logger)
            self._logger, self.max_threads = logger, 1

        logger = property(lambda self: self._logger)
        num_DLA_cores = property(lambda self: dla_cores)
        max_DLA_batch_size = property(lambda self: 32 if dla_cores else 1)

        def create_network(self, flags: int = 0):
            calls.append(("create_network", flags))
            return network_class(flags)

        def create_builder_config(self) -> IBuilderConfig:
            return IBuilderConfig()

        def create_optimization_profile(self):
            return trt.IOptimizationProfile()

        def build_serialized_network(self, network, config: IBuilderConfig):
            workspace = config._pools.get(trt.MemoryPoolType.WORKSPACE)
            calls.append(("build_serialized_network", workspace))
            log = self._logger.log
            if fail_build:
                log(severity.ERROR, fail_build)
                return None
            if oom_above is not None and (workspace is None or workspace > oom_above):
                log(severity.WARNING, f"Requested amount of GPU memory ({workspace} bytes) could not be "
                                      "allocated (out of memory). There may not be enough free memory.")
                log(severity.ERROR, "10: [optimizer.cpp::computeCosts::3728] Error Code 10: Internal "
                                    "Error (Could not find any implementation for node /fake/Node.)")
                return None
            dynamic = [network.get_input(i).name for i in range(network.num_inputs) if -1 in network.get_input(i).shape]
            profiled = {name for p in config._profiles for name in p._shapes}
            if set(dynamic) - profiled:
                log(severity.ERROR, "4: [network.cpp::validate::3084] Error Code 4: Internal Error (Network has "
                                    "dynamic or shape inputs, but no optimization profile has been defined.)")
                return None
            problem = _precision_problem(network, config)
            if problem:
                log(severity.ERROR, problem)
                return None
            if config._timing_cache is not None:
                config._timing_cache.data += b"+tactics"
            added = problems(network, trt.DataType)
            if added:
                for text in added:
                    log(severity.ERROR, text)
                return None
            plan = {"version": version, "onnx": network._source, "int8": bool(
                        hasattr(trt.BuilderFlag, "INT8") and config.get_flag(trt.BuilderFlag.INT8)),
                    "profile": {n: s for p in config._profiles[:1] for n, s in p._shapes.items()}}
            if network._program:  # layers added after parsing: the engine evaluates them after onnxruntime
                plan["program"] = serialize(network)
                plan["outputs"] = [(t.name, t.dtype.name, list(t.shape)) for t in network._outputs]
            return HostMemory(PLAN_MAGIC + json.dumps(plan).encode())

    if gen < 11:
        # pyCore.cpp binds these up to 10.x; 11.0 drops them (no FP16/INT8 flags to decide on).
        Builder.platform_has_fast_fp16 = property(lambda self: True)
        Builder.platform_has_fast_int8 = property(lambda self: True)
        Builder.platform_has_tf32 = property(lambda self: False)
    trt.Builder, trt.IBuilderConfig, trt.ITimingCache = Builder, IBuilderConfig, ITimingCache


def _add_runtime(trt: types.ModuleType, version: str, check_logger, io_types: dict[str, str]) -> None:
    """The fake's engine runs the ONNX file its plan names with onnxruntime, reading and writing the buffers
    whose fake device addresses the code under test set."""
    calls, DataType = trt.calls, trt.DataType
    unknown = {name: kind for name, kind in io_types.items() if not hasattr(DataType, kind)}
    if unknown:
        raise ValueError(f"TensorRT {version} has no DataType {unknown}")

    def read(address: int, dtype, count: int) -> np.ndarray:
        if dtype.name == "BF16":
            return _from_bf16(np.frombuffer(trt.device_memory[address], np.uint16, count))
        return np.frombuffer(trt.device_memory[address], _NUMPY[dtype.name], count)

    def write(address: int, dtype, values: np.ndarray) -> None:
        if dtype.name == "BF16":
            values = _to_bf16(values.astype(np.float32))
        elif dtype.name not in _NUMPY:
            raise NotImplementedError(f"the fake engine does not emulate {dtype.name} I/O")
        data = np.ascontiguousarray(values).tobytes()
        trt.device_memory[address][:len(data)] = data

    class ICudaEngine(_Fixed):
        __slots__ = ("_session", "_profile", "_io", "_program")

        def __init__(self, plan: dict) -> None:
            import onnxruntime

            self._session = onnxruntime.InferenceSession(plan["onnx"], providers=["CPUExecutionProvider"])
            self._profile = {name: tuple(map(tuple, s)) for name, s in plan["profile"].items()}
            elem = {"tensor(float)": DataType.FLOAT, "tensor(float16)": DataType.HALF,
                    "tensor(int32)": DataType.INT32, "tensor(int64)": getattr(DataType, "INT64", DataType.INT32),
                    "tensor(bool)": DataType.BOOL, "tensor(int8)": DataType.INT8, "tensor(uint8)": DataType.UINT8}

            def kind(value):
                return DataType[io_types[value.name]] if value.name in io_types else elem[value.type]

            self._io = [(i.name, trt.TensorIOMode.INPUT, kind(i), i.shape) for i in self._session.get_inputs()]
            self._io += [(o.name, trt.TensorIOMode.OUTPUT, kind(o), o.shape) for o in self._session.get_outputs()]
            self._program = plan.get("program", [])
            if "outputs" in plan:  # the network's outputs after the added layers replace the ONNX graph's
                self._io = [e for e in self._io if e[1] == trt.TensorIOMode.INPUT]
                self._io += [(name, trt.TensorIOMode.OUTPUT, DataType[kind], shape)
                             for name, kind, shape in plan["outputs"]]

        def _outputs(self, feeds: dict) -> dict:
            values = dict(zip([o.name for o in self._session.get_outputs()], self._session.run(None, feeds)))
            values = evaluate(self._program, values) if self._program else values
            return {name: values[name] for name, mode, _, _ in self._io if mode == trt.TensorIOMode.OUTPUT}

        num_io_tensors = property(lambda self: len(self._io))
        num_optimization_profiles = property(lambda self: 1)

        def _entry(self, name: str):
            return next(e for e in self._io if e[0] == name)

        def get_tensor_name(self, index: int) -> str:
            return self._io[index][0]

        def get_tensor_mode(self, name: str):
            return self._entry(name)[1]

        def get_tensor_dtype(self, name: str):
            return self._entry(name)[2]

        def get_tensor_shape(self, name: str) -> tuple[int, ...]:
            return tuple(d if isinstance(d, int) else -1 for d in self._entry(name)[3])

        def get_tensor_profile_shape(self, name: str, profile_index: int):
            # TensorRT 8.5+: [min, opt, max] of an input in one optimisation profile.
            declared = self.get_tensor_shape(name)
            return [tuple(s) for s in self._profile.get(name, (declared, declared, declared))]

        def create_execution_context(self):
            return IExecutionContext(self)

    class IExecutionContext(_Fixed):
        __slots__ = ("_engine", "_shapes", "_addresses")

        def __init__(self, engine: ICudaEngine) -> None:
            self._engine, self._shapes, self._addresses = engine, {}, {}

        def set_input_shape(self, name: str, shape) -> bool:
            shape = tuple(shape)
            calls.append(("context.set_input_shape", name, shape))
            declared = self._engine.get_tensor_shape(name)
            low, _, high = self._engine._profile.get(name, (declared, declared, declared))
            if len(shape) != len(declared) or not all(a <= s <= b for a, s, b in zip(low, shape, high)):
                return False
            self._shapes[name] = shape
            return True

        def _feeds(self, fill: bool) -> dict:
            feeds = {}
            for name, mode, dtype, _ in self._engine._io:
                if mode == trt.TensorIOMode.INPUT:
                    count = int(np.prod(self._shapes[name], dtype=np.int64))
                    data = read(self._addresses[name], dtype, count) if fill else np.zeros(count, np.float32)
                    session_type = next(i.type for i in self._engine._session.get_inputs() if i.name == name)
                    data = data.astype({"tensor(float16)": np.float16, "tensor(int64)": np.int64,
                                        "tensor(int32)": np.int32, "tensor(bool)": np.bool_}.get(session_type,
                                                                                                 np.float32))
                    feeds[name] = data.reshape(self._shapes[name])
            return feeds

        def get_tensor_shape(self, name: str) -> tuple[int, ...]:
            if name in self._shapes:
                return self._shapes[name]
            return tuple(np.shape(self._engine._outputs(self._feeds(False))[name]))

        def set_tensor_address(self, name: str, memory: int) -> bool:
            self._addresses[name] = int(memory)
            return True

        def execute_async_v3(self, stream_handle: int) -> bool:
            calls.append(("execute_async_v3", stream_handle))
            for name, result in self._engine._outputs(self._feeds(True)).items():
                dtype = self._engine._entry(name)[2]
                write(self._addresses[name], dtype, result)
            return True

    class Runtime(_Fixed):
        __slots__ = ("_logger", "DLA_core")

        def __init__(self, logger) -> None:
            check_logger(logger)
            self._logger, self.DLA_core = logger, -1

        def deserialize_cuda_engine(self, serialized_engine) -> ICudaEngine | None:
            plan = bytes(serialized_engine)
            calls.append(("deserialize_cuda_engine", len(plan)))
            data = json.loads(plan[len(PLAN_MAGIC):]) if plan.startswith(PLAN_MAGIC) else None
            if data is None or data["version"] != version:
                self._logger.log(trt.ILogger.Severity.ERROR, "1: [stdArchiveReader.cpp::StdArchiveReader::42] "
                                 "Error Code 1: Serialization (The engine plan file is not compatible with this "
                                 "version of TensorRT)")
                return None
            return ICudaEngine(data)

    trt.Runtime, trt.ICudaEngine, trt.IExecutionContext = Runtime, ICudaEngine, IExecutionContext


def make_fake_pycuda(trt: types.ModuleType) -> tuple[types.ModuleType, types.ModuleType]:
    """TEST DOUBLE for ``pycuda`` and ``pycuda.driver``: "device" memory is host bytearrays in
    ``trt.device_memory`` (so the fake TensorRT engine finds what was copied), kept by fake addresses.
    ``driver.stack`` is the CUDA context stack and ``driver.live`` the allocations not yet freed."""
    package = types.ModuleType("pycuda", "TEST DOUBLE standing in for pycuda")
    driver = types.ModuleType("pycuda.driver", "TEST DOUBLE standing in for pycuda.driver")
    package.driver = driver
    driver.calls, driver.stack, driver.live = [], [], set()
    addresses = itertools.count(0x7F0000000000, 0x1000)

    class Error(Exception):
        pass

    class LogicError(Error):
        pass

    class Context:
        """pycuda's wrap_cudadrv.cpp: push and detach are methods; pop, get_current and synchronize are static
        (``.staticmethod("pop")``): pop removes whichever context is current, not necessarily this one."""

        def push(self) -> None:
            driver.stack.append(self)

        @staticmethod
        def pop() -> None:
            if not driver.stack:
                raise LogicError("context::pop failed: invalid device context - cannot pop non-current context")
            driver.stack.pop()

        @staticmethod
        def get_current():
            return driver.stack[-1] if driver.stack else None

        @staticmethod
        def synchronize() -> None:
            pass

        def detach(self) -> None:
            driver.calls.append(("detach",))
            assert self not in driver.stack, "the fake expects pop() before detach()"

    class Device:
        def __init__(self, index: int) -> None:
            self.index = index

        @staticmethod
        def count() -> int:
            return 1

        def make_context(self) -> Context:
            driver.calls.append(("make_context", self.index))
            context = Context()
            context.push()
            return context

    class DeviceAllocation:
        def __init__(self, size: int) -> None:
            self.address = next(addresses)
            trt.device_memory[self.address] = bytearray(size)
            driver.live.add(self.address)

        def __int__(self) -> int:
            return self.address

        def free(self) -> None:
            trt.device_memory.pop(self.address, None)
            driver.live.discard(self.address)

    class Stream:
        handle = 0x5EED

        def synchronize(self) -> None:
            pass

    class Event:
        def record(self, stream=None) -> Event:
            self.time = time.perf_counter()
            return self

        def synchronize(self) -> Event:
            return self

        def time_since(self, other: Event) -> float:
            return (self.time - other.time) * 1000.0

    def mem_alloc(size: int) -> DeviceAllocation:
        if not driver.stack:
            raise LogicError("cuMemAlloc failed: invalid device context")
        driver.calls.append(("mem_alloc", size))
        return DeviceAllocation(size)

    def memcpy_htod_async(dest, src, stream=None) -> None:
        data = np.ascontiguousarray(src).tobytes()
        trt.device_memory[int(dest)][:len(data)] = data

    def memcpy_dtoh_async(dest, src, stream=None) -> None:
        flat = dest.reshape(-1).view(np.uint8)
        flat[:] = np.frombuffer(trt.device_memory[int(src)], np.uint8, flat.size)

    driver.init = lambda: driver.calls.append(("init",))
    driver.Error, driver.LogicError = Error, LogicError
    driver.Device, driver.Context, driver.Stream, driver.Event = Device, Context, Stream, Event
    driver.mem_alloc, driver.memcpy_htod_async, driver.memcpy_dtoh_async = mem_alloc, memcpy_htod_async, \
        memcpy_dtoh_async
    driver.pagelocked_empty = lambda shape, dtype: np.empty(shape, dtype)
    driver.mem_get_info = lambda: (6 << 30, 8 << 30)
    return package, driver


def install_fakes(monkeypatch, version: str, **options) -> types.ModuleType:
    """Put the fake ``tensorrt`` (of ``version``) and ``pycuda`` where ``import`` finds them for one test."""
    trt = make_fake_tensorrt(version, **options)
    package, driver = make_fake_pycuda(trt)
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setitem(sys.modules, "pycuda", package)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    return trt
