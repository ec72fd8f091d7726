"""The gate's inputs for every input a model can declare: 0-d tensors beside batched ones, integers, booleans,
strings, the 16-bit floats; from random draws or from --data. Models are exported by torch.onnx.export directly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import onnxruntime
import pytest
import torch
from click.testing import CliRunner
from torch_models import VoiceActivity

from orinkit.cli.convert import main
from orinkit.convert.errors import ShapeSpecError
from orinkit.convert.samples import load_samples, parse_ranges, random_samples


def _export(module, args, path, names, outputs, axes=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), input_names=names, output_names=outputs,
                          dynamic_axes=axes, dynamo=False)
    return path


@pytest.fixture(scope="module")
def vad_onnx(tmp_path_factory):
    """The voice-activity model as its authors export it: the sample rate is a 0-d int64 input."""
    return _export(VoiceActivity(), (torch.randn(1, 512), torch.tensor(16000)),
                   tmp_path_factory.mktemp("vad") / "vad.onnx", ["audio", "sr"], ["prob"],
                   {"audio": {0: "batch"}, "prob": {0: "batch"}})


class LooksUp(torch.nn.Module):
    """An int64 index into a 10-row table, a bool mask and float features."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Embedding(10, 8)

    def forward(self, features, mask, index):
        return self.table(index) + torch.where(mask, features, torch.zeros_like(features))


@pytest.fixture(scope="module")
def lookup_onnx(tmp_path_factory):
    return _export(LooksUp(), (torch.randn(2, 8), torch.ones(2, 8, dtype=torch.bool), torch.tensor([1, 2])),
                   tmp_path_factory.mktemp("lookup") / "lookup.onnx", ["features", "mask", "index"], ["out"])


def test_a_scalar_int64_input_beside_the_audio_converts(vad_onnx, tmp_path):
    result = CliRunner().invoke(main, [str(vad_onnx), "-o", str(tmp_path / "vad.edge")])
    assert result.exit_code == 0, result.output
    assert "sr scalar" in result.output.splitlines()[0]
    assert "input 'sr' (int64, scalar) gets random integers 0..1" in result.output
    report = json.loads((tmp_path / "vad.edge" / "report.json").read_text())
    assert report["gate"]["passed"] and report["profiles"]["sr"]["opt"] == []
    audio = np.random.default_rng(0).uniform(-0.5, 0.5, (3, 512)).astype(np.float32)
    feeds = {"audio": audio, "sr": np.array(16000, dtype=np.int64)}
    fp16 = onnxruntime.InferenceSession(str(tmp_path / "vad.edge" / "model.fp16.onnx")).run(None, feeds)[0]
    fp32 = onnxruntime.InferenceSession(str(tmp_path / "vad.edge" / "model.onnx")).run(None, feeds)[0]
    assert fp16.shape == (3, 1) and np.abs(fp16 - fp32).max() < 0.01


def test_the_sample_rate_from_input_range_or_data(vad_onnx, tmp_path):
    ranged = CliRunner().invoke(main, [str(vad_onnx), "--input-range", "audio:-0.5,0.5;sr:16000,16000", "-o",
                                       str(tmp_path / "ranged.edge")])
    assert ranged.exit_code == 0, ranged.output
    assert "gets random integers" not in ranged.output
    data = tmp_path / "speech.npz"
    rng = np.random.default_rng(1)
    # Three samples: audio [3, 1, 512] with a leading sample axis, and the 0-d sample rate three times.
    np.savez(data, audio=rng.uniform(-0.5, 0.5, (3, 1, 512)).astype(np.float32),
             sr=np.array([16000, 8000, 16000], dtype=np.int64))
    given = CliRunner().invoke(main, [str(vad_onnx), "--data", str(data), "-o", str(tmp_path / "data.edge")])
    assert given.exit_code == 0, given.output
    assert json.loads((tmp_path / "data.edge" / "report.json").read_text())["gate"]["samples"] == 3
    samples = load_samples(data, {"audio": (np.float32, (1, 512)), "sr": (np.int64, ())})
    assert [type(s["sr"]) for s in samples] == [np.ndarray] * 3 and samples[1]["sr"].shape == ()
    assert int(samples[1]["sr"]) == 8000


def test_random_samples_for_every_rank_and_element_type():
    inputs = {"scalar": (np.dtype(np.int64), ()), "flag": (np.dtype(bool), (2, 3)),
              "small": (np.dtype(np.uint8), (4,)), "half": (np.dtype(np.float16), (1, 2)),
              "double": (np.dtype(np.float64), ()), "words": (np.dtype(object), (2,)),
              "brain": (np.dtype(ml_dtypes.bfloat16), (3,)), "nibble": (np.dtype(ml_dtypes.int4), (5,)),
              "pair": (np.dtype(np.complex64), (2,))}
    samples = random_samples(inputs, 4, ranges={"small": (250, 300)})
    for sample in samples:
        for name, (dtype, shape) in inputs.items():
            value = sample[name]
            assert isinstance(value, np.ndarray) and value.dtype == dtype and value.shape == shape, name
        assert set(np.unique(sample["small"])) <= {250, 251, 252, 253, 254, 255}  # clipped to uint8
        assert all(isinstance(w, str) and w for w in sample["words"])
    drawn = np.stack([s["i"] for s in random_samples({"i": (np.dtype(np.int32), ())}, 64)])
    assert set(drawn.tolist()) == {0, 1}  # both ends of the default 0..1: an index stays within any table
    with pytest.raises(ShapeSpecError, match="holds no uint8 value"):
        random_samples({"u": (np.dtype(np.uint8), (2,))}, 1, ranges={"u": (-5.0, -1.0)})
    assert parse_ranges("sr:16000,16000") == {"sr": (16000.0, 16000.0)}
    with pytest.raises(ShapeSpecError, match="LOW <= HIGH"):
        parse_ranges("sr:1e,2")


def test_bool_and_index_inputs_reach_onnxruntime(lookup_onnx, tmp_path):
    result = CliRunner().invoke(main, [str(lookup_onnx), "-o", str(tmp_path / "lookup.edge")])
    assert result.exit_code == 0, result.output
    assert "input 'mask' (bool, 2x8) gets random booleans" in result.output
    assert "input 'index' (int64, 2) gets random integers 0..1" in result.output


def test_onnxruntime_refusing_the_samples_is_one_typed_line(lookup_onnx, tmp_path):
    """Indices past the model's 10-row table: onnxruntime raises in the gate's child process, and the tool says so
    in one line (exit 4) instead of ending in the child's traceback."""
    data = tmp_path / "bad.npz"
    np.savez(data, features=np.zeros((2, 8), np.float32), mask=np.ones((2, 8), bool),
             index=np.array([3, 50], np.int64))
    result = subprocess.run([sys.executable, "-m", "orinkit.cli.convert", str(lookup_onnx), "--data", str(data),
                             "-o", str(tmp_path / "out.edge")], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 4, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "onnxruntime could not run the FP32 model on the gate's samples" in errors[0]
    assert "--input-range" in errors[0] and "--no-fp16" in errors[0]
    assert not (tmp_path / "out.edge").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".ses")] == ["bad.npz"]
