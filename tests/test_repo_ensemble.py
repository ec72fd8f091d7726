"""Ensemble specs (YAML and Python) and the steps' commands; the flow's errors name step and tensor."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from repo_fixtures import CLASSIFY, build_servable
from tritonclient.grpc import model_config_pb2 as mc

from orinkit.cli.repo import main
from orinkit.repo.ensemble import EnsembleSpec, add_ensemble, build_ensemble_config, repository_configs
from orinkit.repo.errors import EnsembleError
from orinkit.repo.pbtxt import read_config

YAML = """
name: classify_yaml
steps:
  - model: pre
    inputs: {IMAGE: image}
    outputs: {TENSOR: pixels}
  - model: net
    inputs: {input: pixels}
    outputs: {logits: logits}
  - model: top
    inputs: {LOGITS: logits}
    outputs: {SCORES: scores, CLASS_IDS: ids}
outputs: [ids, scores]
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_servable(tmp_path_factory.mktemp("repo") / "models", tmp_path_factory.mktemp("work"))


def test_yaml_and_python_specs_give_the_same_flow(models):
    from_yaml = EnsembleSpec.from_yaml(YAML)
    assert from_yaml.steps[1].inputs == {"input": "pixels"}
    config = build_ensemble_config(from_yaml, repository_configs(models))
    assert config.platform == "ensemble" and config.max_batch_size == 8
    assert [(t.name, t.data_type, list(t.dims)) for t in config.input] == [("image", mc.TYPE_STRING, [1])]
    assert [(t.name, list(t.dims)) for t in config.output] == [("ids", [3]), ("scores", [3])]
    generated = read_config(models / "classify" / "config.pbtxt")
    assert [s.model_name for s in generated.ensemble_scheduling.step] == ["pre", "net", "top"]
    assert dict(generated.ensemble_scheduling.step[0].output_map) == {"TENSOR": "pixels", "ORIGINAL_SIZE": "size"}


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda s: s["steps"][1].update(model="resnet"), "step 2 (model 'resnet'): no such model"),
        (lambda s: s["steps"][1]["inputs"].update(input="size"),
         "step 2 (model 'net'): input 'input' takes FP32, but tensor 'size' is INT32"),
        (lambda s: s["steps"][2]["inputs"].update(LOGITS="pixels"),
         "step 3 (model 'top'): input 'LOGITS' takes dims [10], but tensor 'pixels' has dims [3, 32, 32]"),
        (lambda s: s.update(outputs=["ids", "probabilities"]), "outputs probabilities, which no step produces"),
        (lambda s: s.update(max_batch_size=16), "max_batch_size 16 exceeds a step's (8)"),
        (lambda s: s["steps"][0]["inputs"].update(IMAGE="ids"), "has a cycle through step 1"),
    ],
)
def test_flows_that_do_not_line_up_are_refused_naming_step_and_tensor(models, change, message):
    import copy

    spec = copy.deepcopy(CLASSIFY)
    spec["name"] = "broken"
    change(spec)
    with pytest.raises(EnsembleError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]")):
        add_ensemble(models, spec)
    assert not (models / "broken").exists()


def test_spec_problems_are_named():
    with pytest.raises(EnsembleError, match="unknown keys: step"):
        EnsembleSpec.from_dict({"name": "x", "step": [], "outputs": []})
    with pytest.raises(EnsembleError, match="incomplete"):
        EnsembleSpec.from_dict({"name": "x", "steps": [{"inputs": {}}], "outputs": []})
    with pytest.raises(EnsembleError, match="not valid YAML"):
        EnsembleSpec.from_yaml("name: [unclosed")


def test_cli_steps_and_ensemble(tmp_path, models):
    import shutil

    repo = shutil.copytree(models, tmp_path / "models")
    runner = CliRunner()
    pre = runner.invoke(main, ["step", "image-preprocess", "--repo", str(repo), "--name", "pre_bgr", "--width",
                               "640", "--height", "360", "--color-order", "BGR", "--scale", "0.00392156862745098",
                               "--dtype", "FP16"])
    assert pre.exit_code == 0, pre.output
    config = read_config(repo / "pre_bgr" / "config.pbtxt")
    assert config.parameters["color_order"].string_value == "BGR"
    assert list(config.output[0].dims) == [3, 360, 640] and config.output[0].data_type == mc.TYPE_FP16
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(f"class {i}" for i in range(10)))
    top = runner.invoke(main, ["step", "topk", "--repo", str(repo), "--name", "top_labels", "--k", "2",
                               "--num-classes", "10", "--labels", str(labels)])
    assert top.exit_code == 0, top.output
    assert (repo / "top_labels" / "1" / "labels.txt").read_text() == labels.read_text()
    assert [t.name for t in read_config(repo / "top_labels" / "config.pbtxt").output] == [
        "SCORES", "CLASS_IDS", "LABELS"]
    spec = tmp_path / "flow.yaml"
    spec.write_text(YAML)
    made = runner.invoke(main, ["ensemble", str(spec), "--repo", str(repo)])
    assert made.exit_code == 0, made.output
    assert (repo / "classify_yaml" / "1").is_dir()
    bad = runner.invoke(main, ["step", "topk", "--repo", str(repo), "--name", "t2", "--k", "20",
                               "--num-classes", "10"])
    assert bad.exit_code == 4 and "k 20 exceeds 10 classes" in bad.output
