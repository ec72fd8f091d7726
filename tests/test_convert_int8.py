"""edge-convert --int8 on a trained model: ModelOpt (real, in its child process), the INT8 gate on real
onnxruntime >= 1.32 judging real ONNX files, the calibration set's checks, and the Q/DQ graph operations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner

from orinkit.cli.convert import main
from orinkit.convert.errors import AccuracyGateError, CalibrationDataError, ConvertError
from orinkit.convert.int8 import qdq
from orinkit.convert.pipeline import ConvertOptions, convert_onnx

pytest.importorskip("modelopt")


def _run(path, x):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


def test_int8_conversion_writes_judged_qdq_graphs(int8_digits, int8_converted):
    result, lines = int8_converted
    report = result.int8
    assert report.passed and report.calibration_samples == 300 and report.held_out == 297
    names = sorted(p.name for p in result.output.iterdir())
    assert names == ["model.fp16.onnx", "model.int8.onnx", "model.int8.opset17.onnx", "model.onnx", "report.json"]
    final = onnx.load(str(result.output / "model.int8.onnx"))
    trt85 = onnx.load(str(result.output / "model.int8.opset17.onnx"))
    assert qdq.quantized_nodes(final) and qdq.quantized_nodes(trt85) == qdq.quantized_nodes(final)
    assert max(o.version for o in trt85.opset_import if o.domain in ("", "ai.onnx")) == 17
    assert set(qdq.activation_scales(trt85)) == set(qdq.activation_scales(final))
    # The report's INT8 agreement is what the artifact does on the held-out int8_digits, measured here independently.
    held = int8_digits["images"][1500:]
    fp32, int8 = _run(result.output / "model.onnx", held), _run(result.output / "model.int8.onnx", held)
    agreement = float(np.mean(fp32.argmax(1) == int8.argmax(1)))
    assert report.int8.task.agreement == pytest.approx(agreement) and agreement >= 0.99
    labels = int8_digits["labels"][1500:]
    assert np.mean(int8.argmax(1) == labels) >= np.mean(fp32.argmax(1) == labels) - 0.01
    rows = report.side_by_side()
    assert rows[0][0] == "topk" and rows[0][1] == "1.0000" and float(rows[0][3]) == pytest.approx(agreement, abs=1e-4)
    saved = json.loads((result.output / "report.json").read_text())["int8"]
    assert saved["calibration_sha256"] == report.calibration_sha256 and saved["method"] == "entropy"
    assert any("1 of 3 compute nodes INT8" in line for line in lines)
    assert (saved["min_share"], saved["share_met"], [t["method"] for t in saved["methods"]]) == (0, True, ["entropy"])


def test_the_switch_reproduces_the_qdq_graph_and_the_float_one(int8_digits, int8_converted, tmp_path):
    """The search's one trick: every switch on is the Q/DQ graph, every switch off the float graph, and switching
    a node off is the graph with that node's Q/DQ pairs removed; all on real onnxruntime."""
    from orinkit.convert.fp16.graphs import session

    result, _ = int8_converted
    model = onnx.load(str(result.output / "model.int8.opset17.onnx"))
    graph, units = qdq.switchable(model)
    run = session(graph, optimize=False)
    x = int8_digits["images"][1500:1520]

    def switched(mask):
        return np.concatenate([run.run(None, {"pixels": x[i:i + 1], qdq.SWITCH: mask})[0] for i in range(len(x))])

    onnx.save(model, str(tmp_path / "q.onnx"))
    assert np.array_equal(switched(qdq.switch_for(units, ())), _run(tmp_path / "q.onnx", x))
    onnx.save(qdq.without_qdq(model, units), str(tmp_path / "float.onnx"))
    assert not qdq.quantized_nodes(onnx.load(str(tmp_path / "float.onnx")))
    # Every switch off: the float graph (its weights as ModelOpt stored them, FP16-rounded), far nearer FP32 than
    # the INT8 one.
    fp32 = _run(result.output / "model.onnx", x)
    off = np.abs(switched(qdq.switch_for(units, units)) - fp32).max()
    on = np.abs(switched(qdq.switch_for(units, ())) - fp32).max()
    assert off < 0.005 * np.abs(fp32).max() and off < on / 5
    onnx.save(qdq.without_qdq(model, units[:1]), str(tmp_path / "one.onnx"))
    assert np.array_equal(switched(qdq.switch_for(units, units[:1])), _run(tmp_path / "one.onnx", x))


STRICT = ["--criterion", "range", "--max-range-error", "0.01"]


def test_a_strict_gate_excludes_nodes_and_says_why(int8_digits, tmp_path):
    """Judged by the range criterion at 1 % (top-1 alone passes): INT8 as calibrated misses it with either
    calibration method, the search puts nodes back in FP16, each with its reason, and the artifact written with
    the exclusions meets it; too few compute nodes stay INT8 for the default minimum share, which this run lowers
    to 0 (and says so)."""
    from orinkit.convert.fp16.criteria import Criterion

    result = convert_onnx(int8_digits["onnx"], tmp_path / "strict", ConvertOptions(
        int8=True, calib=int8_digits["calib"], data=int8_digits["data"], int8_min_share=0,
        criterion=Criterion(kind="range", max_range_error=0.01)))
    report = result.int8
    assert report.passed and report.excluded and not report.search.first.passed
    assert [t.method for t in report.methods] == ["entropy", "max"] and not any(t.passed for t in report.methods)
    assert all("fails the gate" in e.why or "own INT8 error" in e.why for e in report.excluded)
    assert report.int8.metrics[0].range_error <= 0.01
    final = onnx.load(str(result.output / "model.int8.onnx"))
    assert not set(qdq.quantized_nodes(final)) & {e.node for e in report.excluded}
    assert report.int8_share < 0.5 and any("accepted because --int8-min-share 0" in n for n in report.notes)
    saved = json.loads((result.output / "report.json").read_text())
    assert saved["options"]["int8_min_share"] == 0 and saved["int8"]["min_share"] == 0


def test_too_few_int8_compute_nodes_is_a_failure_with_exit_7(int8_digits, tmp_path):
    """The same strict gate at the default minimum share: what the search leaves in INT8 is no INT8 model, and
    edge-convert says so (exit 7, one line, nothing written) instead of calling it passed."""
    runner = CliRunner().invoke(main, [str(int8_digits["onnx"]), "--int8", "--calib", str(int8_digits["calib"]),
                                       "--data", str(int8_digits["data"]), *STRICT, "-o", str(tmp_path / "o.edge")])
    assert runner.exit_code == 7, runner.output
    assert re.search(r"INT8 leaves only \d of 3 compute nodes \(Conv/MatMul/Gemm\) in INT8 \(\d+%\), below the "
                     r"minimum of 50%", runner.output), runner.output
    assert "--int8-min-share" in runner.output.split("below the minimum")[1] and "Traceback" not in runner.output
    assert not (tmp_path / "o.edge").exists()


def test_images_go_through_the_models_own_preprocessing(int8_digits, tmp_path):
    from PIL import Image

    folder = tmp_path / "pictures"
    folder.mkdir()
    for i, image in enumerate(int8_digits["images"][1200:1260]):
        Image.fromarray(np.rint(image[0] * 255 / 16).astype(np.uint8), "L").save(folder / f"{i:03}.png")
    result = convert_onnx(int8_digits["onnx"], tmp_path / "pics", ConvertOptions(
        int8=True, calib=folder, calib_preprocess="int8_models:to_digit_range", metric="topk", calib_method="max",
        int8_min_share=0))
    report = result.int8
    # 60 pictures: 12 held out for the gate (20 %), 48 calibrate.
    assert (report.calibration_samples, report.held_out, report.method) == (48, 12, "max")
    assert report.passed and any("held out of the calibration set" in n for n in report.notes)


@pytest.mark.parametrize("make, words", [
    (lambda x: {"pixels": x[1200:1210]}, "gives 10 calibration samples; at least 32 are needed"),
    (lambda x: {"pixels": x[1200:1300, :, :7, :7]}, "has shape [100, 1, 7, 7], but the input is [1, 1, 8, 8]"),
    (lambda x: {"pixels": x[1500:1600]}, "also in the calibration set"),
])
def test_calibration_sets_that_cannot_work_are_refused_before_onnxsim(int8_digits, tmp_path, make, words):
    calib = tmp_path / "calib.npz"
    np.savez(calib, **make(int8_digits["images"]))
    runner = CliRunner().invoke(main, [str(int8_digits["onnx"]), "--int8", "--calib", str(calib), "--data",
                                       str(int8_digits["data"]), "-o", str(tmp_path / "out.edge")])
    assert runner.exit_code == 4, runner.output
    assert words in runner.output and "Traceback" not in runner.output
    assert "simplifying it with onnxsim" not in runner.output
    assert len([line for line in runner.output.splitlines() if line.startswith("error")]) <= 1
    assert not (tmp_path / "out.edge").exists()
    with pytest.raises(CalibrationDataError):
        convert_onnx(int8_digits["onnx"], tmp_path / "lib.edge", ConvertOptions(int8=True, calib=calib,
                                                                           data=int8_digits["data"]))


@pytest.mark.parametrize("options, words", [
    ({"calib": "c.npz"}, "--calib applies to --int8 only"),
    ({"calib_method": "max", "int8_exclude": ("Conv_0",)}, "--calib-method, --int8-exclude apply to --int8 only"),
    ({"int8": True}, "--int8 needs calibration data"),
    ({"int8": True, "calib": "c.npz", "calib_method": "percentile"}, "not one ModelOpt offers for INT8"),
    ({"int8_min_share": 0.5}, "--int8-min-share applies to --int8 only"),
    ({"int8": True, "calib": "c.npz", "int8_min_share": 1.5}, "1.5 is not a share of the compute nodes"),
])
def test_options_that_do_not_apply_are_refused(options, words):
    with pytest.raises(ConvertError, match=words):
        ConvertOptions(**options)


def test_cli_refuses_calib_without_int8_in_one_line(int8_digits, tmp_path):
    runner = CliRunner().invoke(main, [str(int8_digits["onnx"]), "--calib", str(int8_digits["calib"]),
                                       "-o", str(tmp_path / "x.edge")])
    assert runner.exit_code == 4 and "--calib applies to --int8 only" in runner.output
    assert "Traceback" not in runner.output


def test_an_unknown_excluded_node_is_named_with_the_closest(int8_digits, tmp_path):
    with pytest.raises(ConvertError, match="did you mean"):
        convert_onnx(int8_digits["onnx"], tmp_path / "x", ConvertOptions(int8=True, calib=int8_digits["calib"],
                                                                    data=int8_digits["data"], int8_exclude=("Conv_9",)))
    assert not (tmp_path / "x").exists()


def test_calibration_cache_text_carries_the_qdq_scales(int8_converted):
    import struct

    result, _ = int8_converted
    model = onnx.load(str(result.output / "model.int8.opset17.onnx"))
    scales = qdq.activation_scales(model)
    for version, header in (("8.5.2.2", "TRT-8502-EntropyCalibration2"),
                            ("10.3.0", "TRT-100300-EntropyCalibration2")):
        lines = qdq.calibration_cache(scales, version).splitlines()
        assert lines[0] == header
        parsed = {n: struct.unpack(">f", bytes.fromhex(h))[0] for n, h in (line.split(": ") for line in lines[1:])}
        assert parsed == pytest.approx(scales, rel=1e-7)
    # The cache is read against the Q/DQ-free FP32 graph DLA builds: every scale names one of its tensors.
    plain = onnx.load(str(result.output / "model.onnx")).graph
    tensors = {o for n in plain.node for o in n.output} | {i.name for i in plain.input}
    assert scales and set(scales) <= tensors


def test_a_gate_that_int8_cannot_meet_fails_with_exit_7(int8_digits, tmp_path):
    with pytest.raises(AccuracyGateError) as caught:
        convert_onnx(int8_digits["onnx"], tmp_path / "never", ConvertOptions(
            int8=True, calib=int8_digits["calib"], data=int8_digits["data"], metric="user_metrics:never_agrees",
            fp16=False, gate_budget=5))
    assert caught.value.exit_code == 7 and not (tmp_path / "never").exists()


def test_a_torch_model_converts_to_int8_in_one_call(int8_digits, tmp_path):
    import sys

    import torch

    from orinkit.convert.pipeline import ConvertOptions, convert_torch

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        import mnist_ensemble
    finally:
        sys.path.pop(0)
    images, labels = int8_digits["images"], int8_digits["labels"]
    model = mnist_ensemble.train(images[:1200], labels[:1200])
    result = convert_torch(model, [torch.from_numpy(images[:1])], tmp_path / "digits.edge", ConvertOptions(
        int8=True, calib=int8_digits["calib"], data=int8_digits["data"], metric="topk", engine=False,
        int8_min_share=0), input_names=["pixels"], output_names=["logits"])
    assert result.int8.passed and result.int8.calibration_samples == 300 and result.int8.held_out == 297
    int8 = _run(result.output / "model.int8.onnx", images[1500:])
    assert np.mean(int8.argmax(1) == labels[1500:]) >= 0.9
