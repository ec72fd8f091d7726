"""Deploys that cannot break the next start: versions count once a server loaded them, a start sets the others
aside, and version numbers are reserved under a per-model lock. Real tritonservers, real SIGKILLs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import tritonclient.grpc as grpcclient
from click.testing import CliRunner
from torch_models import Affine, export

from orinkit.cli.repo import main as edge_repo
from orinkit.core.errors import OrinkitError
from orinkit.repo.add import add_model
from orinkit.repo.check import check_repository
from orinkit.repo.deploy import deploy_version, load_versions
from orinkit.repo.errors import DeployBusyError
from orinkit.repo.journal import model_lock, quarantine_unproven, read_journal, record_loaded
from orinkit.repo.layout import version_folders
from orinkit.repo.options import ModelOptions
from orinkit.server.ports import free_ports
from orinkit.server.testing import start_on_free_ports

EDGE_REPO = str(Path(sys.executable).parent / "edge-repo")
X = np.arange(8, dtype=np.float32).reshape(2, 4)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("artifacts")
    made = {f"affine{s}": export(Affine(float(s)), torch.randn(1, 4), folder / f"affine{s}.onnx") for s in (1, 2, 3)}
    made["broken"] = _unloadable(made["affine2"], folder / "broken.onnx")
    return made


def _unloadable(source: Path, target: Path) -> Path:
    """A valid ONNX file with the model's inputs and outputs whose op no runtime implements: it passes every
    check made without a server, and fails when the server loads it, as a model built for a newer runtime does."""
    import onnx

    model = onnx.load(str(source))
    node = model.graph.node[-1]
    node.domain, node.op_type = "com.example.orinkit", "NoRuntimeHasThis"
    del node.attribute[:]
    model.opset_import.append(onnx.helper.make_opsetid("com.example.orinkit", 1))
    onnx.save(model, str(target))
    return target


@pytest.fixture
def repository(tmp_path, artifacts):
    repo = tmp_path / "models"
    add_model(repo, artifacts["affine1"], name="affine", runtime="python-onnxruntime")
    return repo


def _serve(repository, tmp_path, name="server"):
    """A server as edge-serve runs it: prepared first, its loaded versions recorded once ready."""
    from orinkit.repo.journal import prepare_start

    notes = prepare_start(repository)
    server = start_on_free_ports(repository, tmp_path / f"{name}.log", model_control_mode="explicit",
                                 load_models=("affine",))
    record_loaded(repository, server.command.http_url)
    return server, notes


def _scale(url):
    with grpcclient.InferenceServerClient(url) as client:
        tensor = grpcclient.InferInput("input", X.shape, "FP32")
        tensor.set_data_from_numpy(X)
        output = client.infer("affine", [tensor]).as_numpy("output")
    return float(np.round((output[0, 1] - 1.0) / X[0, 1], 3))


def test_a_start_proves_what_it_loaded(repository, tmp_path):
    assert read_journal(repository / "affine").proven == set()  # a new model: nothing loaded yet
    server, notes = _serve(repository, tmp_path)
    server.stop()
    # Stale shared-memory regions of servers that earlier tests killed are the machine's, not this repository's:
    # the start reports removing them, and nothing about this model.
    assert read_journal(repository / "affine").proven == {1}
    assert [n for n in notes if "shared-memory region" not in n] == []


@pytest.mark.parametrize("point", ["deploy.renamed", "deploy.loading"])
def test_a_deploy_killed_while_placing_or_loading_a_broken_version_never_fails_the_next_start(
        repository, artifacts, tmp_path, point):
    server, _ = _serve(repository, tmp_path)
    url = server.command.grpc_url
    env = dict(os.environ, ORINKIT_FAILPOINT=point)
    killed = subprocess.run([EDGE_REPO, "deploy", "affine", str(artifacts["broken"]), "--repo", str(repository),
                             "--server", url], env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    if point == "deploy.loading":
        from orinkit.server.health import repository_index, wait_until

        def failed():
            return any(e["name"] == "affine" and e.get("version") == "2" and e["state"] == "UNAVAILABLE"
                       for e in repository_index(server.command.http_url))

        assert wait_until(failed, timeout_s=30), "the server was loading version 2 when the deploy died"
    server.stop()
    assert sorted(version_folders(repository / "affine")) == [1, 2], "the broken version was left on disk"
    codes = {f.code for f in check_repository(repository)}
    assert "version-unproven" in codes, "check reports the version no server loaded"
    restarted, notes = _serve(repository, tmp_path, "restarted")
    try:
        assert _scale(restarted.command.grpc_url) == 1.0, "the old version serves"
        assert any("affine version 2 set aside as quarantined-2" in n for n in notes), notes
        assert sorted(version_folders(repository / "affine")) == [1]
        assert (repository / "affine" / "quarantined-2").is_dir()
        assert {f.code for f in check_repository(repository)} == {"version-quarantined"}
    finally:
        restarted.stop()


def test_a_version_placed_without_a_server_is_set_aside_then_put_back_by_load(repository, artifacts, tmp_path):
    first, _ = _serve(repository, tmp_path)
    first.stop()
    placed = deploy_version(repository, "affine", artifacts["affine2"])
    assert placed.version == 2 and 2 not in read_journal(repository / "affine").proven
    server, notes = _serve(repository, tmp_path, "second")
    try:
        assert _scale(server.command.grpc_url) == 1.0 and any("set aside" in n for n in notes)
        result = CliRunner().invoke(edge_repo, ["load", "affine", "--repo", str(repository), "--server",
                                                server.command.grpc_url])
        assert result.exit_code == 0, result.output
        assert "serving [2]; put back [2]" in result.output
        assert _scale(server.command.grpc_url) == 2.0
        assert read_journal(repository / "affine").proven == {1, 2}
    finally:
        server.stop()


def test_a_put_back_version_that_still_fails_is_set_aside_again(repository, artifacts, tmp_path):
    first, _ = _serve(repository, tmp_path)
    first.stop()
    deploy_version(repository, "affine", artifacts["broken"])
    server, _ = _serve(repository, tmp_path, "second")
    try:
        result = load_versions(repository, "affine", server=server.command.grpc_url)
        assert result.refused == (2,) and result.serving == (1,)
        assert _scale(server.command.grpc_url) == 1.0
        assert (repository / "affine" / "quarantined-2").is_dir()
        assert "failed to load again" in read_journal(repository / "affine").quarantined[2]
    finally:
        server.stop()


def test_a_load_with_no_server_to_ask_leaves_set_aside_versions_aside(repository, artifacts, tmp_path):
    first, _ = _serve(repository, tmp_path)
    first.stop()
    deploy_version(repository, "affine", artifacts["broken"])
    server, _ = _serve(repository, tmp_path, "second")
    server.stop()
    assert (repository / "affine" / "quarantined-2").is_dir()
    (port,) = free_ports(1)
    with pytest.raises(OrinkitError) as caught:
        load_versions(repository, "affine", server=f"127.0.0.1:{port}")
    assert caught.value.exit_code == 6
    assert (repository / "affine" / "quarantined-2").is_dir(), "a version no server judged was put back"
    assert not (repository / "affine" / "2").exists()


def test_two_deploys_of_one_model_never_share_a_number(repository, artifacts):
    folder = repository / "affine"
    with model_lock(folder):  # another deploy holds the model
        busy = CliRunner().invoke(edge_repo, ["deploy", "affine", str(artifacts["affine2"]), "--repo",
                                              str(repository)])
    assert busy.exit_code == 5 and "another deploy of it is in progress" in busy.output
    assert sorted(version_folders(folder)) == [1]
    # Real processes racing: every success has a number of its own holding its own artifact.
    for _ in range(3):
        racers = [subprocess.Popen([EDGE_REPO, "deploy", "affine", str(artifacts[f"affine{s}"]), "--repo",
                                    str(repository)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for s in (2, 3)]
        outcomes = [(r.wait(timeout=120), r.stdout.read() + r.stderr.read()) for r in racers]
        for code, output in outcomes:
            assert code in (0, 5), output
        numbers = [int(o.split("version ")[1].split()[0]) for c, o in outcomes if c == 0]
        assert len(numbers) == len(set(numbers)) >= 1
    sizes = {v: (p / "model.onnx").read_bytes() for v, p in version_folders(folder).items()}
    assert len(sizes) == len(set(sizes))  # every version folder holds the artifact its own deploy placed


def test_a_model_orinkit_never_deployed_to_is_left_alone(tmp_path):
    repo = tmp_path / "models"
    (repo / "hand").mkdir(parents=True)
    for version in ("1", "2"):
        (repo / "hand" / version).mkdir()
    assert quarantine_unproven(repo) == []
    assert sorted(version_folders(repo / "hand")) == [1, 2]


def test_a_held_lock_names_its_holder(repository):
    folder = repository / "affine"
    with model_lock(folder):
        with pytest.raises(DeployBusyError, match=rf"pid {os.getpid()}"):
            with model_lock(folder):
                pass
    with model_lock(folder):  # released on exit
        pass


def test_affine_scales_are_told_apart(artifacts, tmp_path):
    repo = tmp_path / "models"
    add_model(repo, artifacts["affine3"], name="affine", runtime="python-onnxruntime", options=ModelOptions())
    server = start_on_free_ports(repo, tmp_path / "log")
    try:
        assert _scale(server.command.grpc_url) == 3.0
    finally:
        server.stop()
