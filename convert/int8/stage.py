"""The INT8 stage of edge-convert: calibrate (ModelOpt, in a child), search the exclusions (the INT8 gate), and
write the artifacts TensorRT builds on the device:

* ``model.int8.onnx``: Q/DQ, FP16 elsewhere, FP16 scales, opset 19 (ModelOpt's output): TensorRT 10.x and 11,
  strongly typed;
* ``model.int8.opset17.onnx``: the same exclusions with FP32 scales at opset 17: TensorRT 8.5 (JetPack 5) and the
  source of the DLA calibration cache (JetPack 5/6 run DLA INT8 only implicitly).

Temporary files (the calibration arrays, the first calibrated graph) live in the conversion's staging folder and
are removed before it is renamed into place; an interruption removes the whole staging folder.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from orinkit.convert.errors import AccuracyGateError
from orinkit.convert.fp16.gate import GateOptions, Verdict
from orinkit.convert.int8.calibration import CalibrationSet, save_npz
from orinkit.convert.int8.gate import Int8Report, run_int8_gate
from orinkit.convert.int8.modelopt_run import quantize_in_child
from orinkit.convert.int8.qdq import to_fp32, to_opset17, without_qdq
from orinkit.convert.stages import paced

INT8_ONNX, INT8_OPSET17_ONNX = "model.int8.onnx", "model.int8.opset17.onnx"


def run_int8(fp32_path: Path, staging: Path, calibration: CalibrationSet, samples, options: GateOptions, *,
             method: str, high_precision: str, fp16: Verdict | None, progress=lambda message: None
             ) -> Int8Report:
    import onnx

    npz = staging / ".calibration.npz"
    calibrated = staging / ".int8.calibrated.onnx"
    try:
        save_npz(calibration, npz)
        progress(f"  calibrating with ModelOpt ({method}, {len(calibration.samples)} samples; in a child process)")
        with paced(progress, f"INT8: ModelOpt calibrating ({method}, {len(calibration.samples)} samples)"):
            quantize_in_child(fp32_path, calibrated, npz, method=method, high_precision=high_precision)

        def regenerate(excluded: tuple[str, ...]) -> Path:
            output = staging / INT8_ONNX
            if excluded:
                progress(f"  ModelOpt again, {len(excluded)} node(s) excluded ({high_precision} there)")
                quantize_in_child(fp32_path, output, npz, method=method, exclude=excluded,
                                  high_precision=high_precision)
            else:  # nothing excluded: the calibrated graph is the one judged
                shutil.copyfile(calibrated, output)
            return output

        def judged_graph(excluded: tuple[str, ...]) -> Path:
            # ModelOpt placed the Q/DQ pairs differently with the exclusions: keep the graph the search judged.
            output = staging / INT8_ONNX
            onnx.save(without_qdq(onnx.load(str(calibrated)), excluded), str(output))
            return output

        report = run_int8_gate(calibrated, fp32_path, samples, options, method=method, calibration=calibration,
                               finish=(regenerate, judged_graph), fp16=fp16, progress=progress)
        # JetPack 5's TensorRT 8.5: FP32 scales, opset 17.
        final = onnx.load(str(staging / INT8_ONNX))
        onnx.save(to_opset17(to_fp32(final)), str(staging / INT8_OPSET17_ONNX))
    finally:
        for temporary in (npz, calibrated):
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
    for line in report.lines():
        progress(f"  {line}")
    if not report.passed:
        failing = "; ".join(line for line in report.int8.lines() if "FAIL" in line)
        raise AccuracyGateError(
            f"INT8 misses the {report.decided_by} on the held-out samples: {failing}",
            report=report, hint="raise --gate-budget, exclude nodes with --int8-exclude, or convert without --int8")
    return report
