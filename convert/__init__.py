"""torch → ONNX → simplified ONNX → FP16 TensorRT engine, with an accuracy gate and a stale-engine guard.

>>> from orinkit.convert import ConvertOptions, convert_onnx
>>> options = ConvertOptions(shapes={"input": (1, 3, 360, 640)})
>>> result = convert_onnx("lane.onnx", "lane.edge", options)  # doctest: +SKIP

torch, tensorrt, pycuda and onnxruntime are imported only by the stages that use them.
"""

from orinkit.convert.errors import (
    AccuracyGateError,
    ConvertError,
    DlaError,
    EngineBuildError,
    Fp16GraphError,
    InputModelError,
    LibraryCrashError,
    MetricError,
    ModelRunError,
    SampleDataError,
    ShapeSpecError,
    StaleEngineError,
    TorchExportError,
)
from orinkit.convert.fp16.criteria import Criterion
from orinkit.convert.fp16.task_metrics import MetricResult
from orinkit.convert.pipeline import ConvertOptions, ConvertResult, convert_onnx, convert_torch
from orinkit.convert.torch_export import export_torch
from orinkit.convert.verify import EngineVerdict, ensure_engine, verify_engine

__all__ = [
    "ConvertOptions", "ConvertResult", "convert_onnx", "convert_torch", "export_torch", "Criterion", "MetricResult",
    "EngineVerdict", "verify_engine", "ensure_engine", "ConvertError", "InputModelError", "ShapeSpecError",
    "TorchExportError", "SampleDataError", "AccuracyGateError", "Fp16GraphError", "EngineBuildError", "DlaError",
    "StaleEngineError", "MetricError", "ModelRunError", "LibraryCrashError",
]
