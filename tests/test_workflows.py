"""What the tutorials' workflows need from the commands: a start that names every broken model, a check before it,
explicit model control from the command line, a benchmark that tells failure from speed, and multi-model builds
placed whole or not at all. Real tritonservers throughout."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA
from PIL import Image

from orinkit.cli.repo import main as edge_repo
from orinkit.lanes.model import build_lane_model
from orinkit.repo.errors import ModelExistsError
from orinkit.repo.steps import ImagePreprocess, add_step
from orinkit.server.testing import start_on_free_ports

BIN = Path(sys.executable).parent


def _broken_twice(tmp_path) -> Path:
    repo = tmp_path / "models"
    for name in ("first_broken", "second_broken"):
        shutil.copytree(DATA / "broken_repository" / "crashes_on_load", repo / name)
        config = repo / name / "config.pbtxt"
        config.write_text(config.read_text().replace('"crashes_on_load"', f'"{name}"'))
    shutil.copytree(DATA / "repository" / "add_sub", repo / "add_sub")
    return repo


def test_a_failed_start_names_every_model_that_failed(tmp_path):
    repo = _broken_twice(tmp_path)
    result = subprocess.run([str(BIN / "edge-serve"), "run", str(repo), "--no-check", "--http-port", "18400",
                             "--grpc-port", "18401", "--metrics-port", "18402", "--log-file", str(tmp_path / "log")],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 6, result.stderr
    error = next(line for line in result.stderr.splitlines() if line.startswith("Error:"))
    assert "2 model(s) failed to load" in error and "first_broken" in error and "second_broken" in error


def test_run_checks_the_repository_first_and_lists_every_refusal(tmp_path):
    repo = shutil.copytree(DATA / "repository", tmp_path / "models")
    (repo / "add_sub" / "1" / "model.py").write_text("def broken(:\n")
    (repo / "add_sub_twice" / "config.pbtxt").write_text(
        (repo / "add_sub_twice" / "config.pbtxt").read_text().replace('platform: "ensemble"', 'backend: "nosuch"'))
    result = subprocess.run([str(BIN / "edge-serve"), "run", str(repo)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 4, result.stderr
    assert "python-syntax" not in result.stderr  # findings print as sentences
    assert "model.py does not parse" in result.stderr and "backend 'nosuch'" in result.stderr
    assert "2 model(s) would fail to load: add_sub, add_sub_twice" in result.stderr
    assert "Traceback" not in result.stderr


def test_load_unload_and_index_from_the_command_line(tmp_path):
    repo = shutil.copytree(DATA / "repository", tmp_path / "models")
    server = start_on_free_ports(repo, tmp_path / "log", model_control_mode="explicit", load_models=("add_sub",))
    url = server.command.grpc_url
    runner = CliRunner()
    try:
        index = runner.invoke(edge_repo, ["index", "--server", url])
        assert index.exit_code == 0, index.output
        rows = {line.split()[0]: line for line in index.output.splitlines()}
        assert "READY" in rows["add_sub"] and "NOT LOADED" in rows["add_sub_twice"]
        loaded = runner.invoke(edge_repo, ["load", "add_sub_twice", "--repo", str(repo), "--server", url])
        assert loaded.exit_code == 0 and "add_sub_twice: serving [1]" in loaded.output, loaded.output
        unloaded = runner.invoke(edge_repo, ["unload", "add_sub_twice", "--server", url])
        assert unloaded.exit_code == 0, unloaded.output
        after = runner.invoke(edge_repo, ["index", "--server", url])
        assert any(line.startswith("add_sub_twice") and "READY" not in line for line in after.output.splitlines())
    finally:
        server.stop()


def _jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 80, 40)).save(buffer, "JPEG")
    return buffer.getvalue()


def test_edge_bench_on_image_bytes_measures_and_fails_loudly(tmp_path):
    repo = tmp_path / "models"
    add_step(repo, ImagePreprocess(width=32, height=32), name="pre", max_batch_size=4)
    server = start_on_free_ports(repo, tmp_path / "log")
    try:
        (tmp_path / "frame.jpg").write_bytes(_jpeg())
        (tmp_path / "notes.jpg").write_text("not an image")
        base = [str(BIN / "edge-bench"), "--url", server.command.grpc_url, "--model", "pre", "--concurrency", "1",
                "--requests", "20"]
        refused = subprocess.run(base, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 4 and "random bytes would only measure failures" in refused.stderr
        good = subprocess.run([*base, "--image", str(tmp_path / "frame.jpg"), "--json"], capture_output=True,
                              text=True, timeout=120)
        assert good.returncode == 0, good.stderr
        import json

        level = json.loads(good.stdout)["levels"][0]
        assert level["orinkit"]["errors"] == 0 and level["orinkit"]["requests"] == 20
        bad = subprocess.run([*base, "--image", str(tmp_path / "notes.jpg"), "--json"], capture_output=True,
                             text=True, timeout=120)
        assert bad.returncode == 6 and "every request to 'pre' failed" in bad.stderr
        assert "not an image Pillow can decode" in bad.stderr and "Traceback" not in bad.stderr
        report = json.loads(bad.stdout)
        assert report["levels"][0]["orinkit"]["p50_ms"] is None and "NaN" not in bad.stdout
    finally:
        server.stop()


def test_the_lane_repository_is_placed_whole_or_not_at_all(tmp_path):
    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.repository import build_lane_repository

    onnx_path = export_lane_onnx(build_lane_model(random_weights=True), tmp_path / "laneatt.onnx", dynamic_batch=True)
    repo = tmp_path / "models"
    add_step(repo, ImagePreprocess(), name="lane_postprocess")  # a name the lane set needs is taken
    with pytest.raises(ModelExistsError, match="lane_postprocess"):
        build_lane_repository(repo, onnx_path, runtime="python-onnxruntime")
    assert sorted(p.name for p in repo.iterdir()) == ["lane_postprocess"], "none of the lane models was placed"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    shutil.rmtree(repo / "lane_postprocess")
    placed = build_lane_repository(repo, onnx_path, runtime="python-onnxruntime")
    assert sorted(p.name for p in repo.iterdir()) == ["lane_detection", "lane_model", "lane_postprocess",
                                                      "lane_preprocess"]
    assert placed["model"].path == repo / "lane_model"
    np.testing.assert_equal(placed["ensemble"], repo / "lane_detection")
