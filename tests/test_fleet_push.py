"""edge-repo push and orinkit.fleet.push / rings against moto's S3 server: immutable versions, manifests that
match the files, half-finished pushes that stay invisible, gates checked against the config, desired states."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA

from orinkit.cli.repo import main as edge_repo
from orinkit.fleet.errors import StaleWriteError, UnknownVersionError, VersionExistsError
from orinkit.fleet.layout import GATE, MANIFEST, VersionManifest
from orinkit.fleet.push import GateFile, list_versions, push_repository, read_manifest
from orinkit.fleet.rings import read_desired_state, write_desired_state
from orinkit.repo.add import add_model
from orinkit.repo.errors import RepoError
from orinkit.repo.journal import record_proven
from orinkit.repo.signature import TensorSpec

ADD_SUB = DATA / "repository" / "add_sub" / "1" / "model.py"

# moto_server (session), s3_env and bucket (per test): see tests/fleet_fixtures.py.
pytest_plugins = ["fleet_fixtures"]


def _add_sub(repository, name="add_sub", version=1):
    add_model(repository, ADD_SUB, name=name, version=version,
              inputs=[TensorSpec.parse("INPUT0:FP32:4"), TensorSpec.parse("INPUT1:FP32:4")],
              outputs=[TensorSpec.parse("OUTPUT0:FP32:4"), TensorSpec.parse("OUTPUT1:FP32:4")])
    return repository / name


@pytest.fixture
def repository(tmp_path):
    """add_sub (version 1 proven, version 2 never loaded, labels beside the config) and a second model."""
    repo = tmp_path / "models"
    model = _add_sub(repo)
    (model / "labels.txt").write_text("a\nb\n")
    (model / "2").mkdir()
    (model / "2" / "model.py").write_bytes(ADD_SUB.read_bytes() + b"\n# version 2\n")
    (model / "2" / "helpers").mkdir()
    (model / "2" / "helpers" / "util.py").write_text("X = 1\n")
    record_proven(model, [1])
    other = _add_sub(repo, name="other")
    record_proven(other, [1])
    return repo


def _gate_file(path, **arrays):
    np.savez(path, **{k.replace("__", ":"): v for k, v in arrays.items()})
    return path


def test_push_writes_every_file_with_its_sha256_and_the_manifest_last(repository, bucket):
    lines = []
    manifests = push_repository(repository, bucket, models=["add_sub"], unproven=True, progress=lines.append)
    assert [(m.model, m.version) for m in manifests] == [("add_sub", 1), ("add_sub", 2)]
    manifest = read_manifest(bucket, "add_sub", 2)
    paths = {f.path for f in manifest.files}
    assert paths == {"model/config.pbtxt", "model/labels.txt", "version/model.py", "version/helpers/util.py"}
    for entry in manifest.files:  # recomputed from what the bucket holds
        data = bucket.read(f"models/add_sub/2/{entry.path}")
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry.size, entry.sha256)
    assert not any(".orinkit" in p for p in paths)  # the journal and the lock stay local
    assert manifest.pushed_by and manifest.pushed_at > 0 and manifest.gate is None
    assert list_versions(bucket, "add_sub") == [1, 2] and list_versions(bucket, "other") == []
    assert any(line.startswith("pushing add_sub version 2") for line in lines)


def test_only_proven_versions_are_pushed_by_default(repository, bucket):
    lines = []
    manifests = push_repository(repository, bucket, progress=lines.append)
    assert sorted((m.model, m.version) for m in manifests) == [("add_sub", 1), ("other", 1)]
    assert any("skipping version 2" in line and "--unproven" in line for line in lines)
    with pytest.raises(RepoError, match="never loaded") as info:
        push_repository(repository, bucket, models=["add_sub"], versions=[2], progress=lines.append)
    assert "--unproven" in info.value.hint


def test_pushing_the_same_files_again_is_a_no_op_and_other_files_are_refused(repository, bucket):
    push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lambda _: None)
    before = bucket.requests
    again = push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lambda _: None)
    assert again[0].version == 1 and bucket.requests - before == 1  # one read of the manifest, no write
    (repository / "add_sub" / "1" / "model.py").write_text("# changed in place\n")
    with pytest.raises(VersionExistsError) as info:
        push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lambda _: None)
    assert "add_sub version 1" in str(info.value) and "version/model.py" in str(info.value)
    assert "edge-repo deploy" in info.value.hint and info.value.exit_code == 4


def test_edge_repo_push_refuses_a_changed_version_with_exit_4(repository, bucket, s3_env):
    runner = CliRunner()
    args = ["push", str(repository), str(bucket.url), "--model", "add_sub", "--version", "1"]
    first = runner.invoke(edge_repo, args)
    assert first.exit_code == 0, first.output
    assert "add_sub version 1: 3 files" in first.output
    (repository / "add_sub" / "labels.txt").write_text("other labels\n")
    second = runner.invoke(edge_repo, args)
    assert second.exit_code == 4, second.output
    assert "never overwritten" in second.output and "Traceback" not in second.output


def test_edge_repo_push_names_an_unreachable_endpoint(repository, s3_env):
    result = CliRunner().invoke(edge_repo, ["push", str(repository), "s3://fleet-bucket/p", "--unproven",
                                            "--endpoint-url", "http://127.0.0.1:9"])
    assert result.exit_code == 6, result.output
    assert "http://127.0.0.1:9" in result.output and "Traceback" not in result.output


def test_a_half_finished_push_is_invisible_and_can_be_pushed_again(repository, bucket, monkeypatch):
    real_write = type(bucket).write

    def dies_at_the_manifest(self, key, data, **kwargs):
        if key.endswith(MANIFEST):
            raise KeyboardInterrupt  # the pusher killed after its files went up
        return real_write(self, key, data, **kwargs)

    monkeypatch.setattr(type(bucket), "write", dies_at_the_manifest)
    with pytest.raises(KeyboardInterrupt):
        push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lambda _: None)
    assert bucket.exists("models/add_sub/1/version/model.py")
    assert list_versions(bucket, "add_sub") == [] and read_manifest(bucket, "add_sub", 1) is None
    monkeypatch.setattr(type(bucket), "write", real_write)
    bucket.write("models/add_sub/1/version/stale.bin", b"from a push that had another file")
    (manifest,) = push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lambda _: None)
    assert list_versions(bucket, "add_sub") == [1]
    assert not bucket.exists("models/add_sub/1/version/stale.bin")  # leftovers no manifest lists are removed
    assert VersionManifest.from_json(bucket.read(f"models/add_sub/1/{MANIFEST}")) == manifest


def test_a_gate_is_stored_and_described_in_the_manifest(repository, bucket, tmp_path):
    x = np.arange(4, dtype=np.float32)
    golden = _gate_file(tmp_path / "golden.npz", input__INPUT0=x, input__INPUT1=x, output__OUTPUT0=2 * x)
    (manifest,) = push_repository(repository, bucket, models=["add_sub"], versions=[1],
                                  gates={"add_sub": GateFile(golden, rtol=1e-2, atol=1e-3)}, progress=lambda _: None)
    assert manifest.gate == {"rtol": 1e-2, "atol": 1e-3, "inputs": ["INPUT0", "INPUT1"], "outputs": ["OUTPUT0"]}
    assert GATE in {f.path for f in manifest.files}
    assert bucket.read(f"models/add_sub/1/{GATE}") == golden.read_bytes()


@pytest.mark.parametrize(("arrays", "words"), [
    ({"input__INPUT0": 1, "output__OUTPUT0": 1}, "inputs missing: INPUT1"),
    ({"input__INPUT0": 1, "input__INPUT1": 1, "input__EXTRA": 1, "output__OUTPUT0": 1}, "does not have: EXTRA"),
    ({"input__INPUT0": 1, "input__INPUT1": 1, "output__SCORES": 1}, "does not have: SCORES"),
    ({"input__INPUT0": 1, "input__INPUT1": 1}, "no output:NAME"),
    ({"input__INPUT0": 1, "input__INPUT1": 1, "output__OUTPUT0": 1, "expected": 1}, "not named input:NAME"),
])
def test_a_gate_whose_names_do_not_fit_the_config_is_refused(repository, bucket, tmp_path, arrays, words):
    golden = _gate_file(tmp_path / "bad.npz", **{k: np.zeros(4, np.float32) for k in arrays})
    with pytest.raises(RepoError, match="does not fit model add_sub") as info:
        push_repository(repository, bucket, models=["add_sub"], versions=[1], gates={"add_sub": golden},
                        progress=lambda _: None)
    assert words in str(info.value)
    assert bucket.keys("models") == []  # refused before anything went up


def test_desired_state_generations_increase_and_unknown_versions_are_refused(repository, bucket):
    push_repository(repository, bucket, unproven=True, progress=lambda _: None)
    assert read_desired_state(bucket, "canary") == (None, None)
    first = write_desired_state(bucket, "canary", {"add_sub": 1}, note="first")
    second = write_desired_state(bucket, "canary", {"add_sub": 2, "other": 1}, note="lane 2")
    assert (first.generation, second.generation) == (1, 2)
    state, etag = read_desired_state(bucket, "canary")
    assert state == second and etag
    assert json.loads(bucket.read("rings/canary.json"))["models"] == {"add_sub": 2, "other": 1}
    with pytest.raises(UnknownVersionError, match="other version 7") as info:
        write_desired_state(bucket, "canary", {"other": 7})
    assert info.value.exit_code == 4 and "edge-repo push" in info.value.hint
    assert read_desired_state(bucket, "canary")[0].generation == 2


def test_desired_state_write_is_a_compare_and_swap(repository, bucket, monkeypatch):
    push_repository(repository, bucket, unproven=True, progress=lambda _: None)
    write_desired_state(bucket, "prod", {"add_sub": 1})
    import orinkit.fleet.rings as rings

    stale = read_desired_state(bucket, "prod")
    write_desired_state(bucket, "prod", {"add_sub": 2})  # another rollout, after ours read the ring
    with monkeypatch.context() as patched, pytest.raises(StaleWriteError):
        patched.setattr(rings, "read_desired_state", lambda b, r: stale)
        write_desired_state(bucket, "prod", {"other": 1})
    assert read_desired_state(bucket, "prod")[0].models == {"add_sub": 2}


LITTER = ["1/__pycache__/model.cpython-311.pyc", "1/helpers/__pycache__/util.cpython-311.pyc", "1/.DS_Store",
          "1/.model.py.swp", "1/model.py~", "__pycache__/labels.cpython-311.pyc"]


def test_build_and_editor_litter_stays_out_of_a_pushed_version(repository, bucket):
    model = repository / "add_sub"
    (model / "1" / "helpers").mkdir()
    (model / "1" / "helpers" / "util.py").write_text("X = 1\n")
    for relative in LITTER:
        (model / relative).parent.mkdir(parents=True, exist_ok=True)
        (model / relative).write_bytes(b"\x00litter of " + relative.encode())
    lines = []
    (manifest,) = push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lines.append)
    assert {f.path for f in manifest.files} == {"model/config.pbtxt", "model/labels.txt", "version/model.py",
                                                "version/helpers/util.py"}
    assert sorted(bucket.keys("models/add_sub/1")) == sorted(
        f"models/add_sub/1/{p}" for p in ("model/config.pbtxt", "model/labels.txt", "version/model.py",
                                          "version/helpers/util.py", MANIFEST))
    assert any("leaving out 6 build or editor file(s)" in line for line in lines), lines


def test_a_version_pushed_before_and_after_triton_compiled_its_model_py_is_the_same(repository, bucket, tmp_path):
    """Triton's Python backend writes __pycache__ into the version folder at the first load: the version pushed
    before that load and after it is one version (the second push is a no-op, not a refusal)."""
    from orinkit.repo.server_api import RepositoryAPI
    from orinkit.server.testing import start_on_free_ports

    version = repository / "add_sub" / "2"  # the newest: the one Triton loads
    assert not (version / "__pycache__").exists()
    push = dict(models=["add_sub"], versions=[2], unproven=True)
    (before,) = push_repository(repository, bucket, **push, progress=lambda _: None)
    server = start_on_free_ports(repository, tmp_path / "server.log", model_control_mode="explicit")
    try:
        with RepositoryAPI(server.command.grpc_url) as api:
            api.load("add_sub", 120)
    finally:
        server.stop()
    assert list((version / "__pycache__").glob("model.*.pyc")), "the server compiled model.py beside it"
    lines, requests = [], bucket.requests
    (after,) = push_repository(repository, bucket, **push, progress=lines.append)
    assert after == before and bucket.requests - requests == 1, "one read of the manifest, nothing written"
    assert any("in the bucket already, with the same files" in line for line in lines)

    # The other way round, into a second bucket: pushed with __pycache__ present first, then without it.
    from fleet_fixtures import create_bucket

    from orinkit.fleet.bucket import Bucket

    other = Bucket(f"s3://{create_bucket(bucket.endpoint)}/fleet", timeout_s=5.0)
    (first,) = push_repository(repository, other, **push, progress=lambda _: None)
    shutil.rmtree(version / "__pycache__")
    (second,) = push_repository(repository, other, **push, progress=lambda _: None)
    assert first == second and first.files == before.files


def test_a_version_pushed_with_its_litter_by_an_older_push_is_still_the_same_version(repository, bucket,
                                                                                     monkeypatch):
    import orinkit.fleet.push as push_module

    pyc = repository / "add_sub" / "1" / "__pycache__" / "model.cpython-311.pyc"
    pyc.parent.mkdir()
    pyc.write_bytes(b"\x00compiled")
    with monkeypatch.context() as older:  # as orinkit pushed before it left litter out
        older.setattr(push_module, "is_litter", lambda path: False)
        (old,) = push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lambda _: None)
    assert "version/__pycache__/model.cpython-311.pyc" in {f.path for f in old.files}
    pyc.unlink()
    (again,) = push_repository(repository, bucket, models=["add_sub"], versions=[1], progress=lambda _: None)
    assert again == old, "a no-op: the version in the bucket is never rewritten"
