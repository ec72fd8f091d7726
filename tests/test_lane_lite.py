"""LaneATT-Lite, the architecture that trains on a CPU: same interface as LaneATT, exported like it, loaded from
its weight cards, chosen among shipped weights by held-out F1."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from orinkit.lanes import weights  # noqa: E402
from orinkit.lanes.anchors import make_anchors  # noqa: E402
from orinkit.lanes.architectures import ARCHITECTURES, make_lane_model  # noqa: E402
from orinkit.lanes.errors import CheckpointMismatchError, LaneInputError, MissingWeightsError  # noqa: E402
from orinkit.lanes.lite import LaneATTLite  # noqa: E402
from orinkit.lanes.model import build_lane_model  # noqa: E402
from orinkit.lanes.weights import save_weights  # noqa: E402


@pytest.fixture(scope="module")
def road():
    from orinkit.lanes.synth import render_road

    image = render_road(7, 640, 360).bgr().astype(np.float32).transpose(2, 0, 1) / 255
    return torch.from_numpy(image)[None]


@pytest.mark.parametrize("attention", ["cells", "anchors"])
def test_lite_keeps_laneatts_interface_and_exports_plain_onnx(attention, road, tmp_path):
    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.postprocess import postprocess

    torch.manual_seed(0)
    model = LaneATTLite(width=8, attention=attention).eval()
    with torch.no_grad():
        out = model(torch.cat([road, road.flip(-1)]))
    assert out.shape == (2, 2784, 77)
    # Columns 2..3 are the anchors' own start; 5.. the anchor x plus the regression: the decoder's contract.
    torch.testing.assert_close(out[0, :, 2:4], model.anchors[:, 2:4])
    postprocess(out[0].numpy(), (360, 640))
    path = export_lane_onnx(model, tmp_path / "lite.onnx", dynamic_batch=True)
    ops = {node.op_type for node in onnx.load(str(path)).graph.node}
    assert not ops & {"ScatterND", "ScatterElements", "NonZero", "Loop", "If", "Pad"}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(["proposals"], {"image": torch.cat([road, road.flip(-1)]).numpy()})[0]
    np.testing.assert_allclose(got, out.numpy(), rtol=1e-4, atol=1e-3)


def test_the_cell_attention_costs_a_fraction_of_laneatts():
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.rand(1, 3, 360, 640)
    costs = {}
    for arch in ("r18", "lite"):
        model = make_lane_model(arch).eval()
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(x)
        costs[arch] = counter.get_total_flops() / 2e9
    assert costs["lite"] < costs["r18"] / 10, costs


def test_lite_weight_cards_load_with_their_architecture(tmp_path):
    torch.manual_seed(1)
    model = make_lane_model("lite")
    save_weights(model.state_dict(), tmp_path / "lite.json", {"arch": "lite", "f1": 0.5})
    loaded = build_lane_model(checkpoint=tmp_path / "lite.json")
    assert isinstance(loaded, LaneATTLite) and not loaded.weights_are_random and loaded.card["arch"] == "lite"
    for key, value in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value.half().float() if value.is_floating_point()
                                   else value)
    with pytest.raises(CheckpointMismatchError, match="holds lite weights, not r18"):
        build_lane_model("r18", checkpoint=tmp_path / "lite.json")
    save_weights(make_lane_model("lite-w24").state_dict(), tmp_path / "wide.json", {"arch": "lite"})
    with pytest.raises(CheckpointMismatchError, match="do not fit LaneATTLite"):
        build_lane_model(checkpoint=tmp_path / "wide.json")
    with pytest.raises(CheckpointMismatchError, match="takes orinkit weight cards"):
        build_lane_model("lite", checkpoint={"model": model.state_dict()})
    with pytest.raises(LaneInputError, match="unknown lane architecture 'r50'"):
        build_lane_model("r50", random_weights=True)


def test_the_best_shipped_weights_by_held_out_f1_are_the_default(tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "shipped_folder", lambda: tmp_path)
    with pytest.raises(MissingWeightsError, match="no trained weights ship"):
        build_lane_model()
    save_weights(make_lane_model("lite").state_dict(), tmp_path / "a.json", {"arch": "lite", "f1": 0.91})
    save_weights(make_lane_model("lite-w24").state_dict(), tmp_path / "b.json", {"arch": "lite-w24", "f1": 0.93})
    (tmp_path / "c.json").write_text(json.dumps({"arch": "lite", "f1": 0.99}))  # a card without shards
    assert [p.name for p in weights.shipped_cards()] == ["b.json", "a.json"]
    assert build_lane_model().card["arch"] == "lite-w24"
    assert build_lane_model("lite").card["f1"] == 0.91
    with pytest.raises(MissingWeightsError, match="for r18"):
        build_lane_model("r18")


def test_every_listed_architecture_builds_and_answers_in_shape():
    x = torch.rand(1, 3, 360, 640)
    for arch in ARCHITECTURES:
        if arch == "r18":
            continue  # covered by test_lane_model
        with torch.no_grad():
            assert make_lane_model(arch, anchors=make_anchors()[:50]).eval()(x).shape == (1, 50, 77)


def test_image_normalisation_answers_the_same_road_under_another_exposure(road, tmp_path):
    """``lite-imnorm`` standardises each image's channels first: a darker, lower-contrast, colour-cast camera frame
    of the same road gives the same proposals (the plain ``lite`` does not), in torch and in the exported ONNX."""
    from orinkit.lanes.export import export_lane_onnx

    anchors = make_anchors()[:200]
    darker = road * torch.tensor([0.55, 0.7, 0.6]).view(1, 3, 1, 1) + 0.08  # each channel's own gain and a lift
    torch.manual_seed(0)
    normalised, plain = make_lane_model("lite-imnorm", anchors).eval(), make_lane_model("lite", anchors).eval()
    with torch.no_grad():
        both = normalised(torch.cat([road, darker]))
        torch.testing.assert_close(both[0], both[1], rtol=1e-3, atol=1e-3)
        # The backbones' features: the heads start near zero, so the proposals alone would hide the difference.
        seen = [model.feature_extractor(model.normalise(torch.cat([road, darker]))) for model in (normalised, plain)]
        change = [float((f[0] - f[1]).abs().mean() / f[0].abs().mean()) for f in seen]
        assert change[0] < 0.01 < 0.1 < change[1], change  # the 1e-4 variance floor is the 0.2 % left
        flat = normalised(torch.full((1, 3, 360, 640), 0.5))  # a covered lens: finite, not 0/0
    assert torch.isfinite(flat).all()
    path = export_lane_onnx(normalised, tmp_path / "imnorm.onnx", dynamic_batch=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(["proposals"], {"image": torch.cat([road, darker]).numpy()})[0]
    np.testing.assert_allclose(got, both.numpy(), rtol=1e-4, atol=1e-3)
