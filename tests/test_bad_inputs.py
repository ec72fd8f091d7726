"""Every command with each kind of bad input a user gives: missing, empty, truncated, of the wrong type or shape,
naming something unknown. Each must end with its documented exit code, say what is wrong in one line, print no
traceback and leave nothing behind. The commands run as users run them: the installed entry points."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import DATA
from torch_models import TinyClassifier, export

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Good and bad inputs, made once."""
    folder = tmp_path_factory.mktemp("inputs")
    good = export(TinyClassifier(), torch.randn(1, 3, 32, 32), folder / "tiny.onnx")
    made = {"good": good, "missing": folder / "missing.onnx", "dir": folder / "a_folder"}
    made["dir"].mkdir()
    (folder / "empty.onnx").write_bytes(b"")
    made["empty"] = folder / "empty.onnx"
    (folder / "truncated.onnx").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    made["truncated"] = folder / "truncated.onnx"
    (folder / "notes.onnx").write_text("these are notes, not a model\n")
    made["text"] = folder / "notes.onnx"
    script = folder / "affine.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(5, 2)), str(script))
    made["torchscript"] = script
    (folder / "empty.yaml").write_text("")
    made["empty_yaml"] = folder / "empty.yaml"
    (folder / "broken.yaml").write_text("name: [unclosed\n")
    made["broken_yaml"] = folder / "broken.yaml"
    (folder / "unknown_step.yaml").write_text("name: flow\nsteps:\n  - model: nosuch\n    inputs: {x: X}\n"
                                              "    outputs: {y: Y}\noutputs: [Y]\n")
    made["unknown_step"] = folder / "unknown_step.yaml"
    (folder / "frames.npz").write_bytes(b"not an npz")
    made["bad_npz"] = folder / "frames.npz"
    repo = folder / "models"
    subprocess.run([str(BIN / "edge-repo"), "add", str(good), "--repo", str(repo), "--create", "--name", "tiny",
                    "--runtime", "python-onnxruntime"], check=True, capture_output=True)
    made["repo"] = repo
    made["data_repo"] = DATA / "repository"
    return made


# (command, arguments with {placeholders}, exit code, words the one-line error must hold)
CASES = [
    # edge-convert
    ("edge-convert", ["{missing}"], 4, "does not exist"),
    ("edge-convert", ["{empty}"], 4, "holds no ONNX graph"),
    ("edge-convert", ["{truncated}"], 4, "is not an ONNX model"),
    ("edge-convert", ["{text}"], 4, "not an ONNX model"),
    ("edge-convert", ["{dir}"], 4, "does not exist"),
    ("edge-convert", ["{good}", "--shapes", "input:1x3"], 4, "does not fit its declared shape"),
    ("edge-convert", ["{good}", "--shapes", "nope:1x3x32x32"], 4, "which the model does not have as inputs"),
    ("edge-convert", ["{good}", "--metric", "nosuch"], 4, "unknown --metric"),
    ("edge-convert", ["{good}", "--data", "{missing}"], 4, "is not a readable .npz file"),
    ("edge-convert", ["{good}", "--data", "{bad_npz}"], 4, "is not a readable .npz file"),
    ("edge-convert", ["{good}", "--benchmark"], 4, "the TensorRT engine"),
    ("edge-convert", ["{good}", "--dla-core", "0"], 4, "the TensorRT engine"),
    ("edge-convert", ["--torch", "no_such_module:build", "--input", "x:1x3"], 4, "cannot load no_such_module"),
    ("edge-convert", ["--verify-engine", "{missing}"], 4, "does not exist"),
    ("edge-convert", ["{good}", "--repo", "modles", "--name", "tiny"], 4, "pass --create"),
    ("edge-convert", ["{good}", "--create"], 4, "--create applies to --repo only"),
    ("edge-convert", ["{good}", "--repo", "{repo}", "--name", "my model"], 4, "cannot be a folder Triton loads"),
    ("edge-convert", ["{good}", "--keep-fp32", "/fc/Gem"], 4, "did you mean /fc/Gemm?"),
    ("edge-convert", ["{good}", "--metric", "topk:5@logitz"], 4, "did you mean output?"),
    # edge-repo add
    ("edge-repo", ["add", "{missing}", "--repo", "{repo}"], 4, "does not exist"),
    ("edge-repo", ["add", "{truncated}", "--repo", "{repo}", "--name", "t"], 4, "is not a readable ONNX model"),
    ("edge-repo", ["add", "{text}", "--repo", "{repo}", "--name", "t"], 4, "is not a readable ONNX model"),
    ("edge-repo", ["add", "{empty}", "--repo", "{repo}", "--name", "t"], 4, "is not a readable ONNX model"),
    ("edge-repo", ["add", "{dir}", "--repo", "{repo}"], 4, "is a folder"),
    ("edge-repo", ["add", "{good}", "--repo", "{repo}/../typo"], 4, "does not exist"),
    ("edge-repo", ["add", "{good}", "--repo", "{repo}", "--name", "x", "--input", "input:FP32:3x32x32"], 4,
     "come from the file itself"),
    ("edge-repo", ["add", "{torchscript}", "--repo", "{repo}", "--input", "input__0:FP32:3x4"], 4,
     "fails on zeros of the declared input shapes"),
    ("edge-repo", ["add", "{torchscript}", "--repo", "{repo}", "--input", "x:FP32:5"], 4,
     "binds tensors by names ending in __<index>"),
    ("edge-repo", ["add", "{good}", "--repo", "{repo}"], 4, "already exists"),
    # edge-repo deploy, check, ensemble, steps, server calls
    ("edge-repo", ["deploy", "tiny", "{truncated}", "--repo", "{repo}"], 4, "is not a readable ONNX model"),
    ("edge-repo", ["deploy", "tiny", "{missing}", "--repo", "{repo}"], 4, "does not exist"),
    ("edge-repo", ["deploy", "nosuch", "{good}", "--repo", "{repo}"], 4, "is not in"),
    ("edge-repo", ["rollback", "nosuch", "--repo", "{repo}"], 4, "is not in"),
    ("edge-repo", ["check", "{missing}"], 4, "does not exist"),
    ("edge-repo", ["check", "{good}"], 4, "does not exist"),
    ("edge-repo", ["ensemble", "{missing}", "--repo", "{repo}"], 4, "cannot read ensemble spec"),
    ("edge-repo", ["ensemble", "{empty_yaml}", "--repo", "{repo}"], 4, "must be a mapping"),
    ("edge-repo", ["ensemble", "{broken_yaml}", "--repo", "{repo}"], 4, "is not valid YAML"),
    ("edge-repo", ["ensemble", "{unknown_step}", "--repo", "{repo}"], 4, "no such model in the repository"),
    ("edge-repo", ["step", "bls", "{unknown_step}", "--repo", "{repo}"], 4, "no such model in the repository"),
    ("edge-repo", ["step", "topk", "--repo", "{repo}", "--name", "top", "--labels", "{missing}"], 4,
     "does not exist"),
    ("edge-repo", ["step", "image-preprocess", "--repo", "{repo}", "--name", "pre", "--mean", "1,2"], 4,
     "needs 3 values"),
    ("edge-repo", ["status", "--server", "127.0.0.1:1"], 6, "failed"),
    ("edge-repo", ["load", "tiny", "--repo", "{repo}", "--server", "127.0.0.1:1"], 6, "failed"),
    ("edge-repo", ["unload", "tiny", "--server", "127.0.0.1:1"], 6, "failed"),
    # edge-serve
    ("edge-serve", ["run", "{missing}"], 4, "does not exist or is not a folder"),
    ("edge-serve", ["run", "{good}"], 4, "does not exist or is not a folder"),
    ("edge-serve", ["run", "{data_repo}", "--model-control-mode", "explicit", "--load-model", "nosuch"], 4,
     "--load-model names nosuch"),
    ("edge-serve", ["run", "{data_repo}", "--server-arg", "--http-port=9"], 4, "set by orinkit"),
    ("edge-serve", ["run", "{data_repo}", "--grpc-tls-key", "{good}"], 4, "needs both"),
    ("edge-serve", ["install", "{data_repo}", "--load-model", "nosuch", "--dry-run"], 4, "--load-model names nosuch"),
    ("edge-serve", ["prepare", "--repository", "{missing}"], 4, "does not exist"),
    ("edge-serve", ["check-plans", "--repository", "{missing}"], 4, "does not exist"),
    # edge-bench
    ("edge-bench", ["--url", "127.0.0.1:1", "--model", "tiny", "--duration", "1"], 6, "cannot reach the server"),
    ("edge-bench", ["--model", "tiny", "--data", "{missing}"], 4, "is not a readable .npz file"),
    ("edge-bench", ["--model", "tiny", "--image", "{missing}"], 4, "cannot read --image"),
    ("edge-bench", ["--model", "tiny", "--concurrency", "0"], 4, "is not a list of positive numbers"),
]


@pytest.mark.parametrize("command, args, code, words", CASES, ids=[f"{c[0]} {' '.join(c[1][:2])}" for c in CASES])
def test_bad_input_is_one_line_its_exit_code_and_nothing_left(files, tmp_path, command, args, code, words):
    argv = [str(BIN / command), *(a.format(**files) for a in args)]
    before = sorted(p.name for p in files["repo"].iterdir())
    result = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    output = result.stdout + result.stderr
    assert result.returncode == code, output
    assert "Traceback" not in output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and words in errors[0], output
    assert sorted(p.name for p in files["repo"].iterdir()) == before, "the repository is as it was"
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".ses")] == [], "nothing left behind"


@pytest.mark.parametrize("args", [["status"], ["index", "--json"], ["unload", "tiny"]], ids=" ".join)
def test_server_commands_default_to_localhost_8001_and_say_so(args, tmp_path):
    """Without --url the commands that only talk to a server try the local one, and when nothing listens
    there the one error line names the address tried and the option that picks another."""
    import socket

    try:
        socket.create_connection(("localhost", 8001), timeout=1).close()
        pytest.skip("something listens on localhost:8001 here")
    except OSError:
        pass
    result = subprocess.run([str(BIN / "edge-repo"), *args], capture_output=True, text=True, cwd=tmp_path,
                            timeout=120)
    assert result.returncode == 6, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "localhost:8001" in errors[0] and "--url" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
