"""Which options --int8 needs and which apply only with it, checked before any work (one line each, exit 4)."""

from __future__ import annotations

from collections.abc import Callable

from orinkit.convert.errors import ConvertError

METHODS = ("entropy", "max")  # what ModelOpt offers for INT8 (it has no percentile calibration)


def check_int8_options(options) -> None:
    """``options`` is a :class:`~orinkit.convert.pipeline.ConvertOptions`."""
    only = [flag for flag, given in (("--calib", options.calib is not None),
                                     ("--calib-method", options.calib_method is not None),
                                     ("--calib-preprocess", options.calib_preprocess is not None),
                                     ("--int8-exclude", bool(options.int8_exclude)),
                                     ("--int8-min-share", options.int8_min_share is not None),
                                     ("calib_sha256", options.calib_sha256 is not None)) if given]
    if only and not options.int8:
        raise ConvertError(f"{', '.join(only)} appl{'ies' if len(only) == 1 else 'y'} to --int8 only",
                           hint="add --int8, or drop them")
    if not options.int8:
        return
    if options.calib is None:
        # trtexec --int8 without a cache runs with made-up scales: never build INT8 without calibration data.
        raise ConvertError("--int8 needs calibration data: --calib DIR (images) or --calib FILE.npz (arrays)",
                           hint="give a few hundred real inputs of the model with --calib")
    if options.calib_method is not None and options.calib_method not in METHODS:
        raise ConvertError(f"--calib-method {options.calib_method} is not one ModelOpt offers for INT8",
                           hint=f"use one of {', '.join(METHODS)} (percentile is not offered for INT8)")
    share = options.int8_min_share
    if share is not None and not 0.0 <= share <= 1.0:
        raise ConvertError(f"--int8-min-share {share:g} is not a share of the compute nodes in [0, 1]",
                           hint="e.g. 0.5 (the default: half of the Conv/MatMul/Gemm nodes in INT8), or 0 to accept "
                                "any INT8 result that meets the gate")
    if options.keep_fp32 and not options.fp16:
        raise ConvertError("--keep-fp32 shapes the FP16 gate, which --no-fp16 skips", hint="drop it")


def load_preprocess(spec: str | None) -> Callable | None:
    """``package.module:function`` (the model's own pre-processing for --calib pictures), or None."""
    if spec is None:
        return None
    from orinkit.convert.errors import CalibrationDataError
    from orinkit.convert.fp16.task_metrics import load_function

    return load_function(spec, flag="--calib-preprocess", error=CalibrationDataError)
