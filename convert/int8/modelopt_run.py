"""ModelOpt's INT8 quantization, as the child process runs it.

ModelOpt patches ``onnxruntime.quantization`` inside the process that imports it (a later ``quantize_static`` there
fails), and imports torch and NVML at load: it never runs in the tool's own process. :func:`quantize_in_child`
is the parent's side; :func:`quantize` runs in a fresh child (:mod:`orinkit.core.isolation`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from orinkit.convert.errors import LibraryCrashError, QuantizationError
from orinkit.core.errors import ChildCrashedError, OrinkitError
from orinkit.core.isolation import run_isolated
from orinkit.core.optional import require_version

# The releases this code was written against and tested with; others may move Q/DQ or rename arguments.
MODELOPT = ("nvidia-modelopt", "modelopt", "0.47")
ONNXRUNTIME_JUDGE = ("onnxruntime", "onnxruntime", "1.32")


def quantize(source: str, output: str, calibration: str, method: str, exclude: Sequence[str],
             high_precision: str) -> dict:
    """Child side: ModelOpt INT8 on ``source`` with the arrays of the .npz ``calibration``; ``exclude`` are node
    names kept out of INT8 (in ``high_precision``: "fp16" or "fp32"). Returns what it did."""
    import numpy as np

    require_version(*MODELOPT)
    from modelopt.onnx.quantization import quantize as modelopt_quantize

    with np.load(calibration) as arrays:
        data = {name: arrays[name] for name in arrays.files}
    modelopt_quantize(
        source, quantize_mode="int8", calibration_data=data, calibration_method=method, calibration_eps=["cpu"],
        nodes_to_exclude=[f"^{re.escape(name)}$" for name in exclude] or None, high_precision_dtype=high_precision,
        output_path=output, log_level="WARNING",
    )
    if not Path(output).is_file():
        raise QuantizationError(f"ModelOpt wrote no model at {output}", hint="run it again with a fresh output folder")
    return {"output": output}


def quantize_in_child(source: Path, output: Path, calibration: Path, *, method: str, exclude: Sequence[str] = (),
                      high_precision: str = "fp16") -> None:
    """Run :func:`quantize` in a fresh child; a crash or a ModelOpt exception becomes one typed line."""
    try:
        run_isolated("ModelOpt (INT8 calibration)", f"{__name__}:quantize", str(source), str(output),
                     str(calibration), method, list(exclude), high_precision)
    except ChildCrashedError as exc:
        raise LibraryCrashError(exc.message, hint="convert without --int8, or try another ModelOpt version") from exc
    except OrinkitError:
        raise
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
        raise QuantizationError(f"ModelOpt failed to quantize the model ({why})", hint="convert without --int8, "
                                "or exclude the node it names with --int8-exclude") from exc
