"""Errors of ``orinkit.convert``.

::

    ConvertError
    ├── InputModelError        a model file that is missing, truncated, not ONNX, or invalid (exit 4)
    ├── ShapeSpecError         a --shapes/--min-shapes/... string that is malformed or does not fit the model (exit 4)
    ├── TorchExportError       the torch model cannot be loaded, exported, or its ONNX disagrees with torch (exit 4)
    ├── SampleDataError        --data that does not fit the model's inputs (exit 4)
    │   └── CalibrationDataError  --calib that is too small, of the wrong shape, or shares samples with --data (exit 4)
    ├── MetricError            a --metric that cannot be loaded, does not fit the outputs, or sees nothing (exit 4)
    │   └── NothingToJudgeError  the gate's samples give the metric nothing to compare: a detector whose FP32 side
    │                          finds no box on them (exit 4: the samples are the input to fix; never a pass)
    ├── ModelRunError          onnxruntime refused to run the model on the gate's samples (exit 4)
    ├── AccuracyGateError      FP16 cannot meet the criterion even with nodes kept in FP32 (exit 7)
    ├── Fp16GraphError         the FP16 ONNX graph could not be made valid (exit 7)
    ├── QuantizationError      ModelOpt failed to quantize the model (exit 6)
    │   └── OpsetConversionError  the INT8 graph has an op with no opset-17 form for TensorRT 8.5 (exit 6)
    ├── EngineBuildError       TensorRT failed to build the engine, after every workspace retry (exit 6)
    │   └── DlaError           DLA asked for where there is none, or with a precision it cannot run (exit 4)
    ├── EngineRunError         TensorRT failed while loading or running a built engine (exit 6)
    ├── NmsError               --nms on a model or TensorRT that cannot take NMS into the engine (exit 4)
    ├── DetectorSpecError      --task detect, --head or --labels that do not fit the model's outputs (exit 4)
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


class NothingToJudgeError(MetricError):
    """The FP32 model's answers on the gate's samples are empty (a detector finds no box): no candidate can be told
    from a broken one on them, so the gate stops instead of passing."""


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


class OpsetConversionError(QuantizationError):
    """The INT8 Q/DQ graph (opset 19) has a node that opset 17, TensorRT 8.5's, cannot express."""


class EngineBuildError(ConvertError):
    exit_code = EXIT_RUNTIME


class DlaError(EngineBuildError):
    exit_code = EXIT_BAD_INPUT


class EngineRunError(ConvertError):
    exit_code = EXIT_RUNTIME


class NmsError(ConvertError):
    """``--nms`` refused: not a recognized raw-head detector, a head that has NMS already, INT8 on DLA, options
    out of range, or a TensorRT with neither the EfficientNMS_TRT plugin nor INMSLayer for what was asked."""


class StaleEngineError(ConvertError):
    exit_code = EXIT_STALE


class LibraryCrashError(ConvertError):
    exit_code = EXIT_RUNTIME


class DetectorSpecError(ConvertError):
    """--task detect on a model whose outputs fit no detection head, a --head that does not fit them, or --labels
    whose count differs from the model's classes (orinkit.detect's reason, one line)."""

