"""Run a TensorRT plan on the GPU with pycuda: a check that a built engine works, and a trtexec-like benchmark."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping

import numpy as np

from orinkit.convert.errors import ConvertError, EngineRunError, StaleEngineError
from orinkit.convert.trt.log import capturing_logger
from orinkit.convert.trt.stats import BenchmarkReport, latency_stats
from orinkit.core.optional import require

__all__ = ["BenchmarkReport", "TrtRunner", "latency_stats"]


def _host_types(trt, engine, names: tuple[str, ...]) -> tuple[dict[str, np.dtype], frozenset[str]]:
    """The numpy type each I/O tensor's bytes have. ``trt.nptype`` raises TypeError for the TensorRT types numpy
    lacks; BF16 is the upper half of a float32, so it is carried as uint16 bits and converted both ways, while the
    packed FP8/INT4/FP4/E8M0 types would need a library to decode and are refused here, by name, up front.
    Returns the types and the names of the BF16 tensors."""
    types, bf16 = {}, set()
    for name in names:
        dtype = engine.get_tensor_dtype(name)
        if dtype == getattr(trt, "bfloat16", None):  # TensorRT 10+
            types[name] = np.dtype(np.uint16)
            bf16.add(name)
            continue
        try:
            types[name] = np.dtype(trt.nptype(dtype))
        except TypeError:
            raise ConvertError(f"tensor '{name}' of the engine is {getattr(dtype, 'name', dtype)}, which orinkit's "
                               "runner cannot read or write",
                               hint="build the engine with FP32, FP16, BF16 or integer I/O (cast at the model's "
                                    "inputs and outputs)") from None
    return types, frozenset(bf16)


def _to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 → BF16 bits, rounding to nearest even as TensorRT's casts do; NaN stays a (quiet) NaN."""
    values = np.ascontiguousarray(values, np.float32)
    bits = values.view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), ((bits >> 16) | 0x40).astype(np.uint16), rounded)


def _from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


class _Slot:
    """A pagelocked host buffer and a device buffer for one tensor, grown only when a larger shape comes."""

    def __init__(self, cuda) -> None:
        self._cuda = cuda
        self.capacity = 0
        self.host = None
        self.device = None

    def fit(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes > self.capacity or self.device is None:
            self.free()
            size = max(nbytes, 1)  # cuMemAlloc rejects 0 bytes
            self.device = self._cuda.mem_alloc(size)
            self.host = self._cuda.pagelocked_empty(size, np.uint8)
            self.capacity = size
        return self.host[:nbytes].view(dtype).reshape(shape)

    def free(self) -> None:
        if self.device is not None:
            self.device.free()
        # Pagelocked memory belongs to the CUDA context: free it now, not whenever the GC runs.
        release = getattr(getattr(self.host, "base", None), "free", None)
        if release is not None:
            release()
        self.host = self.device = None
        self.capacity = 0


class TrtRunner:
    """A deserialized plan with its own CUDA context (device ``device``) and stream; use it as a context manager."""

    def __init__(self, plan: bytes, *, device: int = 0) -> None:
        self._trt = trt = require("tensorrt")
        self._cuda = cuda = require("pycuda.driver")
        self._closed = False
        self._slots: dict[str, _Slot] = {}
        self._context = self.engine = self._runtime = None
        cuda.init()
        self._cuda_context = cuda.Device(device).make_context()
        try:
            self._load(trt, cuda, plan)
        except BaseException:
            self._free()
            self._cuda_context.pop()
            self._cuda_context.detach()
            raise
        self._cuda_context.pop()  # pushed again around each use, so several runners can share a thread

    def _load(self, trt, cuda, plan: bytes) -> None:
        self._logger = capturing_logger(trt)
        self._runtime = trt.Runtime(self._logger)
        self.engine = self._runtime.deserialize_cuda_engine(bytes(plan))
        if self.engine is None:
            detail = "; ".join(self._logger.errors())
            raise StaleEngineError(
                f"the plan does not load with this TensorRT/GPU (TensorRT {trt.__version__})"
                + (f": {detail}" if detail else ""),
                hint="a plan only loads on the TensorRT version and GPU that built it: rebuild it here from the ONNX",
            )
        self._context = self.engine.create_execution_context()
        if self._context is None:
            raise EngineRunError("TensorRT could not create an execution context",
                               hint="free GPU memory (another process may hold it) and try again")
        self._stream = cuda.Stream()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        is_input = {n: self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        self.inputs = tuple(n for n in names if is_input[n])
        self.outputs = tuple(n for n in names if not is_input[n])
        # BF16 tensors: callers give and get float32; the buffers hold the BF16 bits.
        self._types, self._bf16 = _host_types(trt, self.engine, self.inputs + self.outputs)

    def __enter__(self) -> TrtRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._cuda_context.push()
        try:
            self._free()
        finally:
            self._cuda_context.pop()
            self._cuda_context.detach()

    def _free(self) -> None:
        for slot in self._slots.values():
            slot.free()
        self._slots.clear()
        # TensorRT objects must go before the CUDA context they allocated in, context before engine.
        self._context = None
        self.engine = None
        self._runtime = None

    @contextlib.contextmanager
    def _active(self) -> Iterator[None]:
        if self._closed:
            raise ConvertError("the TensorRT runner is closed", hint="create a new TrtRunner")
        self._cuda_context.push()
        try:
            yield
        finally:
            self._cuda_context.pop()

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once; returns a fresh array per output."""
        with self._active():
            return self._run(feeds, None)

    def benchmark(self, feeds: Mapping[str, np.ndarray], *, iterations: int = 200, warmup: int = 20,
                  duration_s: float | None = None) -> BenchmarkReport:
        """At least ``iterations`` runs and, if given, at least ``duration_s`` seconds of them (as trtexec)."""
        if iterations < 1:
            raise ConvertError("iterations must be at least 1", hint="pass iterations=1 or more")
        cuda = self._cuda
        with self._active():
            for _ in range(warmup):
                self._run(feeds, None)
            events = (cuda.Event(), cuda.Event())
            latencies: list[float] = []
            computes: list[float] = []
            begin = time.perf_counter()
            while len(latencies) < iterations or (duration_s is not None
                                                  and time.perf_counter() - begin < duration_s):
                started = time.perf_counter()
                self._run(feeds, events)
                latencies.append((time.perf_counter() - started) * 1000.0)
                computes.append(events[1].time_since(events[0]))
            total = time.perf_counter() - begin
        return BenchmarkReport.from_samples(latencies, computes, total)

    def _slot(self, name: str) -> _Slot:
        if name not in self._slots:
            self._slots[name] = _Slot(self._cuda)
        return self._slots[name]

    def _run(self, feeds: Mapping[str, np.ndarray], events) -> dict[str, np.ndarray]:
        cuda, context, stream = self._cuda, self._context, self._stream
        missing = [n for n in self.inputs if n not in feeds]
        unknown = [n for n in feeds if n not in self.inputs]
        if missing or unknown:
            raise ConvertError(
                "feeds " + ", ".join(f"lack '{n}'" for n in missing) + ("; " if missing and unknown else "")
                + ", ".join(f"name '{n}', which is no input" for n in unknown),
                hint=f"the engine's inputs are {', '.join(self.inputs)}",
            )
        for name in self.inputs:
            if name in self._bf16:
                array = _to_bf16(np.asarray(feeds[name], dtype=np.float32))
            else:
                array = np.ascontiguousarray(feeds[name], dtype=self._types[name])
            if not context.set_input_shape(name, array.shape):
                raise ConvertError(f"input '{name}' of shape {list(array.shape)} does not fit the engine",
                                   hint="use a shape inside the optimization profile the plan was built with")
            slot = self._slot(name)
            host = slot.fit(array.shape, array.dtype)
            host[...] = array
            cuda.memcpy_htod_async(slot.device, host, stream)
            context.set_tensor_address(name, int(slot.device))
        hosts = {}
        for name in self.outputs:
            shape = tuple(context.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise ConvertError(f"output '{name}' has a data-dependent shape {list(shape)}",
                                   hint="orinkit's runner needs output shapes known from the input shapes")
            slot = self._slot(name)
            hosts[name] = slot.fit(shape, self._types[name])
            context.set_tensor_address(name, int(slot.device))
        self._logger.clear()
        if events is not None:
            events[0].record(stream)
        if not context.execute_async_v3(stream.handle):
            stream.synchronize()
            raise EngineRunError("TensorRT could not run the engine: "
                                 + ("; ".join(self._logger.errors()) or "no error reported"),
                                 hint="check the input shapes and free GPU memory")
        if events is not None:
            events[1].record(stream)
        for name, host in hosts.items():
            cuda.memcpy_dtoh_async(host, self._slots[name].device, stream)
        stream.synchronize()
        return {name: _from_bf16(host) if name in self._bf16 else host.copy() for name, host in hosts.items()}
