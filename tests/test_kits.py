"""Task kits (``orinkit.core.kits``): the installed kits are found through their entry points, each recognizes its
own served models from the config Triton serves (real repositories, built by orinkit from real ONNX files), a
broken kit is left out while the others load, and video's ``adapter_for`` goes through them.

Signatures are read as the Client and the page read them: the config.pbtxt orinkit wrote, as Triton's config JSON
(protobuf's JSON form with the proto field names), into ``ModelInfo.from_config``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orinkit.client.model import ModelInfo
from orinkit.core import kits as kits_module
from orinkit.core.errors import EXIT_BAD_INPUT
from orinkit.core.kits import KitError, TaskKit, kit_for, kit_named, kits
from orinkit.repo.pbtxt import read_config

ROOT = Path(__file__).resolve().parent.parent
SCENES_DETECTOR = ROOT / "detect" / "weights" / "scenes_yolo.onnx"


def _info(model_folder: Path) -> ModelInfo:
    from google.protobuf import json_format

    config = json_format.MessageToDict(read_config(model_folder / "config.pbtxt"), preserving_proto_field_name=True)
    return ModelInfo.from_config(config, "1")


@pytest.fixture(scope="module")
def lane_info(tmp_path_factory) -> ModelInfo:
    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.model import build_lane_model
    from orinkit.lanes.repository import ENSEMBLE, build_lane_repository

    work = tmp_path_factory.mktemp("kits-lanes")
    onnx_path = export_lane_onnx(build_lane_model("lite", random_weights=True), work / "lane.onnx",
                                 dynamic_batch=True)
    build_lane_repository(work / "models", onnx_path, runtime="python-onnxruntime")
    return _info(work / "models" / ENSEMBLE)


@pytest.fixture(scope="module")
def detection_info(tmp_path_factory) -> ModelInfo:
    from orinkit.detect.repository import build_detection_repository

    repository = tmp_path_factory.mktemp("kits-detect") / "models"
    build_detection_repository(repository, SCENES_DETECTOR, name="scenes", runtime="python-onnxruntime")
    return _info(repository / "scenes")


@pytest.fixture(scope="module")
def classifier_info(tmp_path_factory) -> ModelInfo:
    """A 10-class classifier taking BGR pixels, UINT8 [64, 64, 3] (what the generic video adapter streams)."""
    import torch
    from torch import nn
    from torch_models import export

    from orinkit.repo import add_model

    class PixelClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                      nn.Linear(8, 10), nn.Softmax(dim=1))

        def forward(self, pixels):
            return self.body(pixels.permute(0, 3, 1, 2).float() / 255.0)

    work = tmp_path_factory.mktemp("kits-classifier")
    torch.manual_seed(0)
    path = export(PixelClassifier(), torch.zeros(1, 64, 64, 3, dtype=torch.uint8), work / "classifier.onnx",
                  input_name="pixels", output_name="probabilities")
    add_model(work / "models", path, name="classifier", runtime="python-onnxruntime")
    return _info(work / "models" / "classifier")


@pytest.fixture
def fresh_kits():
    """kits() loads once per process: cleared around a test that changes what is installed."""
    kits.cache_clear()
    yield
    kits.cache_clear()


def test_the_installed_kits_are_lanes_and_detect():
    found = {kit.name: kit for kit in kits()}
    assert {"lanes", "detect"} <= set(found), f"installed kits: {sorted(found)} (a stale orinkit.egg-info?)"
    assert all(isinstance(kit, TaskKit) for kit in found.values())
    assert type(found["lanes"]).__module__ == "orinkit.lanes.kit"
    assert type(found["detect"]).__module__ == "orinkit.detect.kit"
    assert kit_named("lanes") is found["lanes"] and kit_named("detect") is found["detect"]
    assert found["lanes"].metric == "orinkit.lanes.metrics:lane_agreement"


def test_a_lane_ensemble_is_the_lane_kit(lane_info):
    assert {t.name for t in lane_info.outputs} == {"lanes", "scores", "count"}
    kit = kit_for(lane_info)
    assert kit is kit_named("lanes")
    assert kit.describe(lane_info) == "lane detector"
    assert not kit_named("detect").recognizes(lane_info)


def test_a_detection_ensemble_is_the_detect_kit(detection_info):
    assert {t.name for t in detection_info.outputs} >= {"boxes", "scores", "classes", "count"}
    kit = kit_for(detection_info)
    assert kit is kit_named("detect")
    assert kit.describe(detection_info) == "detector, 3 classes"  # disc, box, triangle: the config's names
    assert not kit_named("lanes").recognizes(detection_info)


def test_a_classifier_has_no_kit(classifier_info):
    assert [t.dtype for t in classifier_info.inputs] == ["UINT8"]
    assert tuple(classifier_info.outputs[0].dims) == (10,)
    for kit in kits():
        assert kit.recognizes(classifier_info) is False, kit.name  # asked directly: a crash is no "no"
    assert kit_for(classifier_info) is None


def test_video_gets_each_models_adapter_through_its_kit(lane_info, classifier_info):
    from orinkit.video.adapters import ImageAdapter, adapter_for
    from orinkit.video.errors import UnsupportedSourceError

    lanes = adapter_for(lane_info)
    assert type(lanes).__module__ == "orinkit.lanes.video" and type(lanes).__name__ == "LaneAdapter"
    assert lanes.size == (640, 360) and lanes.for_source("cam") is lanes and lanes.summary() is None
    with pytest.raises(KitError, match="--track/--no-track applies to detectors") as refused:
        adapter_for(lane_info, track=False)
    assert refused.value.exit_code == EXIT_BAD_INPUT and "\n" not in str(refused.value)

    generic = adapter_for(classifier_info)
    assert isinstance(generic, ImageAdapter) and generic.kind == "pixels" and generic.size == (64, 64)
    for track in (True, False):
        with pytest.raises(UnsupportedSourceError, match="--track/--no-track applies to detectors") as refused:
            adapter_for(classifier_info, track=track)
        assert refused.value.exit_code == EXIT_BAD_INPUT and "'classifier'" in str(refused.value)


def _broken_kit_on_path(folder: Path) -> None:
    """A distribution installed beside orinkit whose ``orinkit.kits`` entry point names a module that is not
    there: a real dist-info on sys.path, read by importlib.metadata as pip's would be."""
    info = folder / "brokenkit-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenkit\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[orinkit.kits]\nbroken = brokenkit_missing.kit:KIT\n")


def test_a_kit_that_does_not_import_is_left_out_with_a_warning(tmp_path, monkeypatch, fresh_kits):
    _broken_kit_on_path(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(RuntimeWarning, match=r"task kit 'broken' \(brokenkit_missing.kit:KIT\) does not load"):
        found = kits()
    assert {kit.name for kit in found} >= {"lanes", "detect"}
    assert "broken" not in {kit.name for kit in found}
    with pytest.raises(KitError, match="no task kit named 'broken'"):
        kit_named("broken")


def test_a_kit_whose_guess_crashes_is_passed_over_with_a_warning(lane_info, monkeypatch, fresh_kits):
    class Crashing(TaskKit):
        name = "crashing"

        def recognizes(self, info) -> bool:
            raise KeyError("outputs")

    installed = kits()
    monkeypatch.setattr(kits_module, "kits", lambda: (Crashing(), *installed))
    with pytest.warns(RuntimeWarning, match="task kit 'crashing' failed on model 'lane_detection'"):
        assert kit_for(lane_info).name == "lanes"


def test_an_unknown_kit_name_is_bad_input():
    with pytest.raises(KitError) as refused:
        kit_named("nope")
    assert refused.value.exit_code == EXIT_BAD_INPUT == 4
    assert "no task kit named 'nope'" in str(refused.value) and "lanes" in str(refused.value)


def test_a_kits_name_is_a_metric_the_gates_know():
    """edge-convert --metric lanes / detect: convert finds the task's metric through the kit, importing no kit."""
    from orinkit.convert.fp16.task_metrics import parse_metric

    lanes = parse_metric("lanes")
    assert lanes.spec == "lanes" and lanes.function.__module__ == "orinkit.lanes.metrics"
    detect = parse_metric("detect")
    assert detect.spec == "detect" and detect.function is None and detect.factory is not None  # bound per model
