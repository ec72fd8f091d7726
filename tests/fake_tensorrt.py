"""TEST DOUBLE: fake ``tensorrt`` (and ``pycuda.driver``) modules standing in for NVIDIA TensorRT, which cannot
run on this machine (no GPU, no TensorRT). Nothing here is TensorRT; it imitates its Python API surface.

``make_fake_tensorrt(version)`` imitates one API generation, as summarised in the TensorRT notes:

* 8.5/8.6: ``NetworkDefinitionCreationFlag.EXPLICIT_BATCH`` is required by the ONNX parser; ``BuilderFlag.FP16``,
  ``OBEY_PRECISION_CONSTRAINTS``, ``GPU_FALLBACK``; layers have ``precision`` and ``set_output_type``.
* 10.x: ``EXPLICIT_BATCH`` still exists but the builder ignores it (networks are always explicit-batch); the same
  FP16 and precision APIs.
* 11.x: no ``EXPLICIT_BATCH`` member, no ``FP16``/``INT8``/``OBEY_PRECISION_CONSTRAINTS`` flags and no per-layer
  precision APIs: networks are strongly typed, FP16 comes from the graph.

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

import numpy as np
import onnx

PLAN_MAGIC = b"FAKEPLAN"
CACHE_MAGIC = b"FAKECACHE:"


def _generation(version: str) -> int:
    major = int(version.split(".")[0])
    return 8 if major <= 8 else 10 if major in (9, 10) else 11


def make_fake_tensorrt(version: str, *, dla_cores: int = 0, oom_above: int | None = None, fail_parse: bool = False,
                       layers: tuple[str, ...] = (), fail_build: str | None = None) -> types.ModuleType:
    """A fake ``tensorrt`` module of ``version``.

    dla_cores: ``builder.num_DLA_cores``. oom_above: builds return None, logging an out-of-memory warning and the
    "Could not find any implementation" error, while the workspace limit exceeds it. fail_parse: the parser
    fails with two errors. layers: extra layer names the parser adds after the per-node ones (how TensorRT names
    the further layers of one node, e.g. ``/conv/Conv_7``). fail_build: builds fail with this error message.
    """
    gen = _generation(version)
    trt = types.ModuleType("tensorrt", "TEST DOUBLE standing in for TensorRT " + version)
    trt.__version__ = version
    trt.calls = calls = []
    trt.device_memory = {}  # address → bytearray, shared with make_fake_pycuda

    class DataType(enum.IntEnum):
        FLOAT = 0
        HALF = 1
        INT8 = 2
        INT32 = 3
        BOOL = 4
        UINT8 = 5
        INT64 = 8

    numpy_types = {DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.INT8: np.int8,
                   DataType.INT32: np.int32, DataType.BOOL: np.bool_, DataType.UINT8: np.uint8,
                   DataType.INT64: np.int64}
    trt.DataType = DataType
    trt.float32, trt.float16, trt.int8, trt.int32 = DataType.FLOAT, DataType.HALF, DataType.INT8, DataType.INT32
    trt.bool, trt.uint8 = DataType.BOOL, DataType.UINT8
    if gen >= 10:
        trt.int64 = DataType.INT64
    trt.nptype = lambda dtype: numpy_types[dtype]

    onnx_types = {onnx.TensorProto.FLOAT: DataType.FLOAT, onnx.TensorProto.FLOAT16: DataType.HALF,
                  onnx.TensorProto.INT8: DataType.INT8, onnx.TensorProto.INT32: DataType.INT32,
                  onnx.TensorProto.BOOL: DataType.BOOL, onnx.TensorProto.UINT8: DataType.UINT8,
                  # TensorRT 8 has no INT64 tensors: the parser narrows them to INT32.
                  onnx.TensorProto.INT64: DataType.INT64 if gen >= 10 else DataType.INT32}

    flags = {8: ["EXPLICIT_BATCH", "EXPLICIT_PRECISION"], 10: ["EXPLICIT_BATCH", "STRONGLY_TYPED"], 11: []}[gen]
    trt.NetworkDefinitionCreationFlag = enum.IntEnum("NetworkDefinitionCreationFlag",
                                                     [(name, i) for i, name in enumerate(flags)])
    builder_flags = ["DEBUG", "GPU_FALLBACK", "REFIT", "DISABLE_TIMING_CACHE", "SPARSE_WEIGHTS"]
    if gen < 11:
        builder_flags += ["FP16", "INT8", "TF32", "OBEY_PRECISION_CONSTRAINTS", "PREFER_PRECISION_CONSTRAINTS"]
    if gen == 10:
        builder_flags += ["BF16", "FP8", "VERSION_COMPATIBLE"]
    trt.BuilderFlag = enum.IntEnum("BuilderFlag", [(name, i) for i, name in enumerate(builder_flags)])
    trt.MemoryPoolType = enum.IntEnum("MemoryPoolType", [("WORKSPACE", 0), ("DLA_MANAGED_SRAM", 1),
                                                         ("DLA_LOCAL_DRAM", 2), ("DLA_GLOBAL_DRAM", 3)])
    trt.DeviceType = enum.IntEnum("DeviceType", [("GPU", 0), ("DLA", 1)])
    trt.TensorIOMode = enum.IntEnum("TensorIOMode", [("NONE", 0), ("INPUT", 1), ("OUTPUT", 2)])

    class ILogger:
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

    trt.ILogger, trt.Logger = ILogger, Logger

    def check_logger(logger) -> None:
        # pybind11 raises this when a Python subclass's __init__ skips the base class's.
        if not getattr(logger, "_fake_ilogger_initialised", False):
            raise TypeError("tensorrt.ILogger.__init__() must be called when overriding __init__")

    class Tensor:
        def __init__(self, name: str, shape: tuple[int, ...], dtype) -> None:
            self.name, self.shape, self.dtype = name, tuple(shape), dtype

    class Layer:
        def __init__(self, name: str, op: str, outputs: list[Tensor]) -> None:
            self.name, self.type, self._outputs = name, op, outputs

        @property
        def num_outputs(self) -> int:
            return len(self._outputs)

        def get_output(self, index: int) -> Tensor:
            return self._outputs[index]

    class PrecisionLayer(Layer):
        """8.x/10.x layers: precision constraints exist (gone in 11)."""

        _precision = DataType.FLOAT
        precision_is_set = False

        @property
        def precision(self):
            return self._precision

        @precision.setter
        def precision(self, dtype) -> None:
            calls.append(("layer.precision", self.name, dtype))
            self._precision, self.precision_is_set = dtype, True

        def set_output_type(self, index: int, dtype) -> None:
            if not 0 <= index < len(self._outputs):
                raise IndexError(index)
            calls.append(("layer.set_output_type", self.name, index, dtype))

    layer_class = PrecisionLayer if gen < 11 else Layer

    class Network:
        def __init__(self, flags: int) -> None:
            self.flags, self.inputs, self.layers, self.outputs, self.source = flags, [], [], [], None

        num_inputs = property(lambda self: len(self.inputs))
        num_layers = property(lambda self: len(self.layers))
        num_outputs = property(lambda self: len(self.outputs))

        def get_input(self, index: int) -> Tensor:
            return self.inputs[index]

        def get_layer(self, index: int):
            return self.layers[index]

        def get_output(self, index: int) -> Tensor:
            return self.outputs[index]

    class ParserError:
        def __init__(self, text: str) -> None:
            self._text = text

        def desc(self) -> str:
            return self._text

        def __str__(self) -> str:
            return f"In node -1 (parseGraph): INVALID_NODE: {self._text}"

    class OnnxParser:
        def __init__(self, network: Network, logger) -> None:
            check_logger(logger)
            self.network, self.logger, self._errors = network, logger, []

        num_errors = property(lambda self: len(self._errors))

        def get_error(self, index: int) -> ParserError:
            return self._errors[index]

        def parse_from_file(self, path: str) -> bool:
            calls.append(("parse_from_file", path))
            if fail_parse:
                self._errors = [ParserError("No importer registered for op: FakeOp"),
                                ParserError("Assertion failed: fake parse failure")]
                return False
            if gen == 8 and not self.network.flags & (1 << trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH):
                self._errors = [ParserError("Network must have explicit batch dimension")]
                return False
            _populate(self.network, onnx.load(path), path)
            return True

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
            network.inputs.append(Tensor(value.name, dims, onnx_types[value.type.tensor_type.elem_type]))
        for node in model.graph.node:
            outputs = [Tensor(out, (), onnx_types.get(types_by_name.get(out), DataType.FLOAT)) for out in node.output]
            network.layers.append(layer_class(node.name or f"node_of_{node.output[0]}", node.op_type, outputs))
        for name in layers:
            network.layers.append(layer_class(name, "Extra", [Tensor(name + "_out", (), DataType.FLOAT)]))
        network.outputs = [Tensor(v.name, (), onnx_types[v.type.tensor_type.elem_type]) for v in model.graph.output]
        network.source = path

    trt.OnnxParser = OnnxParser

    class Profile:
        def __init__(self) -> None:
            self.shapes = {}

        def set_shape(self, name: str, min, opt, max) -> None:
            calls.append(("profile.set_shape", name, tuple(min), tuple(opt), tuple(max)))
            if not (len(min) == len(opt) == len(max)) or not all(a <= b <= c for a, b, c in zip(min, opt, max)):
                raise RuntimeError("Shape provided for min is inconsistent with other shapes.")
            self.shapes[name] = (tuple(min), tuple(opt), tuple(max))

    class HostMemory(bytes):
        nbytes = property(len)

    class TimingCache:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def serialize(self) -> HostMemory:
            calls.append(("timing_cache.serialize",))
            return HostMemory(self.data)

    class BuilderConfig:
        def __init__(self) -> None:
            self.flags, self.pools, self.profiles, self.timing_cache = set(), {}, [], None

        def set_flag(self, flag) -> None:
            calls.append(("set_flag", flag))
            self.flags.add(flag)

        def get_flag(self, flag) -> bool:
            return flag in self.flags

        def clear_flag(self, flag) -> None:
            self.flags.discard(flag)

        def set_memory_pool_limit(self, pool, size: int) -> None:
            calls.append(("set_memory_pool_limit", pool, size))
            self.pools[pool] = size

        def get_memory_pool_limit(self, pool) -> int:
            return self.pools.get(pool, 1 << 40)

        def add_optimization_profile(self, profile: Profile) -> int:
            calls.append(("add_optimization_profile", dict(profile.shapes)))
            self.profiles.append(profile)
            return len(self.profiles) - 1

        def create_timing_cache(self, data) -> TimingCache:
            data = bytes(data)
            calls.append(("create_timing_cache", data))
            return TimingCache(data or CACHE_MAGIC + version.encode())

        def set_timing_cache(self, cache: TimingCache, ignore_mismatch: bool) -> bool:
            calls.append(("set_timing_cache", cache.data, ignore_mismatch))
            if not cache.data.startswith(CACHE_MAGIC + version.encode()) and not ignore_mismatch:
                return False
            self.timing_cache = cache
            return True

        def get_timing_cache(self) -> TimingCache:
            return self.timing_cache

        def __setattr__(self, name, value) -> None:
            if name in ("default_device_type", "DLA_core"):
                calls.append((name, value))
            super().__setattr__(name, value)

    class Builder:
        def __init__(self, logger) -> None:
            check_logger(logger)
            self.logger = logger
            self.num_DLA_cores = dla_cores
            self.platform_has_fast_fp16 = True

        def create_network(self, flags: int = 0) -> Network:
            calls.append(("create_network", flags))
            if gen == 11 and flags:
                raise TypeError("TensorRT 11 networks take no creation flags here (EXPLICIT_BATCH is gone)")
            return Network(flags)

        def create_builder_config(self) -> BuilderConfig:
            return BuilderConfig()

        def create_optimization_profile(self) -> Profile:
            return Profile()

        def build_serialized_network(self, network: Network, config: BuilderConfig):
            workspace = config.pools.get(trt.MemoryPoolType.WORKSPACE)
            calls.append(("build_serialized_network", workspace))
            severity = ILogger.Severity
            if fail_build:
                self.logger.log(severity.ERROR, fail_build)
                return None
            if oom_above is not None and (workspace is None or workspace > oom_above):
                self.logger.log(severity.WARNING, f"Requested amount of GPU memory ({workspace} bytes) could not be "
                                                  "allocated (out of memory). There may not be enough free memory.")
                self.logger.log(severity.ERROR, "10: [optimizer.cpp::computeCosts::3728] Error Code 10: Internal "
                                                "Error (Could not find any implementation for node /fake/Node.)")
                return None
            dynamic = [t.name for t in network.inputs if -1 in t.shape]
            profiled = {name for p in config.profiles for name in p.shapes}
            if set(dynamic) - profiled:
                self.logger.log(severity.ERROR, "4: [network.cpp::validate::3084] Error Code 4: Internal Error "
                                                "(Network has dynamic or shape inputs, but no optimization profile "
                                                "has been defined.)")
                return None
            if config.timing_cache is not None:
                config.timing_cache.data += b"+tactics"
            plan = {"version": version, "onnx": network.source,
                    "profile": {n: s for p in config.profiles[:1] for n, s in p.shapes.items()}}
            return HostMemory(PLAN_MAGIC + json.dumps(plan).encode())

    trt.Builder = Builder
    _add_runtime(trt, version, check_logger)
    return trt


def _add_runtime(trt: types.ModuleType, version: str, check_logger) -> None:
    """The fake's engine runs the ONNX file its plan names with onnxruntime, reading and writing the buffers
    whose fake device addresses the code under test set."""
    calls = trt.calls

    class Engine:
        def __init__(self, plan: dict) -> None:
            import onnxruntime

            self.session = onnxruntime.InferenceSession(plan["onnx"], providers=["CPUExecutionProvider"])
            self.profile = {name: tuple(map(tuple, s)) for name, s in plan["profile"].items()}
            elem = {"tensor(float)": trt.float32, "tensor(float16)": trt.float16, "tensor(int32)": trt.int32,
                    "tensor(int64)": getattr(trt, "int64", trt.int32), "tensor(bool)": trt.bool}
            self.io = [(i.name, trt.TensorIOMode.INPUT, elem[i.type], i.shape) for i in self.session.get_inputs()]
            self.io += [(o.name, trt.TensorIOMode.OUTPUT, elem[o.type], o.shape) for o in self.session.get_outputs()]

        num_io_tensors = property(lambda self: len(self.io))
        num_optimization_profiles = property(lambda self: 1)

        def _entry(self, name: str):
            return next(e for e in self.io if e[0] == name)

        def get_tensor_name(self, index: int) -> str:
            return self.io[index][0]

        def get_tensor_mode(self, name: str):
            return self._entry(name)[1]

        def get_tensor_dtype(self, name: str):
            return self._entry(name)[2]

        def get_tensor_shape(self, name: str) -> tuple[int, ...]:
            return tuple(d if isinstance(d, int) else -1 for d in self._entry(name)[3])

        def get_tensor_profile_shape(self, name: str, profile_index: int):
            # TensorRT 8.5+: [min, opt, max] of an input in one optimisation profile.
            declared = self.get_tensor_shape(name)
            return [tuple(s) for s in self.profile.get(name, (declared, declared, declared))]

        def create_execution_context(self):
            return ExecutionContext(self)

    class ExecutionContext:
        def __init__(self, engine: Engine) -> None:
            self.engine, self.shapes, self.addresses = engine, {}, {}

        def set_input_shape(self, name: str, shape) -> bool:
            shape = tuple(shape)
            calls.append(("context.set_input_shape", name, shape))
            declared = self.engine.get_tensor_shape(name)
            low, _, high = self.engine.profile.get(name, (declared, declared, declared))
            if len(shape) != len(declared) or not all(a <= s <= b for a, s, b in zip(low, shape, high)):
                return False
            self.shapes[name] = shape
            return True

        def _feeds(self, fill: bool) -> dict:
            feeds = {}
            for name, mode, dtype, _ in self.engine.io:
                if mode == trt.TensorIOMode.INPUT:
                    count = int(np.prod(self.shapes[name], dtype=np.int64))
                    data = (np.frombuffer(trt.device_memory[self.addresses[name]], trt.nptype(dtype), count)
                            if fill else np.zeros(count, trt.nptype(dtype)))
                    feeds[name] = data.reshape(self.shapes[name])
            return feeds

        def get_tensor_shape(self, name: str) -> tuple[int, ...]:
            if name in self.shapes:
                return self.shapes[name]
            index = [o.name for o in self.engine.session.get_outputs()].index(name)
            return tuple(self.engine.session.run(None, self._feeds(False))[index].shape)

        def set_tensor_address(self, name: str, address: int) -> bool:
            self.addresses[name] = int(address)
            return True

        def execute_async_v3(self, stream_handle: int) -> bool:
            calls.append(("execute_async_v3", stream_handle))
            names = [o.name for o in self.engine.session.get_outputs()]
            for name, result in zip(names, self.engine.session.run(None, self._feeds(True))):
                data = np.ascontiguousarray(result).tobytes()
                trt.device_memory[self.addresses[name]][:len(data)] = data
            return True

    class Runtime:
        def __init__(self, logger) -> None:
            check_logger(logger)
            self.logger = logger

        def deserialize_cuda_engine(self, plan) -> Engine | None:
            plan = bytes(plan)
            calls.append(("deserialize_cuda_engine", len(plan)))
            data = json.loads(plan[len(PLAN_MAGIC):]) if plan.startswith(PLAN_MAGIC) else None
            if data is None or data["version"] != version:
                self.logger.log(trt.ILogger.Severity.ERROR, "1: [stdArchiveReader.cpp::StdArchiveReader::42] Error "
                                "Code 1: Serialization (The engine plan file is not compatible with this version "
                                "of TensorRT)")
                return None
            return Engine(data)

    trt.Runtime = Runtime


def make_fake_pycuda(trt: types.ModuleType) -> tuple[types.ModuleType, types.ModuleType]:
    """TEST DOUBLE for ``pycuda`` and ``pycuda.driver``: "device" memory is host bytearrays in
    ``trt.device_memory`` (so the fake TensorRT engine finds what was copied), kept by fake addresses.
    ``driver.stack`` is the CUDA context stack and ``driver.live`` the allocations not yet freed."""
    package = types.ModuleType("pycuda", "TEST DOUBLE standing in for pycuda")
    driver = types.ModuleType("pycuda.driver", "TEST DOUBLE standing in for pycuda.driver")
    package.driver = driver
    driver.calls, driver.stack, driver.live = [], [], set()
    addresses = itertools.count(0x7F0000000000, 0x1000)

    class Context:
        def push(self) -> None:
            driver.stack.append(self)

        def pop(self) -> None:
            assert driver.stack and driver.stack[-1] is self, "popping a context that is not current"
            driver.stack.pop()

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
        def record(self, stream=None) -> None:
            self.time = time.perf_counter()

        def synchronize(self) -> None:
            pass

        def time_since(self, other: Event) -> float:
            return (self.time - other.time) * 1000.0

    def mem_alloc(size: int) -> DeviceAllocation:
        assert driver.stack, "no current CUDA context"
        driver.calls.append(("mem_alloc", size))
        return DeviceAllocation(size)

    def memcpy_htod_async(dest, src, stream=None) -> None:
        data = np.ascontiguousarray(src).tobytes()
        trt.device_memory[int(dest)][:len(data)] = data

    def memcpy_dtoh_async(dest, src, stream=None) -> None:
        flat = dest.reshape(-1).view(np.uint8)
        flat[:] = np.frombuffer(trt.device_memory[int(src)], np.uint8, flat.size)

    driver.init = lambda: driver.calls.append(("init",))
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
