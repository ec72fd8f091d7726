"""LaneATT: anchors, the export-friendly attention, the model's output layout, ONNX export and checkpoints."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from orinkit.lanes.anchors import anchor_cut_columns, make_anchors, select_topk_anchors

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from orinkit.lanes.errors import LaneError  # noqa: E402
from orinkit.lanes.model import (  # noqa: E402
    CheckpointMismatchError,
    LaneATT,
    build_lane_model,
    spread_attention,
)

ROWS = 1.0 - np.arange(72) / 71  # normalised sample heights, bottom row first


def line_xs(x0, y0, degrees, ys=ROWS):
    return (x0 + (y0 - ys) / math.tan(math.radians(degrees))) * 640


@pytest.fixture(scope="module")
def anchors():
    return make_anchors()


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return LaneATT("resnet18").eval()


@pytest.fixture(scope="module")
def image():
    return torch.rand(1, 3, 360, 640, generator=torch.Generator().manual_seed(1))


def test_anchors_package_stays_free_of_torch():
    code = "import sys, orinkit.lanes, orinkit.lanes.anchors; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_anchor_count_and_order(anchors):
    assert anchors.shape == (2784, 77) and anchors.dtype == np.float32
    left, bottom, right = anchors[:432], anchors[432:2352], anchors[2352:]
    assert np.all(anchors[:, [0, 1, 4]] == 0)
    assert np.all(left[:, 3] == 0) and np.all(right[:, 3] == 1) and np.all(bottom[:, 2] == 0)
    # Origin-major: six consecutive left anchors share an origin, origins climb from the bottom.
    np.testing.assert_allclose(left[:6, 2], 0.0)
    np.testing.assert_allclose(left[6:12, 2], 1 / 71, rtol=1e-6)
    np.testing.assert_allclose(left[-1, 2], 1.0)
    np.testing.assert_allclose(bottom[:15, 3], 1.0)
    np.testing.assert_allclose(bottom[-15:, 3], 0.0)
    np.testing.assert_allclose(right[::6, 2], np.linspace(0, 1, 72), atol=1e-7)


@pytest.mark.parametrize("index, x0, y0, degrees", [
    (0, 0.0, 1.0, 72.0),                        # first left: bottom-left corner, 72 degrees
    (10 * 6 + 3, 0.0, 1 - 10 / 71, 39.0),       # left origin 10, fourth angle
    (432, 1.0, 1.0, 165.0),                     # first bottom: bottom-right corner
    (432 + 5 * 15 + 7, 1 - 5 / 127, 1.0, 90.0),  # bottom origin 5, vertical
    (2783, 1.0, 0.0, 158.0),                    # last right: top-right corner
])
def test_anchor_values_by_hand(anchors, index, x0, y0, degrees):
    anchor = anchors[index]
    assert anchor[2] == pytest.approx(1 - y0, abs=1e-7) and anchor[3] == pytest.approx(x0, abs=1e-7)
    np.testing.assert_allclose(anchor[5:], line_xs(x0, y0, degrees), rtol=1e-6, atol=1e-3)


def test_cut_columns(anchors):
    columns, valid = anchor_cut_columns(anchors)
    assert columns.shape == valid.shape == (2784, 11) and columns.min() >= 0 and columns.max() <= 19
    row_ys = np.arange(11) / 10
    # Vertical bottom anchor at x = 614.8 px → column 19 everywhere.
    assert np.all(columns[432 + 5 * 15 + 7] == 19) and valid[432 + 5 * 15 + 7].all()
    # First left anchor: x = (1 - y) / tan 72 * 640.
    want = np.round(line_xs(0.0, 1.0, 72.0, row_ys) / 32)
    assert np.array_equal(columns[0], want) and valid[0].all()
    # Last left anchor starts at the top-left corner: only the top row lies inside the image.
    assert valid[426].tolist() == [True] + [False] * 10 and columns[426, 0] == 0
    # Last right anchor: column exactly 20 on the top row still counts (reference's `> fmap_w`), clamped to 19.
    assert valid[2783].tolist() == [True] + [False] * 10 and columns[2783, 0] == 19


def test_select_topk_is_stable_by_descending_frequency(anchors):
    freq = np.zeros(len(anchors))
    freq[[7, 3, 100, 5]] = [2, 5, 5, 1]
    picked = select_topk_anchors(anchors, freq, 5)
    np.testing.assert_array_equal(picked, anchors[[3, 100, 7, 5, 0]])
    with pytest.raises(ValueError):
        select_topk_anchors(anchors, freq[:-1], 5)


def scatter_reference(att):
    batch, n, _ = att.shape
    out = torch.zeros(batch, n, n)
    for b in range(batch):
        for row in range(n):
            others = [m for m in range(n) if m != row]
            out[b, row, others] = att[b, row]
    return out


@pytest.mark.parametrize("batch, n", [(1, 2), (2, 5), (3, 17)])
def test_spread_attention_matches_scatter(batch, n):
    att = torch.rand(batch, n, n - 1, generator=torch.Generator().manual_seed(n))
    assert torch.equal(spread_attention(att), scatter_reference(att))


def reference_forward(model, x):
    """The reference computation with explicit indexing, on the model's own layers."""
    with torch.no_grad():
        fmap = model.conv1(model.feature_extractor(x))
        columns, valid = anchor_cut_columns(model.anchors.numpy())
        rows = np.broadcast_to(np.arange(11), columns.shape)
        cells = fmap[:, :, torch.from_numpy(rows.copy()), torch.from_numpy(columns)]  # [B, C, N, 11]
        cells = cells * torch.from_numpy(valid).float()
        feats = cells.permute(0, 2, 1, 3).reshape(x.shape[0], model.n_anchors, -1)
        att = torch.softmax(model.attention_layer(feats), dim=-1)
        matrix = scatter_reference(att) if model.n_anchors < 100 else _eye_scatter(att)
        head = torch.cat([matrix @ feats, feats], dim=-1)
        cls, reg = model.cls_layer(head), model.reg_layer(head)
        out = model.anchors.repeat(x.shape[0], 1, 1).clone()
        out[:, :, :2] = cls
        out[:, :, 4:] += reg
        return out


def _eye_scatter(att):
    batch, n, _ = att.shape
    off_diagonal = torch.nonzero(torch.eye(n).repeat(batch, 1, 1) == 0)
    matrix = torch.zeros(batch, n, n)
    matrix[off_diagonal[:, 0], off_diagonal[:, 1], off_diagonal[:, 2]] = att.flatten()
    return matrix


def test_model_output_layout(model, image, anchors):
    assert model.weights_are_random
    with torch.no_grad():
        out = model(image)
    assert out.shape == (1, 2784, 77)
    anchors_t = torch.from_numpy(anchors)
    assert torch.equal(out[0, :, 2:4], anchors_t[:, 2:4])
    want = reference_forward(model, image)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-4)
    # Columns 4.. are the anchor plus the regression head, 0..1 the class head alone.
    reg = want[0, :, 4:] - anchors_t[:, 4:]
    torch.testing.assert_close(out[0, :, 5:], anchors_t[:, 5:] + reg[:, 1:], rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(out[0, :, 4], reg[:, 0])


def test_onnx_export_matches_torch(model, image, tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from orinkit.lanes.export import anchors_path, export_lane_onnx

    path = export_lane_onnx(model, tmp_path / "lane.onnx", dynamic_batch=True)
    assert path == tmp_path / "lane.onnx" and anchors_path(path) == tmp_path / "lane.anchors.npy"
    np.testing.assert_array_equal(np.load(anchors_path(path)), model.anchors.numpy())
    graph = onnx.load(str(path)).graph
    ops = {node.op_type for node in graph.node}
    assert not ops & {"ScatterND", "ScatterElements", "NonZero", "Loop", "If"}
    assert [i.name for i in graph.input] == ["image"] and [o.name for o in graph.output] == ["proposals"]
    batch = torch.cat([image, image.flip(-1)])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(["proposals"], {"image": batch.numpy()})[0]
    with torch.no_grad():
        want = model(batch).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_checkpoint_round_trip(model, image, tmp_path):
    path = tmp_path / "laneatt.pt"
    torch.save({"model": model.state_dict(), "epoch": 15}, path)
    torch.manual_seed(5)
    other = LaneATT("resnet18").eval()
    assert other.weights_are_random
    other.load_reference_checkpoint(path)
    assert not other.weights_are_random
    with torch.no_grad():
        torch.testing.assert_close(other(image), model(image))
    # The reference names, not ours alone: no anchor buffers in the state_dict.
    assert {k.split(".")[0] for k in model.state_dict()} == {
        "feature_extractor", "conv1", "cls_layer", "reg_layer", "attention_layer"}


def test_bad_checkpoint_names_the_keys(model):
    state = dict(model.state_dict())
    del state["cls_layer.bias"]
    state["head.extra.weight"] = torch.zeros(1)
    target = LaneATT("resnet18")
    with pytest.raises(CheckpointMismatchError) as info:
        target.load_reference_checkpoint({"model": state})
    message = str(info.value)
    assert "cls_layer.bias" in message and "head.extra.weight" in message and "feature_extractor." in message
    assert isinstance(info.value, LaneError) and info.value.exit_code == 4 and target.weights_are_random
    with pytest.raises(CheckpointMismatchError, match="not a state_dict"):
        target.load_reference_checkpoint({"model": {"conv1.weight": "nope"}})


def test_topk_anchors(anchors, tmp_path):
    freq = torch.from_numpy(np.random.default_rng(0).integers(0, 50, len(anchors)).astype(np.float32))
    torch.save(freq, tmp_path / "freq.pt")
    small = build_lane_model("r18", topk_anchors=40, frequencies=tmp_path / "freq.pt", random_weights=True)
    np.testing.assert_array_equal(small.anchors.numpy(), select_topk_anchors(anchors, freq.numpy(), 40))
    assert small.attention_layer.out_features == 39 and not small.training
    x = torch.rand(1, 3, 360, 640)
    with torch.no_grad():
        out = small(x)
    assert out.shape == (1, 40, 77)
    torch.testing.assert_close(out, reference_forward(small, x), rtol=1e-5, atol=1e-4)
    # A top-k checkpoint in a full model: the message says how many anchors it wants.
    with pytest.raises(CheckpointMismatchError, match="topk_anchors=40"):
        build_lane_model(checkpoint={"model": small.state_dict()})
    with pytest.raises(LaneError, match="topk_anchors and frequencies go together"):
        build_lane_model(topk_anchors=40, random_weights=True)
