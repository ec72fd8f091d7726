"""edge-convert end to end on this machine (no TensorRT: FP32 and gated FP16 ONNX), and its bad inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
import torchvision
from click.testing import CliRunner
from torch_models import Overflows, TinyClassifier, TwoInTwoOut, export

from orinkit.cli.convert import main
from orinkit.convert.errors import InputModelError, TorchExportError
from orinkit.convert.onnx_prep import prepare
from orinkit.convert.pipeline import ConvertOptions, convert_onnx, convert_torch
from orinkit.convert.torch_export import export_torch, load_factory


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    return export(TinyClassifier(), torch.randn(1, 3, 32, 32), tmp_path_factory.mktemp("m") / "tiny.onnx",
                  output_name="logits")


def _nothing_left(folder):
    return [p.name for p in folder.iterdir() if p.name.startswith(".") or p.name.endswith(".edge")] == []


def test_torch_export_names_axes_and_checks_against_torch(tmp_path):
    report = export_torch(TwoInTwoOut(), [torch.randn(2, 3, 16, 16), torch.randn(2, 6)], tmp_path / "two.onnx",
                          input_names=["image", "vector"], output_names=["features", "score"], dynamic_batch=True)
    model = onnx.load(str(report.path))
    assert [i.name for i in model.graph.input] == ["image", "vector"]
    assert [o.name for o in model.graph.output] == ["features", "score"]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert max(report.max_abs_diff.values()) < 1e-4


def test_torch_export_refuses_mismatched_names(tmp_path):
    with pytest.raises(TorchExportError, match="2 outputs but 1 names"):
        export_torch(TwoInTwoOut(), [torch.randn(1, 3, 8, 8), torch.randn(1, 6)], tmp_path / "x.onnx",
                     input_names=["image", "vector"], output_names=["only"])
    with pytest.raises(TorchExportError, match="is not package.module:factory"):
        load_factory("torch_models")
    with pytest.raises(TorchExportError, match="cannot load torch_models:Nope"):
        load_factory("torch_models:Nope")


def test_resnet18_from_torchvision_converts(tmp_path):
    messages = []
    model = torchvision.models.resnet18(weights=None)
    result = convert_torch(model, [torch.rand(1, 3, 224, 224)], tmp_path / "resnet18.edge",
                           ConvertOptions(samples=2, min_shapes={"input": (1, 3, 224, 224)},
                                          opt_shapes={"input": (2, 3, 224, 224)},
                                          max_shapes={"input": (4, 3, 224, 224)}),
                           input_names=["input"], output_names=["logits"], dynamic_batch=True,
                           progress=messages.append)
    assert result.prepared.simplified and result.gate.passed
    assert sorted(p.name for p in result.output.iterdir()) == ["model.fp16.onnx", "model.onnx", "report.json"]
    assert [s.name for s in result.stages][:2] == ["export from torch", "validate and simplify the ONNX model"]
    assert any("engine is built on the device" in m for m in messages)
    x = np.random.default_rng(0).random((3, 3, 224, 224), dtype=np.float32)
    fp16 = onnxruntime.InferenceSession(str(result.output / "model.fp16.onnx")).run(None, {"input": x})[0]
    fp32 = onnxruntime.InferenceSession(str(result.output / "model.onnx")).run(None, {"input": x})[0]
    assert fp16.shape == (3, 1000) and np.allclose(fp16, fp32, atol=2e-2)


def test_overflowing_model_keeps_its_node_in_fp32_and_reports_it(tmp_path):
    source = export(Overflows(), torch.randn(1, 16), tmp_path / "overflows.onnx", dynamic_batch=False)
    convert_onnx(source, tmp_path / "out", ConvertOptions(input_ranges={"input": (-1.0, 1.0)}))
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["keep_fp32"] == ["/Mul_1"] and report["gate"]["passed"]
    assert report["gate"]["first"]["outputs"][0]["max_abs"] == "inf"
    assert report["options"]["criterion"]["kind"] == "auto"
    assert report["engine_built"] is False and "engine is built on the device" in report["notes"][0]


def test_user_data_feeds_the_gate(tiny_onnx, tmp_path):
    data = tmp_path / "data.npz"
    np.savez(data, input=np.random.default_rng(1).random((3, 1, 3, 32, 32), dtype=np.float32))
    result = convert_onnx(tiny_onnx, tmp_path / "out", ConvertOptions(data=data, shapes={"input": (1, 3, 32, 32)}))
    assert result.gate.samples == 3
    np.savez(data, image=np.zeros((1, 3, 32, 32), np.float32))
    with pytest.raises(Exception, match="lacks arrays for inputs input"):
        convert_onnx(tiny_onnx, tmp_path / "again", ConvertOptions(data=data, shapes={"input": (1, 3, 32, 32)}))
    assert not (tmp_path / "again").exists()


def test_bad_model_files_are_named(tmp_path, tiny_onnx):
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(tiny_onnx.read_bytes()[: tiny_onnx.stat().st_size // 2])
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model")
    for path, message in ((truncated, "is not an ONNX model"), (text, "not an ONNX model|holds no ONNX graph"),
                          (tmp_path / "missing.onnx", "does not exist")):
        with pytest.raises(InputModelError, match=message):
            prepare(path, tmp_path / "prepared.onnx")


def test_no_simplify_keeps_the_graph_and_says_so(tmp_path, tiny_onnx):
    prepared = prepare(tiny_onnx, tmp_path / "prepared.onnx", simplify_model=False)
    assert not prepared.simplified and prepared.note == "not simplified: asked not to"
    simplified = prepare(tiny_onnx, tmp_path / "simplified.onnx")
    assert simplified.simplified and simplified.note == ""
    assert simplified.inputs == {"input": (-1, 3, 32, 32)} and simplified.outputs == ("logits",)


@pytest.mark.parametrize("args, code, message", [
    (["{missing}"], 4, "does not exist"),
    (["{truncated}"], 4, "is not an ONNX model"),
    (["{tiny}", "--shapes", "input:1x3x32"], 4, "does not fit its declared shape"),
    (["{tiny}", "--shapes", "image:1x3x32x32"], 4, "which the model does not have as inputs"),
    (["{tiny}", "--min-shapes", "input:1x3x32x32"], 4, "lacks --opt-shapes, --max-shapes"),
    (["{tiny}", "--shapes", "input=1x3x32x32"], 4, "is not NAME:DIMS"),
    (["{tiny}", "--torch", "x:y"], 4, "either MODEL"),
    (["{tiny}", "--shapes", "input:1x3x32x32", "--workspace", "lots"], 4, "is not auto or a number"),
])
def test_cli_bad_inputs_exit_non_zero_and_write_nothing(tmp_path, tiny_onnx, args, code, message):
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(tiny_onnx.read_bytes()[: tiny_onnx.stat().st_size // 2])
    values = {"missing": tmp_path / "missing.onnx", "truncated": truncated, "tiny": tiny_onnx}
    args = [a.format(**values) for a in args]
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out.edge")])
    assert result.exit_code == code, result.output
    assert message in result.output.replace("\n", " ") or __import__("re").search(message, result.output)
    assert not (tmp_path / "out.edge").exists() and _nothing_left(tmp_path)


def test_cli_converts_and_places_into_a_repository(tmp_path, tiny_onnx):
    runner = CliRunner()
    out, repo = tmp_path / "tiny.edge", tmp_path / "models"
    result = runner.invoke(main, [str(tiny_onnx), "--shapes", "input:2x3x32x32", "-o", str(out), "--repo",
                                  str(repo), "--create", "--name", "tiny", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{"):])
    assert report["gate"]["passed"] and report["keep_fp32"] == []
    assert (repo / "tiny" / "1" / "model.onnx").is_file() and (repo / "tiny" / "1" / "model.py").is_file()
    exists = runner.invoke(main, [str(tiny_onnx), "--shapes", "input:2x3x32x32", "-o", str(out)])
    assert exists.exit_code == 4 and "--force" in exists.output
    forced = runner.invoke(main, [str(tiny_onnx), "--shapes", "input:2x3x32x32", "-o", str(out), "--force",
                                  "--no-fp16", "--repo", str(repo), "--name", "tiny"])
    assert forced.exit_code == 0, forced.output
    assert sorted(p.name for p in out.iterdir()) == ["model.onnx", "report.json"]
    assert "deployed model.onnx as tiny version 2" in forced.output
    assert oct(out.stat().st_mode & 0o777) == oct(0o777 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_cli_torch_entry_point(tmp_path):
    result = CliRunner().invoke(main, ["--torch", "torch_models:TwoInTwoOut", "--input", "image:1x3x16x16",
                                       "--input", "vector:1x6", "--output-name", "features", "--output-name",
                                       "score", "-o", str(tmp_path / "two.edge")])
    assert result.exit_code == 0, result.output
    assert "[torch] exported" in result.output
    model = onnx.load(str(tmp_path / "two.edge" / "model.onnx"))
    assert [i.name for i in model.graph.input] == ["image", "vector"]


def test_cli_without_torch_names_the_extra(tmp_path):
    # sys.modules["torch"] = None makes `import torch` fail here as it does where torch is not installed.
    code = ("import sys; sys.modules['torch'] = None\n"
            "from orinkit.cli.convert import main\n"
            f"main(['--torch', 'torch_models:TinyClassifier', '--input', 'input:1x3x32x32', '-o', "
            f"{str(tmp_path / 'out.edge')!r}])\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=os.path.dirname(__file__), timeout=120)
    assert result.returncode == 3, result.stderr
    assert "pip install 'orinkit[torch]'" in result.stderr
    assert not (tmp_path / "out.edge").exists()


def test_verify_engine_needs_tensorrt_here(tmp_path):
    from repo_fixtures import stand_in_plan

    plan = stand_in_plan(tmp_path)
    result = CliRunner().invoke(main, ["--verify-engine", str(plan)])
    assert result.exit_code == 3 and "JetPack" in result.output


@pytest.mark.parametrize("version, fp16_mode", [("8.6.2", "flag"), ("10.3.0", "flag"), ("11.1.0", "graph")])
def test_engine_path_with_tensorrt_test_doubles(tmp_path, monkeypatch, version, fp16_mode):
    """The device path through the fake TensorRT and pycuda of tests/fake_tensorrt.py (test doubles: no GPU
    here): plan, manifest, the engine's accuracy check and the benchmark."""
    from fake_tensorrt import install_fakes

    install_fakes(monkeypatch, version)
    source = export(Overflows(), torch.randn(1, 16), tmp_path / "overflows.onnx")
    messages = []
    result = convert_onnx(source, tmp_path / "out", ConvertOptions(
        min_shapes={"input": (1, 16)}, opt_shapes={"input": (2, 16)}, max_shapes={"input": (4, 16)},
        input_ranges={"input": (-1.0, 1.0)}, benchmark=True, workspace=256 << 20), progress=messages.append)
    assert result.engine_built and result.engine["fp16_mode"] == fp16_mode
    assert sorted(p.name for p in result.output.iterdir()) == [
        "model.fp16.onnx", "model.onnx", "model.plan", "model.plan.manifest.json", "report.json"]
    from orinkit.formats.manifest import read_manifest

    manifest = read_manifest(result.output / "model.plan")
    assert manifest.precision == "fp16" and manifest.build["tensorrt_version"] == version
    assert manifest.build["keep_fp32"] == ["/Mul_1"] and manifest.max_batch() == 4
    assert manifest.build["onnx_sha256"] == result.prepared.source_sha256
    assert any(m.startswith("  engine output:") for m in messages)
    assert result.benchmark["throughput_qps"] > 0
    from orinkit.repo.add import add_model

    placed = add_model(tmp_path / "models", result.output / "model.plan", name="overflows")
    assert placed.config.platform == "tensorrt_plan" and placed.config.max_batch_size == 4


def test_a_dynamic_batch_needs_no_shapes_and_says_what_it_chose(tmp_path, tiny_onnx):
    result = CliRunner().invoke(main, [str(tiny_onnx), "-o", str(tmp_path / "tiny.edge")])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("shapes: input min 1x3x32x32, opt 1x3x32x32, max 8x3x32x32 (dynamic batch: 1..8 by "
                            "default"), first
    report = json.loads((tmp_path / "tiny.edge" / "report.json").read_text())
    assert report["profiles"]["input"]["max"] == [8, 3, 32, 32] and list(report)[0] == "shapes"
    four = CliRunner().invoke(main, [str(tiny_onnx), "-o", str(tmp_path / "four.edge"), "--max-batch", "4"])
    assert four.exit_code == 0 and "max 4x3x32x32" in four.output.splitlines()[0]


def test_dynamic_spatial_axes_still_need_shapes(tmp_path):
    path = tmp_path / "spatial.onnx"
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore")
        torch.onnx.export(TinyClassifier(), (torch.randn(1, 3, 32, 32),), str(path), input_names=["input"],
                          output_names=["logits"], dynamo=False,
                          dynamic_axes={"input": {0: "b", 2: "h", 3: "w"}, "logits": {0: "b"}})
    result = CliRunner().invoke(main, [str(path), "-o", str(tmp_path / "out.edge")])
    assert result.exit_code == 4 and "Traceback" not in result.output
    assert "dynamic axes beyond the batch" in result.output and "--shapes input:1x3xHxW" in result.output
    assert "1x3x1x1" not in result.output
    static = CliRunner().invoke(main, [str(path), "--shapes", "input:1x3x32x32", "--max-batch", "4",
                                       "-o", str(tmp_path / "out.edge")])
    assert static.exit_code == 4 and "--max-batch applies to inputs whose batch axis is dynamic" in static.output


def test_the_transformer_block_converts_from_torch(tmp_path):
    result = CliRunner().invoke(main, ["--torch", "torch_models:transformer_block", "--input", "x:1x16x64",
                                       "--dynamic-batch", "-o", str(tmp_path / "block.edge")])
    assert result.exit_code == 0, result.output
    assert "by the dynamo exporter" in result.output and "every one of the" in result.output
    x = np.random.default_rng(0).standard_normal((2, 16, 64)).astype(np.float32)
    fp16 = onnxruntime.InferenceSession(str(tmp_path / "block.edge" / "model.fp16.onnx")).run(None, {"x": x})[0]
    fp32 = onnxruntime.InferenceSession(str(tmp_path / "block.edge" / "model.onnx")).run(None, {"x": x})[0]
    assert fp16.shape == (2, 16, 64) and np.abs(fp16 - fp32).max() < 0.05 * np.abs(fp32).max()


@pytest.mark.parametrize("args, message", [
    (["--atol", "0.1"], "--atol/--rtol apply to the elementwise criterion only"),
    (["--criterion", "elementwise", "--max-range-error", "0.1"], "--max-range-error applies to the range"),
    (["--metric", "nosuch"], "unknown --metric 'nosuch'"),
    (["--min-agreement", "0.9"], "--min-agreement applies to a --metric only"),
    (["--no-fp16", "--keep-fp32", "/fc/Gemm"], "--keep-fp32 and --gate-budget shape the FP16 gate"),
    (["--keep-fp32", "/nope"], "--keep-fp32 names /nope"),
    (["--gate-budget", "0"], "--gate-budget must be above 0"),
])
def test_gate_options_that_do_not_apply_are_refused(tmp_path, tiny_onnx, args, message):
    result = CliRunner().invoke(main, [str(tiny_onnx), *args, "-o", str(tmp_path / "out.edge")])
    assert result.exit_code == 4, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out.edge").exists() and _nothing_left(tmp_path)


def test_an_onnxsim_crash_keeps_the_model_unsimplified(tmp_path, tiny_onnx, monkeypatch):
    monkeypatch.setenv("ORINKIT_FAILPOINT", "onnxsim-crash")  # onnxsim's child process gets SIGSEGV, for real
    messages = []
    result = convert_onnx(tiny_onnx, tmp_path / "out", ConvertOptions(samples=2), progress=messages.append)
    assert not result.prepared.simplified and result.gate.passed
    assert "not simplified: onnxsim crashed (SIGSEGV); the unsimplified model is used" in messages


def test_a_crash_of_onnxruntime_in_the_gate_is_one_line_and_exit_6(tmp_path, tiny_onnx):
    env = {**os.environ, "ORINKIT_FAILPOINT": "fp16-gate-crash"}  # SIGSEGV in the gate's child, for real
    result = subprocess.run([sys.executable, "-m", "orinkit.cli.convert", str(tiny_onnx), "-o",
                             str(tmp_path / "out.edge")], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 6, result.stderr
    assert "Error: onnxruntime (running the FP16 gate) crashed (SIGSEGV)" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "out.edge").exists() and _nothing_left(tmp_path)


def test_an_existing_output_from_python_names_the_argument_not_the_cli_flag(tmp_path):
    """convert_onnx is called from Python too: the fix names force=True (and the CLI's --force beside it)."""
    from orinkit.convert.errors import ConvertError

    (tmp_path / "out").mkdir()
    with pytest.raises(ConvertError, match=r"already exists; replace it with force=True \(edge-convert --force\)"):
        convert_onnx(tmp_path / "model.onnx", tmp_path / "out")

