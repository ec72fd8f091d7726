"""Errors of ``orinkit.convert``.

::

    ConvertError
    ├── InputModelError        a model file that is missing, truncated, not ONNX, or invalid (exit 4)
    ├── ShapeSpecError         a --shapes/--min-shapes/... string that is malformed or does not fit the model (exit 4)
    ├── TorchExportError       the torch model cannot be loaded, exported, or its ONNX disagrees with torch (exit 4)
    ├── SampleDataError        --data that does not fit the model's inputs (exit 4)
    │   └── CalibrationDataError  --calib that is too small, of the wrong shape, or shares samples with --data (exit 4)
    ├── MetricError            a --metric that cannot be loaded, does not fit the outputs, or sees nothing (exit 4)
    ├── ModelRunError          onnxruntime refused to run the model on the gate's samples (exit 4)
    ├── AccuracyGateError      FP16 cannot meet the criterion even with nodes kept in FP32 (exit 7)
    ├── Fp16GraphError         the FP16 ONNX graph could not be made valid (exit 7)
    ├── QuantizationError      ModelOpt failed to quantize the model (exit 6)
    ├── EngineBuildError       TensorRT failed to build the engine, after every workspace retry (exit 6)
    │   └── DlaError           DLA asked for where there is none, or with a precision it cannot run (exit 4)
    ├── EngineRunError         TensorRT failed while loading or running a built engine (exit 6)
    ├── StaleEngineError       a plan does not match this device or TensorRT and cannot be rebuilt (exit 8)
    └── LibraryCrashError      onnxruntime (or another native library) crashed in orinkit's child process (exit 6)
    ManifestError (orinkit.formats.manifest)  a plan's manifest that is missing or unreadable (exit 4)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_ACCURACY, EXIT_BAD_INPUT, EXIT_RUNTIME, EXIT_STALE, OrinkitError


class ConvertError(OrinkitError):
    exit_code = EXIT_BAD_INPUT


class InputModelError(ConvertError):
    pass


class ShapeSpecError(ConvertError):
    pass


class TorchExportError(ConvertError):
    pass


class SampleDataError(ConvertError):
    pass


class CalibrationDataError(SampleDataError):
    pass


class MetricError(ConvertError):
    pass


class ModelRunError(ConvertError):
    """onnxruntime raised (without crashing) while running the model on the gate's samples: the samples do not fit
    the model (an index past a table, a value a Reshape cannot take) or the model cannot run there."""


class AccuracyGateError(ConvertError):
    exit_code = EXIT_ACCURACY

    def __init__(self, message: str, *, report=None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.report = report


class Fp16GraphError(ConvertError):
    exit_code = EXIT_ACCURACY


class QuantizationError(ConvertError):
    exit_code = EXIT_RUNTIME


class EngineBuildError(ConvertError):
    exit_code = EXIT_RUNTIME


class DlaError(EngineBuildError):
    exit_code = EXIT_BAD_INPUT


class EngineRunError(ConvertError):
    exit_code = EXIT_RUNTIME


class StaleEngineError(ConvertError):
    exit_code = EXIT_STALE


class LibraryCrashError(ConvertError):
    exit_code = EXIT_RUNTIME
