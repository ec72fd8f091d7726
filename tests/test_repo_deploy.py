"""Versioned deploys and rollbacks against a real tritonserver in explicit model control mode."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from click.testing import CliRunner
from conftest import DATA
from torch_models import Affine, export

from orinkit.cli.repo import main
from orinkit.repo.add import add_model
from orinkit.repo.check import check_repository
from orinkit.repo.deploy import deploy_version, rollback
from orinkit.repo.errors import DeployError, DeployLoadError
from orinkit.repo.layout import version_folders
from orinkit.repo.options import ModelOptions
from orinkit.repo.signature import TensorSpec
from orinkit.server.testing import start_on_free_ports

EDGE_REPO = str(Path(sys.executable).parent / "edge-repo")
X = np.arange(8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("artifacts")
    made = {f"affine{scale}": export(Affine(float(scale)), torch.randn(1, 4), folder / f"affine{scale}.onnx")
            for scale in (1, 2, 3)}
    made["wide"] = export(torch.nn.Linear(8, 4), torch.randn(1, 8), folder / "wide.onnx")
    broken = folder / "broken.py"
    broken.write_text((DATA / "broken_repository" / "crashes_on_load" / "1" / "model.py").read_text())
    made["broken"] = broken
    return made


@pytest.fixture
def repository(tmp_path, artifacts):
    repo = tmp_path / "models"
    add_model(repo, artifacts["affine1"], name="affine", runtime="python-onnxruntime",
              options=ModelOptions(dynamic_batching=True))
    add_model(repo, DATA / "repository" / "add_sub" / "1" / "model.py", name="add_sub",
              inputs=[TensorSpec.parse("INPUT0:FP32:4"), TensorSpec.parse("INPUT1:FP32:4")],
              outputs=[TensorSpec.parse("OUTPUT0:FP32:4"), TensorSpec.parse("OUTPUT1:FP32:4")],
              options=ModelOptions(max_batch_size=8))
    return repo


@pytest.fixture
def server(repository, tmp_path):
    process = start_on_free_ports(repository, tmp_path / "server.log", model_control_mode="explicit",
                                  load_models=("affine", "add_sub"))
    yield process
    process.stop()


def _affine(url):
    with grpcclient.InferenceServerClient(url) as client:
        tensor = grpcclient.InferInput("input", X.shape, "FP32")
        tensor.set_data_from_numpy(X)
        return client.infer("affine", [tensor]).as_numpy("output")


def _scale_of(output):
    return float(np.round((output[0, 1] - 1.0) / X[0, 1], 3))


def test_deploy_loads_the_new_version_with_no_failed_request(server, repository, artifacts):
    url = server.command.grpc_url
    stop, seen, failures = threading.Event(), [], []

    def hammer():
        with grpcclient.InferenceServerClient(url) as client:
            tensor = grpcclient.InferInput("input", X.shape, "FP32")
            tensor.set_data_from_numpy(X)
            while not stop.is_set():
                try:
                    seen.append(_scale_of(client.infer("affine", [tensor]).as_numpy("output")))
                except Exception as exc:  # every failure counts against the deploy
                    failures.append(exc)

    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        messages = []
        result = deploy_version(repository, "affine", artifacts["affine2"], server=url, progress=messages.append)
        for _ in range(20):  # keep asking a moment after the switch
            _affine(url)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert failures == []
    assert result.version == 2 and result.serving == (2,)
    assert seen[0] == 1.0 and seen[-1] == 2.0 and set(seen) == {1.0, 2.0}
    assert len(seen) > 20
    assert any("READY" in m for m in messages)
    assert check_repository(repository) == []


def test_rollback_serves_the_previous_version_and_numbers_never_repeat(server, repository, artifacts):
    url = server.command.grpc_url
    deploy_version(repository, "affine", artifacts["affine2"], server=url)
    assert _scale_of(_affine(url)) == 2.0
    result = rollback(repository, "affine", server=url)
    assert (result.rolled_back, result.now_latest, result.serving) == (2, 1, (1,))
    assert _scale_of(_affine(url)) == 1.0
    assert (repository / "affine" / "rolled-back-2").is_dir()
    assert check_repository(repository) == []
    again = deploy_version(repository, "affine", artifacts["affine3"], server=url)
    assert again.version == 3 and _scale_of(_affine(url)) == 3.0
    with pytest.raises(DeployError, match="nothing to roll back to"):
        rollback(repository, "add_sub", server=url)


def test_an_artifact_that_does_not_fit_is_refused_before_it_is_placed(server, repository, artifacts):
    with pytest.raises(DeployError, match="does not fit model 'affine'.*dims"):
        deploy_version(repository, "affine", artifacts["wide"], server=server.command.grpc_url)
    assert sorted(p.name for p in (repository / "affine").iterdir()) == [
        ".orinkit-deploy.lock", ".orinkit-versions.json", "1", "config.pbtxt"]
    assert _scale_of(_affine(server.command.grpc_url)) == 1.0


def test_a_version_that_fails_to_load_is_withdrawn_and_the_old_one_keeps_serving(server, repository, artifacts):
    url = server.command.grpc_url
    with pytest.raises(DeployLoadError, match="did not load, so it was withdrawn") as info:
        deploy_version(repository, "add_sub", artifacts["broken"], server=url, timeout_s=60)
    assert "weights file is corrupt" in str(info.value)
    assert sorted(version_folders(repository / "add_sub")) == [1]
    assert [p.name for p in (repository / "add_sub").iterdir()
            if p.name.startswith(".") and not p.name.startswith(".orinkit-")] == [], "no half-made version left"
    with grpcclient.InferenceServerClient(url) as client:
        tensors = [grpcclient.InferInput(n, X.shape, "FP32") for n in ("INPUT0", "INPUT1")]
        for tensor in tensors:
            tensor.set_data_from_numpy(X)
        np.testing.assert_array_equal(client.infer("add_sub", tensors).as_numpy("OUTPUT0"), 2 * X)


@pytest.mark.parametrize("point", ["deploy.staged", "deploy.renamed"])
def test_a_deploy_killed_midway_leaves_a_loadable_repository(server, repository, artifacts, point, tmp_path):
    url = server.command.grpc_url
    env = dict(os.environ, ORINKIT_FAILPOINT=point)
    killed = subprocess.run([EDGE_REPO, "deploy", "affine", str(artifacts["affine2"]), "--repo", str(repository),
                             "--server", url], env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert _scale_of(_affine(url)) == 1.0, "the serving version is untouched"
    assert [f for f in check_repository(repository) if f.severity == "error"] == []
    expected_latest = 2 if point == "deploy.renamed" else 1
    assert max(version_folders(repository / "affine")) == expected_latest
    copy = shutil.copytree(repository, tmp_path / "restarted")
    fresh = start_on_free_ports(copy, tmp_path / "fresh.log")
    try:
        assert _scale_of(_affine(fresh.command.grpc_url)) == float(expected_latest)
    finally:
        fresh.stop()


def test_cli_deploy_rollback_and_status(server, repository, artifacts):
    url = server.command.grpc_url
    runner = CliRunner()
    deployed = runner.invoke(main, ["deploy", "affine", str(artifacts["affine2"]), "--repo", str(repository),
                                    "--server", url])
    assert deployed.exit_code == 0, deployed.output
    assert "deployed affine version 2; serving [2]" in deployed.output
    status = runner.invoke(main, ["status", "--server", url])
    assert status.exit_code == 0
    assert any(line.split()[:3] == ["affine", "2", "READY"] for line in status.output.splitlines())
    back = runner.invoke(main, ["rollback", "affine", "--repo", str(repository), "--server", url])
    assert back.exit_code == 0 and "rolled affine back from version 2 to 1" in back.output
    missing = runner.invoke(main, ["deploy", "nope", str(artifacts["affine2"]), "--repo", str(repository)])
    assert missing.exit_code == 4 and "edge-repo add" in missing.output
    down = runner.invoke(main, ["status", "--server", "127.0.0.1:1"])
    assert down.exit_code == 6 and "failed" in down.output
