"""How an INT8 engine is built on each TensorRT an Orin runs (see the INT8 notes):

* 10.x and 11 on the GPU: ModelOpt's Q/DQ graph (FP16 elsewhere, opset 19), parsed into a strongly typed network
  (the STRONGLY_TYPED creation flag): the graph's own types decide, so no precision flag is set (TensorRT refuses
  them on strongly typed networks).
* 8.5/8.6 on the GPU: the same exclusions with FP32 scales at opset 17 (its parser's limit), weakly typed, with the
  INT8 flag (explicit quantization) and FP16 for the rest.
* DLA on JetPack 5/6 (8.5-10.7): DLA takes INT8 only implicitly, so the Q/DQ-free FP32 ONNX is built with the INT8
  and FP16 flags and a calibrator that only hands TensorRT a calibration cache written from the Q/DQ scales (no
  calibration runs on the device); the nodes the gate excluded are pinned to FP16 (PREFER_PRECISION_CONSTRAINTS).
* DLA on 10.8+ (JetPack 7.2's 10.16) and 11.0-11.4.0: none, refused; from 11.4.1 (JetPack 7.2.2+) the strongly
  typed Q/DQ graph, as on the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from orinkit.convert.errors import DlaError, EngineBuildError
from orinkit.convert.trt.generation import DLA_HINT, dla_unavailable


@dataclass(frozen=True)
class Int8Sources:
    qdq: Path  # model.int8.onnx: Q/DQ, FP16 elsewhere, opset 19
    opset17: Path  # model.int8.opset17.onnx: FP32 scales, opset 17
    excluded: tuple[str, ...] = ()  # nodes the INT8 gate kept out of INT8


@dataclass(frozen=True)
class Int8Route:
    mode: str  # "strongly-typed", "explicit-flag" or "calibration-cache"
    source: Path
    strongly_typed: bool


def int8_route(gen: int, version: str, *, dla: bool, fp32_onnx: Path, sources: Int8Sources) -> Int8Route:
    if dla:
        reason = dla_unavailable(version)
        if reason is not None:
            raise DlaError(f"TensorRT {version} cannot run INT8 on the DLA: {reason}", hint=DLA_HINT)
        if gen >= 11:  # 11.4.1+: DLA builds are strongly typed, and 11 has no implicit INT8 at all
            return Int8Route("strongly-typed", sources.qdq, True)
        return Int8Route("calibration-cache", fp32_onnx, False)
    if gen >= 10:
        return Int8Route("strongly-typed", sources.qdq, True)
    return Int8Route("explicit-flag", sources.opset17, False)


def network_flags(trt: ModuleType, gen: int, route: Int8Route | None) -> int:
    flags = 0
    if gen == 8:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    if route is not None and route.strongly_typed:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    return flags


def cache_calibrator(trt: ModuleType, cache: bytes):
    """An IInt8EntropyCalibrator2 that only reads ``cache``: TensorRT takes the scales from it and never asks for
    a batch (it would get none, and fail, had the cache not fit)."""
    base = getattr(trt, "IInt8EntropyCalibrator2", None)
    if base is None:
        raise EngineBuildError(f"TensorRT {trt.__version__} has no INT8 calibrators",
                               hint="build the Q/DQ graph strongly typed instead (leave out --dla-core)")

    class CacheCalibrator(base):
        def __init__(self) -> None:
            base.__init__(self)  # pybind11 trampolines need the base initialised explicitly

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names, *args):
            return None

        def read_calibration_cache(self):
            return cache

        def write_calibration_cache(self, cache) -> None:
            return None

    return CacheCalibrator()


def dla_cache(opset17: Path, version: str) -> bytes:
    """The calibration cache for ``version`` from the Q/DQ graph's activation scales."""
    import onnx

    from orinkit.convert.int8.qdq import activation_scales, calibration_cache

    return calibration_cache(activation_scales(onnx.load(str(opset17))), version).encode()
