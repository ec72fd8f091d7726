"""The INT8 stage of edge-convert: calibrate (ModelOpt, in a child), search the exclusions (the INT8 gate), and
write the artifacts TensorRT builds on the device:

* ``model.int8.onnx``: Q/DQ, FP16 elsewhere, FP16 scales, opset 19 (ModelOpt's output): TensorRT 10.x and 11,
  strongly typed;
* ``model.int8.opset17.onnx``: the same exclusions with FP32 scales at opset 17: TensorRT 8.5 (JetPack 5) and the
  source of the DLA calibration cache (JetPack 5/6 run DLA INT8 only implicitly).

Temporary files (the calibration arrays, each method's calibrated graph) live in the conversion's staging folder and
are removed before it is renamed into place; an interruption removes the whole staging folder.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import time
from pathlib import Path

from orinkit.convert.errors import AccuracyGateError
from orinkit.convert.fp16.gate import GateOptions, Verdict
from orinkit.convert.int8.calibration import CalibrationSet, save_npz
from orinkit.convert.int8.detector import method_order
from orinkit.convert.int8.gate import Int8Report, run_int8_gate
from orinkit.convert.int8.modelopt_run import quantize_in_child
from orinkit.convert.int8.qdq import constants_as_initializers, quantized_nodes, to_fp32, to_opset17, without_qdq
from orinkit.convert.int8.report import DEFAULT_MIN_SHARE
from orinkit.convert.stages import paced

INT8_ONNX, INT8_OPSET17_ONNX = "model.int8.onnx", "model.int8.opset17.onnx"


def run_int8(fp32_path: Path, staging: Path, calibration: CalibrationSet, samples, options: GateOptions, *,
             method: str | None, high_precision: str, fp16: Verdict | None, min_share: float = DEFAULT_MIN_SHARE,
             progress=lambda message: None) -> Int8Report:
    """``method`` None: the calibration method is chosen by the gate (a detector tries max first, other models
    entropy; the other one is calibrated only when the first misses the gate with every node in INT8 and, on a
    detector, with its first guess out of INT8)."""
    import onnx

    from orinkit.convert.detection import recognize

    methods = (method,) if method else method_order(recognize(fp32_path))
    npz = staging / ".calibration.npz"
    calibrated: dict[str, Path] = {}
    # ModelOpt reads weights held by Constant nodes as per-tensor: it gets them as initializers (same values).
    source, folded = fp32_path, staging / ".int8.source.onnx"
    model = onnx.load(str(fp32_path))
    moved = constants_as_initializers(model)
    if moved:
        onnx.save(model, str(folded))
        source = folded
        progress(f"  {moved} Constant node(s) handed to ModelOpt as initializers (per-channel weight scales)")
    del model

    def calibrate(chosen: str) -> Path:
        path = staging / f".int8.calibrated.{chosen}.onnx"
        progress(f"  calibrating with ModelOpt ({chosen}, {len(calibration.samples)} samples; in a child process)")
        with paced(progress, f"INT8: ModelOpt calibrating ({chosen}, {len(calibration.samples)} samples)"):
            quantize_in_child(source, path, npz, method=chosen, high_precision=high_precision)
        calibrated[chosen] = path
        return path

    try:
        save_npz(calibration, npz)
        started = time.monotonic()
        first = calibrate(methods[0])
        first_seconds = time.monotonic() - started

        def regenerate(chosen: str, excluded: tuple[str, ...]) -> Path:
            output = staging / INT8_ONNX
            if excluded:
                progress(f"  ModelOpt again ({chosen}), {len(excluded)} node(s) excluded ({high_precision} there)")
                with paced(progress, f"INT8: ModelOpt writing the final graph ({chosen})"):
                    quantize_in_child(source, output, npz, method=chosen, exclude=excluded,
                                      high_precision=high_precision)
                # ModelOpt quantizes a tensor once for all its readers: an excluded node that shares its input with a
                # quantized one still reads the Q/DQ pair (seen on a YOLOv8n's C2f convolutions). It reads the float
                # tensor here, as the search judged it.
                written = onnx.load(str(output))
                still = sorted(set(quantized_nodes(written)) & set(excluded))
                if still:
                    onnx.save(without_qdq(written, still), str(output))
            else:  # nothing excluded: the calibrated graph is the one judged
                shutil.copyfile(calibrated[chosen], output)
            return output

        def judged_graph(chosen: str, excluded: tuple[str, ...]) -> Path:
            # ModelOpt placed the Q/DQ pairs differently with the exclusions: keep the graph the search judged.
            output = staging / INT8_ONNX
            onnx.save(without_qdq(onnx.load(str(calibrated[chosen])), excluded), str(output))
            return output

        report = run_int8_gate(first, fp32_path, samples, options, methods=methods, calibration=calibration,
                               calibrate=calibrate, finish=(regenerate, judged_graph), fp16=fp16,
                               min_share=min_share, first_seconds=first_seconds, progress=progress)
        # JetPack 5's TensorRT 8.5: FP32 scales, opset 17.
        final = onnx.load(str(staging / INT8_ONNX))
        onnx.save(to_opset17(to_fp32(final)), str(staging / INT8_OPSET17_ONNX))
    finally:
        for temporary in (npz, folded, *calibrated.values()):
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
    for line in report.lines():
        progress(f"  {line}")
    for note in report.notes:
        if "--int8-min-share" in note or "the written graph decides" in note:
            progress(f"  note: {note}")
    if not report.passed:
        hint = ("raise --gate-budget, exclude nodes with --int8-exclude, or convert without --int8"
                if not report.accuracy_met else
                "convert without --int8 (the FP16 engine is the better one here), give more and more typical "
                "--calib samples" + (", raise --gate-budget" if report.needs else "")
                + f", or accept it with --int8-min-share {max(0.0, math.floor(report.int8_share * 100) / 100):g}")
        raise AccuracyGateError(report.failure(), report=report, hint=hint)
    return report
