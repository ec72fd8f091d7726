"""What a newcomer meets running edge-convert: options checked against the model before the slow stages, progress
that reads well on a terminal and in a log, words that say what happened, and --repo that agrees with edge-repo.
The model is exported by torch.onnx.export directly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch_models import TinyClassifier

from orinkit.cli.convert import main
from orinkit.convert import onnx_prep
from orinkit.convert.pipeline import ConvertOptions, convert_onnx
from orinkit.core.optional import current_folder_importable


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TinyClassifier().eval(), (torch.rand(1, 3, 32, 32),), str(path), input_names=["input"],
                          output_names=["logits"], dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}},
                          dynamo=False)
    return path


def _left(folder):
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".ses"))


@pytest.mark.parametrize("args, words", [
    (["--metric", "topk:5@logitz"], "names output 'logitz', which the model does not have; did you mean logits?"),
    (["--keep-fp32", "/fc/Gem"], "--keep-fp32 names /fc/Gem, which the model has no node called; did you mean "
                                 "/fc/Gemm?"),
    (["--input-range", "inptu:0,1"], "--input-range names inptu, which the model does not have as inputs; did you "
                                     "mean input?"),
])
def test_options_naming_parts_of_the_model_are_refused_before_onnxsim(tiny, tmp_path, args, words):
    result = CliRunner().invoke(main, [str(tiny), *args, "-o", str(tmp_path / "out.edge")])
    assert result.exit_code == 4, result.output
    assert words in result.output and "Traceback" not in result.output
    assert "simplifying it with onnxsim" not in result.output  # refused right after loading the model
    assert _left(tmp_path) == []


def test_data_of_the_wrong_shape_is_refused_first_and_shown_as_given(tiny, tmp_path):
    data = tmp_path / "frames.npz"
    np.savez(data, input=np.zeros((2, 3, 16, 16), np.float32))
    result = CliRunner().invoke(main, [str(tiny), "--data", str(data), "-o", str(tmp_path / "out.edge")])
    assert result.exit_code == 4, result.output
    assert "has shape [2, 3, 16, 16], but the input is [1, 3, 32, 32]" in result.output
    assert "simplifying it with onnxsim" not in result.output
    assert _left(tmp_path) == ["frames.npz"]


def test_a_slow_stage_in_a_log_says_something_every_interval_and_no_more(tiny, tmp_path, monkeypatch):
    """Where the output is a log (not a terminal: as under pytest), a quiet stage repeats its status as a line of
    its own every LOG_INTERVAL_S (30 s; shortened here so the test stays short), not every few seconds."""
    from orinkit.core import progress as progress_module

    real = onnx_prep.simplify

    def slow(model, folder):  # onnxsim on a large model: many seconds without a word of its own
        time.sleep(7)
        return real(model, folder)

    monkeypatch.setattr(onnx_prep, "simplify", slow)
    monkeypatch.setattr(progress_module, "LOG_INTERVAL_S", 3.0)
    lines = []
    convert_onnx(tiny, tmp_path / "out.edge", ConvertOptions(samples=2),
                 progress=lambda message: lines.append((time.monotonic(), message)))
    beats = [(t, m) for t, m in lines if m.startswith("  ... validate and simplify the ONNX model (")]
    assert beats, lines
    # One line per interval, never one per second (the beat looks twice a second).
    assert all(later[0] - earlier[0] >= 2.9 for earlier, later in zip(beats, beats[1:])), beats


def test_on_a_terminal_the_status_is_one_live_line_erased_before_the_next_message():
    import io

    from orinkit.core.progress import Heartbeat

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen, said = Terminal(), []
    with Heartbeat(said.append, status="calibrating", live=screen, interval=0.2) as beat:
        time.sleep(1.3)
        beat.say("calibrated")
        time.sleep(0.6)
    written = screen.getvalue()
    assert said == ["calibrated"], "the status never becomes a line of its own on a terminal"
    assert written.count("\r\x1b[K  ... calibrating (") >= 3, written
    assert written.endswith("\r\x1b[K"), "the live line is erased when the work ends"


def test_the_words_say_what_happened(tiny, tmp_path):
    plain = CliRunner().invoke(main, [str(tiny), "--no-fp16", "-o", str(tmp_path / "fp32.edge")])
    assert plain.exit_code == 0, plain.output
    assert "the artifacts are the FP32 ONNX (--no-fp16: no FP16 graph)" in plain.output
    assert "gated FP16" not in plain.output
    assert sorted(p.name for p in (tmp_path / "fp32.edge").iterdir()) == ["model.onnx", "report.json"]
    four = CliRunner().invoke(main, [str(tiny), "--max-batch", "4", "-o", str(tmp_path / "four.edge")])
    assert four.exit_code == 0, four.output
    first = four.output.splitlines()[0]
    assert first.endswith("max 4x3x32x32 (dynamic batch: 1..4, as --max-batch 4 asked)"), first
    assert "by default" not in first
    usage = CliRunner().invoke(main, ["--help"])
    assert "./NAME.edge in the current folder" in " ".join(usage.output.split())
    assert "beside the current folder" not in usage.output


def test_the_default_output_folder_is_in_the_current_folder(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [str(tiny), "--no-fp16"])
    assert result.exit_code == 0, result.output
    assert "wrote tiny.edge: model.onnx, report.json" in result.output
    assert (tmp_path / "tiny.edge" / "model.onnx").is_file()


def test_a_repository_that_does_not_exist_needs_create_as_with_edge_repo(tiny, tmp_path):
    from orinkit.cli.repo import main as edge_repo

    typo = tmp_path / "modles"
    result = CliRunner().invoke(main, [str(tiny), "-o", str(tmp_path / "tiny.edge"), "--repo", str(typo), "--name",
                                       "tiny"])
    assert result.exit_code == 4, result.output
    assert f"the repository {typo} does not exist; check the path, or pass --create" in result.output
    assert "[1/" not in result.output  # refused before any stage
    assert _left(tmp_path) == []
    repo_says = CliRunner().invoke(edge_repo, ["add", str(tiny), "--repo", str(typo), "--name", "tiny"])
    assert repo_says.exit_code == 4 and "pass --create" in repo_says.output and _left(tmp_path) == []
    created = CliRunner().invoke(main, [str(tiny), "-o", str(tmp_path / "tiny.edge"), "--repo", str(typo),
                                        "--create", "--name", "tiny", "--runtime", "python-onnxruntime"])
    assert created.exit_code == 0, created.output
    assert (typo / "tiny" / "config.pbtxt").is_file() and (typo / "tiny" / "1" / "model.onnx").is_file()
    alone = CliRunner().invoke(main, [str(tiny), "-o", str(tmp_path / "again.edge"), "--create"])
    assert alone.exit_code == 4 and "--create applies to --repo only" in alone.output
    report = json.loads((tmp_path / "tiny.edge" / "report.json").read_text())
    assert report["gate"]["passed"]


def _package(folder: Path) -> None:
    """mypkg in ``folder``: models.build() imports a sibling module while it runs."""
    package = folder / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text("import torch\n\n\ndef head():\n    return torch.nn.Linear(4, 2)\n")
    (package / "models.py").write_text("import torch\n\n\ndef build():\n    from mypkg.layers import head\n\n"
                                       "    return torch.nn.Sequential(torch.nn.ReLU(), head()).eval()\n")


def test_torch_imports_the_package_from_the_current_folder_as_python_m_does(tmp_path):
    """edge-convert --torch mypkg.models:build from the folder that holds mypkg, with no PYTHONPATH set."""
    _package(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    command = [str(Path(sys.executable).parent / "edge-convert"), "--torch", "mypkg.models:build", "--input",
               "x:1x4", "--no-fp16"]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    # Named for the factory's module (the factory itself is a verb: build), or for --name.
    assert "wrote models.edge" in result.stdout and (tmp_path / "models.edge" / "model.onnx").is_file()
    away = subprocess.run(command, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert away.returncode == 4, away.stdout + away.stderr
    assert "cannot load mypkg.models:build" in away.stderr and "run from the folder that holds the package" in \
        away.stderr and "Traceback" not in away.stderr
    assert list(elsewhere.iterdir()) == []
    usage = CliRunner().invoke(main, ["--help"])
    assert "imported as python -m imports it: from the current folder too" in " ".join(usage.output.split())


def test_the_current_folder_is_on_sys_path_for_the_import_only(tmp_path, monkeypatch):
    (tmp_path / "orinkit_cwd_probe.py").write_text("VALUE = 7\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "orinkit_cwd_probe", raising=False)
    before = list(sys.path)
    with current_folder_importable():
        import orinkit_cwd_probe

        assert sys.path[0] == str(tmp_path.resolve())
    assert orinkit_cwd_probe.VALUE == 7 and sys.path == before
    monkeypatch.syspath_prepend(str(tmp_path))
    held = list(sys.path)
    with current_folder_importable():
        assert sys.path == held, "a folder already on sys.path is not added again"
    sys.modules.pop("orinkit_cwd_probe", None)
