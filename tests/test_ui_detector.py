"""The device page with a detector, against a real tritonserver serving the detection ensemble of the shipped
scenes detector (detect/weights/scenes_yolo.onnx): the models table says "detector, 3 classes", the try panel's
API answers the boxes the in-process Detector finds on the same drawn scene, and the page in real Chromium draws
them over the upload and lists them, with no console error.

One server and one page for the module; the browser tests reuse test_ui_browser.py's Tab (console watch)."""

from __future__ import annotations

import http.client
import io
import json

import numpy as np
import pytest
from conftest import ROOT
from test_ui_browser import Tab, browser, shoot  # noqa: F401 - browser: a fixture
from ui_fixtures import make_page

from orinkit.detect import Detector
from orinkit.detect.client import encode
from orinkit.detect.repository import build_detection_repository
from orinkit.detect.scenes import CLASSES, draw_scene

MODEL = ROOT / "detect" / "weights" / "scenes_yolo.onnx"
NAME = "detection"
SEED = 11
# app.js's BOX_COLOURS for class ids 0, 1, 2 (disc, box, triangle), as the canvas reads them back.
CLASS_COLOURS = {0: [230, 25, 75, 255], 1: [60, 180, 75, 255], 2: [67, 99, 216, 255]}


@pytest.fixture(scope="module")
def triton(triton_server_factory, tmp_path_factory):
    repository = tmp_path_factory.mktemp("ui-detector") / "models"
    build_detection_repository(repository, MODEL, name=NAME, runtime="python-onnxruntime")
    return triton_server_factory(repository)


@pytest.fixture(scope="module")
def site(triton):
    page = make_page(triton)
    yield page
    page.stop()


@pytest.fixture(scope="module")
def scene():
    """A drawn scene (PNG: no JPEG loss between the page and the in-process run) and the in-process answer."""
    drawn = draw_scene(SEED, 640, 480, objects=6)
    expected = Detector(MODEL, providers=["CPUExecutionProvider"])(drawn.image)
    assert len(expected) >= 3, "the scene should hold several detections to compare"
    return encode(drawn.image, "png"), expected


def call(page, method: str, path: str, body: bytes | None = None):
    connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=120)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/octet-stream"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_the_models_table_calls_the_ensemble_a_detector(site):
    status, answer = call(site, "GET", "/api/models")
    assert status == 200
    models = {m["name"]: m for m in answer["models"]}
    assert models[NAME]["state"] == "READY" and models[NAME]["kind"] == "detector, 3 classes"
    # The image step takes the file and answers a tensor: no kit's model, shown as before.
    assert models[f"{NAME}_preprocess"]["kind"] is None


def test_the_try_answer_is_the_in_process_detectors_boxes(site, scene):
    data, expected = scene
    status, answer = call(site, "POST", f"/api/try?model={NAME}", data)
    assert status == 200, answer
    assert answer["kind"] == "detections", answer["kind"]  # no longer read as a classifier
    found = answer["answer"]
    assert found["kind"] == "detections" and found["names"] == list(CLASSES) and found["image_size"] == [640, 480]
    boxes = found["detections"]
    assert len(boxes) == len(expected)
    order = np.argsort([-d["score"] for d in boxes], kind="stable")
    expected_order = np.argsort(-expected.score, kind="stable")
    np.testing.assert_allclose([boxes[i]["box"] for i in order], expected.xyxy[expected_order], atol=1.0)
    np.testing.assert_allclose([boxes[i]["score"] for i in order], expected.score[expected_order], atol=0.01)
    assert [boxes[i]["class_id"] for i in order] == expected.class_id[expected_order].tolist()
    assert [boxes[i]["class"] for i in order] == [CLASSES[c] for c in expected.class_id[expected_order]]
    assert any("'detect' task kit" in note for note in answer["notes"]), answer["notes"]
    assert {o["name"] for o in answer["outputs"]} == {"boxes", "scores", "classes", "count"}


def test_a_kits_nan_reaches_the_page_as_null(site, triton):
    """The kit's answer is made JSON-ready by the page (a NaN score would make json.dumps refuse the answer)."""
    from orinkit.ui.tasks import tryout

    config = site.models.config(NAME)
    outputs = {"boxes": np.array([[[10, 20, 110, 220], [0, 0, 0, 0]]], np.float32),
               "scores": np.array([[np.nan, 0.0]], np.float32), "classes": np.array([[1, 0]], np.int32),
               "count": np.array([[1]], np.int32)}
    notes: list[str] = []
    kind, answer = tryout(config, outputs, (640, 480), notes)
    assert kind == "detections" and answer["detections"][0]["score"] is None
    assert answer["detections"][0]["class"] == "box" and len(answer["detections"]) == 1
    json.dumps(answer, allow_nan=False)
    assert any("shown as null" in note for note in notes), notes


def test_a_detector_no_kit_recognizes_is_not_read_as_a_classifier():
    """A hand-made detection ensemble (other output names than orinkit's: no kit recognizes it) once showed as a
    classifier, its class ids and scores taken for the top classes; its [k, 4] boxes now say it is none."""
    from orinkit.ui.tryout import _read, image_input

    spec = image_input({"name": "hand_made", "max_batch_size": 0,
                        "input": [{"name": "IMAGE", "data_type": "TYPE_STRING", "dims": ["1"]}], "output": []})
    rng = np.random.default_rng(0)
    outputs = {"det_boxes": rng.uniform(0, 600, (100, 4)).astype(np.float32),
               "det_scores": rng.uniform(0, 1, 100).astype(np.float32),
               "det_classes": rng.integers(0, 80, 100).astype(np.int32), "num": np.array([12], np.int32)}
    notes: list[str] = []
    kind, answer = _read(outputs, spec, (640, 480), None, notes, {})
    assert kind == "tensor" and [o["name"] for o in answer["outputs"]] == list(outputs)
    assert any("'det_boxes' holds boxes" in note for note in notes), notes
    # Scores and class ids alone (a TopK step) are still classes.
    kind, _ = _read({k: outputs[k] for k in ("det_scores", "det_classes")}, spec, (640, 480), None, [], {})
    assert kind == "classes"


def test_the_live_view_draws_each_frames_boxes_and_reports_the_stream(triton, tmp_path):
    """A detector stream into the live view as edge-stream --view wires it (LiveView(draw=adapter.draw), the
    pipeline answering through each source's own tracking copy): every answered frame is drawn by the adapter, the
    view's newest frame shows its boxes, and /api/live's figures count the frames."""
    from PIL import Image

    from orinkit.client import Client
    from orinkit.detect.scenes import moving_scene
    from orinkit.video.adapters import adapter_for
    from orinkit.video.live import LiveView
    from orinkit.video.pipeline import Pipeline

    clip = moving_scene(5, frames=60, objects=4).frames[24:30]  # 6 frames of 2 s: small steps, tracks kept
    folder = tmp_path / "frames"
    folder.mkdir()
    for index, image in enumerate(clip):
        (folder / f"{index:03d}.png").write_bytes(encode(image, "png"))

    class Keep:
        name = "keep"

        def __init__(self) -> None:
            self.results = []

        def write(self, result) -> None:
            self.results.append(result)

        def stats(self, snapshot) -> None:
            pass

        def close(self) -> None:
            pass

    keep, drawn = Keep(), []
    with Client(triton.command.grpc_url, NAME) as client:
        adapter = adapter_for(client.info)

        def draw(image, answer):
            drawn.append(answer)
            return adapter.draw(image, answer)

        live = LiveView(draw=draw)
        page = make_page(triton, live=live)
        try:
            summary = Pipeline([str(folder)], client, adapter, sinks=[keep, live]).run()
            status, figures = call(page, "GET", "/api/live")
        finally:
            page.stop()
    frames = len(clip)
    assert [r.frame.index for r in keep.results] == list(range(frames)) and not summary.errors
    assert len(drawn) == frames and all(a is r.answer for a, r in zip(drawn, keep.results))
    last = keep.results[-1]
    assert len(last.answer) >= 2 and last.record["count"] == len(last.answer)
    assert (last.answer.track_id >= 0).sum() >= 2, "the stream tracks by default"  # -1: a box not (yet) tracked
    assert status == 200 and figures["frames"] == frames and figures["size"] == [640, 480]
    assert figures["last"]["frame"] == frames - 1 and figures["stats"]["answered"] == frames
    # The live line's object count and per-class tally are the newest frame's ("3 objects (disc 2, box 1)").
    assert figures["last"]["count"] == len(last.answer)
    assert figures["last"]["classes"] == {name: list(last.answer.class_name).count(name)
                                          for name in set(last.answer.class_name)}
    # The view's newest frame is the adapter's drawing, not the bare frame: where the drawing changed the picture
    # (boxes, labels), the view's JPEG follows the drawing.
    shown = np.asarray(Image.open(io.BytesIO(live.jpeg()[1])).convert("RGB"), np.float32)[..., ::-1]
    bare = last.frame.image.astype(np.float32)
    expected = adapter.draw(last.frame.image, last.answer).astype(np.float32)
    lines = np.abs(expected - bare).max(axis=2) > 60
    assert lines.sum() > 500
    assert np.abs(shown - expected)[lines].mean() < 25 < np.abs(shown - bare)[lines].mean()


# --- in Chromium ---------------------------------------------------------------------------------------------


@pytest.fixture
def tab(browser):  # noqa: F811 - test_ui_browser's fixture, imported above
    opened = Tab(browser)
    yield opened
    opened.context.close()
    opened.check()


def _clear(box, others, margin: float = 6.0, label: tuple[float, float] = (160.0, 26.0)) -> bool:
    """The middle of ``box``'s left edge is away from every other box's lines, and from its label (drawn above it,
    or inside it at the top edge; moved left at the right edge)."""
    x, y = box[0], (box[1] + box[3]) / 2
    return not any((o[0] - margin <= x <= o[2] + margin and o[1] - margin <= y <= o[3] + margin)
                   or (o[0] - label[0] <= x <= o[2] + margin and o[1] - label[1] <= y <= o[1] + label[1])
                   for o in others)


def test_the_page_draws_and_lists_the_detections(tab, site, scene, tmp_path):
    data, expected = scene
    page = tab.page
    page.goto(site.address)
    row = page.locator(f'#models tr[data-model="{NAME}"]')
    assert row.locator(".kind").text_content(timeout=30_000) == "detector, 3 classes"
    page.wait_for_selector(f'#try-model option[value="{NAME}"]', state="attached")
    page.select_option("#try-model", NAME)
    page.set_input_files("#try-file", files=[{"name": "scene.png", "mimeType": "image/png", "buffer": data}])
    with page.expect_response(lambda r: "/api/try?" in r.url) as response:
        page.click("#try-run")
    boxes = [d["box"] for d in response.value.json()["answer"]["detections"]]
    classes = [d["class_id"] for d in response.value.json()["answer"]["detections"]]
    assert len(boxes) == len(expected)
    page.wait_for_selector("#try-canvas:not([hidden])")
    canvas = page.eval_on_selector("#try-canvas", "c => [c.width, c.height, c.dataset.boxes]")
    assert canvas == [640, 480, str(len(boxes))]
    rows = page.locator("#try-answer table.detections tr")
    assert rows.count() == len(boxes) + 1  # the header and one row per box
    assert rows.nth(1).locator("td").nth(0).text_content() == CLASSES[classes[0]]
    assert "detections" in page.text_content("#try-summary")
    pixel = "([x, y]) => Array.from(document.getElementById('try-canvas').getContext('2d')" \
            ".getImageData(x, y, 1, 1).data)"
    checked = 0
    for index, (box, class_id) in enumerate(zip(boxes, classes)):
        if not _clear(box, boxes[:index] + boxes[index + 1:]):
            continue
        # The line is 3 px wide, centred on the edge: the pixel at the rounded edge is wholly inside it.
        at = [int(np.floor(box[0] + 0.5)), int((box[1] + box[3]) / 2)]
        assert page.evaluate(pixel, at) == CLASS_COLOURS[class_id], (box, class_id)
        checked += 1
    assert checked >= 2, "too few boxes clear of the others to read back"
    # The scene shows through inside a box, away from its lines: the picture is drawn under the boxes.
    box = boxes[0]
    inside = page.evaluate(pixel, [int((box[0] + box[2]) / 2), int((box[1] + box[3]) / 2)])
    assert inside not in CLASS_COLOURS.values()
    shoot(page, "detections", tmp_path)
    assert tab.unexpected() == []
