"""The FP16 graph's repair when onnxruntime crashes on it, with a real crash: onnxruntime 1.32's optimiser segfaults
on Cast(FP16) → Transpose → Cast(FP32) → MatMul, which the TorchScript export of nn.TransformerEncoderLayer
becomes once its attention's input projection is kept in FP32. Keeping the blamed node cannot cure that; keeping
a region around it does. Then the exporter fallback, and giving FP16 up only when nothing else works."""

from __future__ import annotations

import json
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from click.testing import CliRunner
from torch_models import TinyClassifier

from orinkit.cli.convert import main
from orinkit.convert.errors import Fp16GraphError
from orinkit.convert.fp16.convert import build_fp16
from orinkit.convert.fp16.repair import around, float_links, to_fp16
from orinkit.convert.onnx_prep import prepare
from orinkit.convert.pipeline import ConvertOptions, convert_torch
from orinkit.core.errors import ChildCrashedError
from orinkit.core.isolation import run_isolated

MATMUL, TRANSPOSE = "/l/self_attn/MatMul", "/l/self_attn/Transpose"


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.l = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)

    def forward(self, x):
        return self.l(x)


@pytest.fixture(scope="module")
def block_onnx(tmp_path_factory):
    """As a user exports it: TorchScript, opset 17, a dynamic batch axis."""
    path = tmp_path_factory.mktemp("block") / "block.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Block().eval(), (torch.randn(2, 16, 64),), str(path), input_names=["x"],
                          output_names=["y"], opset_version=17, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}},
                          dynamo=False)
    return path


def _validate(path, sample):
    """validate.check_file in a child: None, a reason, or "crashed" (the test process must survive a crash)."""
    try:
        return run_isolated("onnxruntime", "orinkit.convert.fp16.validate:check_file", str(path), sample)
    except ChildCrashedError:
        return "crashed"


@pytest.fixture(scope="module")
def prepared_block(block_onnx, tmp_path_factory):
    path = prepare(block_onnx, tmp_path_factory.mktemp("prepared") / "block.onnx").path
    model = onnx.load(str(path))
    sample = {"x": np.random.default_rng(0).standard_normal((1, 16, 64)).astype(np.float32)}
    kept_alone = tmp_path_factory.mktemp("alone") / "alone.onnx"
    onnx.save(build_fp16(model, {MATMUL}).model, str(kept_alone))
    if _validate(kept_alone, sample) != "crashed":
        pytest.skip(f"onnxruntime {onnxruntime.__version__} no longer crashes on the block's FP16 graph with "
                    f"{MATMUL} alone in FP32: the region repair has no real crash to cure here")
    return model, sample


def test_the_block_exported_by_torchscript_converts_with_a_region_kept_in_fp32(block_onnx, prepared_block, tmp_path):
    result = CliRunner().invoke(main, [str(block_onnx), "-o", str(tmp_path / "block.edge")])
    assert result.exit_code == 0, result.output
    assert f"the FP16 graph fails at node {MATMUL} (onnxruntime crashed (SIGSEGV)): keeping it in FP32" \
        in result.output
    assert "looking for the region around it that must stay FP32" in result.output
    assert f"keeping 1 node(s) around {MATMUL} in FP32 too: {TRANSPOSE}" in result.output
    report = json.loads((tmp_path / "block.edge" / "report.json").read_text())
    assert report["keep_fp32"] == [TRANSPOSE, MATMUL]
    fp16_path = tmp_path / "block.edge" / "model.fp16.onnx"
    x = np.random.default_rng(1).standard_normal((3, 16, 64)).astype(np.float32)
    assert _validate(fp16_path, {"x": x}) is None  # loads, optimises and runs in onnxruntime, in a child
    fp16 = onnxruntime.InferenceSession(str(fp16_path)).run(None, {"x": x})[0]
    fp32 = onnxruntime.InferenceSession(str(tmp_path / "block.edge" / "model.onnx")).run(None, {"x": x})[0]
    assert fp16.shape == (3, 16, 64) and np.abs(fp16 - fp32).max() < 0.02 * np.abs(fp32).max()
    halves = {o for n in onnx.load(str(fp16_path)).graph.node if n.op_type == "MatMul" and n.name != MATMUL
              for o in n.output}
    assert halves  # the attention's other MatMuls run in FP16


def test_a_node_the_gate_keeps_gets_its_region_when_it_alone_crashes(prepared_block):
    model, sample = prepared_block
    messages = []
    half, kept = to_fp16(model, [MATMUL], sample=sample, progress=messages.append)
    assert kept == (TRANSPOSE, MATMUL), messages
    assert any(m.startswith(f"  the FP16 graph fails at {MATMUL}") and "in FP32 already" in m for m in messages)
    assert len(kept) < len([n for n in model.graph.node if n.op_type not in ("Constant",)]) // 4


def test_regions_grow_along_floating_tensors(prepared_block):
    model, _ = prepared_block
    links = float_links(model)
    one = around(links, MATMUL, 1)
    assert one[MATMUL] == 0 and one[TRANSPOSE] == 1 and set(one.values()) == {0, 1}
    assert all(links[n] for n in one) and MATMUL in links[TRANSPOSE]
    two = around(links, MATMUL, 2)
    assert set(one) < set(two) and max(two.values()) == 2
    assert len(around(links, MATMUL, 10_000)) <= len(model.graph.node)


def test_the_other_exporters_graph_is_tried_before_fp16_is_given_up(tmp_path, monkeypatch):
    """ORINKIT_FAILPOINT fp16-validate-crash:any@17 stands for an onnxruntime that crashes (SIGSEGV, for real, in
    the validation's child) on every FP16 graph at opset 17, the TorchScript export's: no node or region kept in
    FP32 cures it, and the dynamo exporter's graph (opset 18) is converted instead."""
    monkeypatch.setenv("ORINKIT_FAILPOINT", "fp16-validate-crash:any@17")
    messages = []
    result = convert_torch(TinyClassifier(), [torch.rand(1, 3, 32, 32)], tmp_path / "tiny.edge",
                           ConvertOptions(samples=2), input_names=["input"], output_names=["logits"],
                           progress=messages.append)
    assert any("converting the dynamo exporter's graph of the module instead" in m for m in messages), messages
    assert any(m.startswith("[torch] exported by the dynamo exporter") for m in messages)
    assert result.stages[0].detail.startswith("dynamo") and result.keep_fp32 == ()
    model = onnx.load(str(tmp_path / "tiny.edge" / "model.fp16.onnx"))
    assert max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) >= 18


def test_fp16_is_given_up_only_when_no_graph_works(tmp_path, monkeypatch):
    monkeypatch.setenv("ORINKIT_FAILPOINT", "fp16-validate-crash:any")
    result = CliRunner().invoke(main, ["--torch", "torch_models:TinyClassifier", "--input", "input:1x3x32x32",
                                       "-o", str(tmp_path / "tiny.edge")])
    assert result.exit_code == 7, result.output
    assert "Traceback" not in result.output
    error = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "no FP16 graph of this model works on this onnxruntime" in error[0]
    assert "with the dynamo exporter's graph" in error[0] and "--no-fp16" in error[0]
    assert not (tmp_path / "tiny.edge").exists()
    path = tmp_path / "tiny.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TinyClassifier().eval(), (torch.rand(1, 3, 32, 32),), str(path), input_names=["input"],
                          output_names=["logits"], dynamo=False)
    model = onnx.load(str(prepare(path, tmp_path / "prepared.onnx").path))
    messages = []
    with pytest.raises(Fp16GraphError, match="until every node computing in floating point is kept in FP32"):
        to_fp16(model, sample={"input": np.zeros((1, 3, 32, 32), np.float32)}, progress=messages.append)
    assert sum("keeping it in FP32" in m for m in messages) == 4  # one node at a time, until all four are
