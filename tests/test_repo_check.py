"""edge-repo check: a clean repository passes; each planted mistake gives its own finding."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from repo_fixtures import build_everything

from orinkit.cli.repo import main
from orinkit.repo.check import check_repository
from orinkit.repo.pbtxt import read_config, write_config


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    return build_everything(tmp_path_factory.mktemp("template") / "models", work)


@pytest.fixture
def repo(template, tmp_path):
    return shutil.copytree(template, tmp_path / "models")


def edit(repo, model, change):
    path = repo / model / "config.pbtxt"
    config = read_config(path)
    change(config)
    write_config(path, config)


def _classify(change):
    return lambda repo: edit(repo, "classify", change)


def test_a_generated_repository_has_no_findings(repo):
    assert check_repository(repo, python=None) == []
    assert sorted(p.name for p in repo.iterdir()) == [
        "add_sub", "affine", "classify", "det", "lane", "net", "pre", "top"]


def _rename_input(config, new):
    config.input[0].name = new


def _step(config, index):
    return config.ensemble_scheduling.step[index]


def _reverse_flow(config):
    _step(config, 0).input_map["IMAGE"] = "ids"


PLANTS = {
    # Without a config the server infers the backend from the model file; with neither it cannot load the model.
    "config-missing": ("det", lambda r: [(r / "det" / f).unlink() for f in ("config.pbtxt", "1/model.onnx")]),
    "config-invalid": ("net", lambda r: (r / "net" / "config.pbtxt").write_text("name: \"net\"\nbackend: python\n")),
    "name-mismatch": ("net", lambda r: edit(r, "net", lambda c: setattr(c, "name", "network"))),
    "no-version": ("classify", lambda r: (r / "classify" / "1").rmdir()),
    "non-numeric-version": ("net", lambda r: (r / "net" / "v2").mkdir()),
    "policy-version-missing": ("net", lambda r: edit(r, "net", lambda c: c.version_policy.specific.versions.append(3))),
    "model-file-missing": ("net", lambda r: (r / "net" / "1" / "model.onnx").unlink()),
    "unknown-runtime": ("add_sub", lambda r: (edit(r, "add_sub", lambda c: c.ClearField("backend")),
                                              (r / "add_sub" / "1" / "model.py").unlink())),
    "torchscript-naming": ("affine", lambda r: edit(r, "affine", lambda c: _rename_input(c, "x"))),
    "batch-exceeds-profile": ("lane", lambda r: edit(r, "lane", lambda c: setattr(c, "max_batch_size", 8))),
    "no-manifest": ("lane", lambda r: (r / "lane" / "1" / "model.plan.manifest.json").unlink()),
    "artifact-unreadable": ("det", lambda r: (r / "det" / "1" / "model.onnx").write_bytes(b"\x00garbage")),
    "io-name": ("det", lambda r: edit(r, "det", lambda c: _rename_input(c, "image"))),
    "io-missing": ("det", lambda r: edit(r, "det", lambda c: c.ClearField("input"))),
    "io-dtype": ("det", lambda r: edit(r, "det", lambda c: setattr(c.input[0], "data_type", 2))),  # TYPE_UINT8
    "io-dims": ("det", lambda r: edit(r, "det", lambda c: c.input[0].dims.__setitem__(1, 64))),
    "dims-include-batch": ("det", lambda r: edit(r, "det", lambda c: c.input[0].dims.insert(0, -1))),
    "batch-axis-fixed": ("lane", None),  # planted below: a manifest whose batch axis is fixed
    "ensemble-unknown-model": ("classify", _classify(lambda c: setattr(_step(c, 1), "model_name", "resnet"))),
    "ensemble-unknown-tensor": ("classify", _classify(lambda c: _step(c, 2).output_map.__setitem__("PROBS", "probs"))),
    "ensemble-unmapped-input": ("classify", _classify(lambda c: _step(c, 1).input_map.clear())),
    "ensemble-dtype": ("classify", _classify(lambda c: _step(c, 2).input_map.__setitem__("LOGITS", "size"))),
    "ensemble-shape": ("classify", lambda r: edit(r, "top", lambda c: c.input[0].dims.__setitem__(0, 1000))),
    "ensemble-duplicate-tensor": ("classify",
                                  _classify(lambda c: _step(c, 2).output_map.__setitem__("SCORES", "logits"))),
    "ensemble-cycle": ("classify", _classify(_reverse_flow)),
    "ensemble-unproduced-output": ("classify", _classify(lambda c: c.output[0].__setattr__("name", "probabilities"))),
    "ensemble-batch": ("classify", _classify(lambda c: setattr(c, "max_batch_size", 64))),
    "ensemble-io": ("classify", _classify(lambda c: c.input[0].dims.__setitem__(0, 3))),
}


def _fixed_batch_manifest(repo):
    path = repo / "lane" / "1" / "model.plan.manifest.json"
    data = json.loads(path.read_text())
    data["inputs"][0]["shape"][0] = 1
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("code", sorted(PLANTS))
def test_each_planted_mistake_gives_its_finding(repo, code):
    model, plant = PLANTS[code]
    (plant or _fixed_batch_manifest)(repo)
    # io-missing: a server that completes configs fills inputs the config leaves out; a strict one does not.
    findings = check_repository(repo, auto_complete=code != "io-missing")
    assert [(f.code, f.model) for f in findings] == [(code, model)], findings
    finding = findings[0]
    assert finding.problem and finding.fix and finding.file
    assert finding.severity == ("warning" if code in ("non-numeric-version", "no-manifest") else "error")


def test_a_model_the_server_completes_is_accepted_with_notes(repo):
    """No config.pbtxt beside model.onnx: Triton infers onnxruntime and the backend completes the rest."""
    (repo / "det" / "config.pbtxt").unlink()
    edit(repo, "add_sub", lambda c: c.ClearField("backend"))  # model.py tells the backend
    findings = check_repository(repo)
    assert all(f.severity == "info" for f in findings), findings
    assert {(f.code, f.model) for f in findings} == {("config-completed", "det"), ("io-completed", "det")}
    strict = check_repository(repo, auto_complete=False)
    assert [(f.severity, f.code, f.model) for f in strict] == [("error", "config-missing", "det")]


def test_backend_missing_from_the_server_backend_directory(repo, tmp_path):
    backends = tmp_path / "backends"
    (backends / "python").mkdir(parents=True)
    findings = check_repository(repo, backend_directory=backends)
    assert sorted((f.code, f.model) for f in findings) == [
        ("backend-missing", "affine"), ("backend-missing", "det"), ("backend-missing", "lane")]
    assert "'tensorrt' is not in" in next(f.problem for f in findings if f.model == "lane")


def test_python_imports_resolve_for_the_stub_interpreter(repo, tmp_path):
    import sys

    model = repo / "add_sub" / "1" / "model.py"
    assert check_repository(repo, python=sys.executable) == []
    model.write_text("import numpy\nimport cv3_that_does_not_exist\nfrom . import helpers\n" + model.read_text())
    findings = check_repository(repo, python=sys.executable)
    assert [(f.code, f.model) for f in findings] == [("python-import", "add_sub")]
    assert "cv3_that_does_not_exist" in findings[0].problem
    model.write_text("def broken(:\n")
    assert [f.code for f in check_repository(repo, python=sys.executable)] == ["python-syntax"]


def test_cli_check_exit_codes_and_json(repo):
    runner = CliRunner()
    clean = runner.invoke(main, ["check", str(repo), "--portable"])  # Orin models: this server lacks their backends
    assert clean.exit_code == 0, clean.output
    here = runner.invoke(main, ["check", str(repo)])
    assert here.exit_code == 4 and "the backend 'tensorrt' is not in" in here.output
    (repo / "net" / "1" / "model.onnx").unlink()
    (repo / "net" / "v2").mkdir()
    text = runner.invoke(main, ["check", "--repo", str(repo), "--portable"])
    assert text.exit_code == 4
    assert "error   net: net/1: version 1 lacks model.onnx" in text.output
    assert "1 error(s), 1 warning(s)" in text.output
    as_json = runner.invoke(main, ["check", "--repo", str(repo), "--json", "--portable"])
    assert as_json.exit_code == 4
    rows = json.loads(as_json.output[: as_json.output.rindex("]") + 1])
    assert {r["code"] for r in rows} == {"model-file-missing", "non-numeric-version"}
    assert set(rows[0]) == {"severity", "code", "model", "file", "problem", "fix"}


# A hand-written ensemble whose map key is misspelt, as a user types it into config.pbtxt.
STEP_CONFIG = """name: "flatten"
backend: "python"
max_batch_size: 8
input [ { name: "flatten_input", data_type: TYPE_FP32, dims: [ 2, 2 ] },
        { name: "scale", data_type: TYPE_FP32, dims: [ 1 ], optional: true } ]
output [ { name: "flatten_output", data_type: TYPE_FP32, dims: [ 4 ] } ]
"""
STEP_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("flatten_output", pb_utils.get_input_tensor_by_name(
            r, "flatten_input").as_numpy().reshape(-1, 4))]) for r in requests]
"""
PIPELINE = """name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [ { name: "IMAGE", data_type: TYPE_FP32, dims: [ 2, 2 ] } ]
output [ { name: "FLAT", data_type: TYPE_FP32, dims: [ 4 ] } ]
ensemble_scheduling {
  step [ { model_name: "flatten", model_version: -1,
           input_map { key: "%s" value: "IMAGE" }, output_map { key: "%s" value: "FLAT" } } ]
}
"""


def _typed_ensemble(tmp_path, input_key="flatten_input", output_key="flatten_output"):
    repository = tmp_path / "models"
    (repository / "flatten" / "1").mkdir(parents=True)
    (repository / "pipeline" / "1").mkdir(parents=True)
    (repository / "flatten" / "config.pbtxt").write_text(STEP_CONFIG)
    (repository / "flatten" / "1" / "model.py").write_text(STEP_MODEL)
    (repository / "pipeline" / "config.pbtxt").write_text(PIPELINE % (input_key, output_key))
    return repository


@pytest.mark.parametrize("keys, named, meant", [
    (("flatten_inputs", "flatten_output"), "no input 'flatten_inputs'", "did you mean 'flatten_input'?"),
    (("flatten_input", "flatten_outputs"), "no output 'flatten_outputs'", "did you mean 'flatten_output'?"),
])
def test_a_misspelt_ensemble_map_key_is_named_with_the_closest_real_name(tmp_path, keys, named, meant):
    repository = _typed_ensemble(tmp_path, *keys)
    findings = check_repository(repository)
    assert [(f.severity, f.code, f.model) for f in findings] == [("error", "ensemble-unknown-tensor", "pipeline")]
    assert named in findings[0].problem and meant in findings[0].problem, findings[0]
    assert "not mapped" not in findings[0].problem
    result = CliRunner().invoke(main, ["check", str(repository)])
    assert result.exit_code == 4 and named in result.output and meant in result.output, result.output


def test_a_map_key_like_no_real_name_lists_the_real_ones(tmp_path):
    findings = check_repository(_typed_ensemble(tmp_path, "pixels"))
    assert [f.code for f in findings] == ["ensemble-unknown-tensor"]
    assert "no input 'pixels'" in findings[0].problem and "did you mean" not in findings[0].problem
    assert "flatten_input, scale" in findings[0].fix


def test_a_steps_optional_input_may_stay_unmapped(tmp_path):
    # Triton allows it (the corpus case ensemble_optional_input proves it on the server); a required one may not.
    repository = _typed_ensemble(tmp_path)
    assert check_repository(repository) == []
    (repository / "flatten" / "config.pbtxt").write_text(STEP_CONFIG.replace(", optional: true", ""))
    findings = check_repository(repository)
    assert [f.code for f in findings] == ["ensemble-unmapped-input"] and "scale" in findings[0].problem
