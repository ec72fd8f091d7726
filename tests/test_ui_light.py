"""The device page server stays light: serving the page and its panels loads neither gRPC, tritonclient nor Pillow
(they come with the first try), the models panel reads Triton's HTTP/REST API, and its statistics match gRPC's.
numpy comes with the models panel: the task kits that say what a model is ("detector, 3 classes") read its
orinkit.client.ModelInfo, which needs it. Memory itself is measured by benchmarks/web.py, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ui_fixtures import road_png, start_triton

from orinkit.client.statistics import from_json, from_response
from orinkit.ui import UiError, UiServer

HEAVY = ("numpy", "grpc", "tritonclient", "PIL")

# Run in a fresh interpreter: this test process has long imported all of them.
CHILD = r"""
import http.client, json, sys

import orinkit.cli.serve  # edge-serve ui's own module, with every import it makes at start
from orinkit.ui import UiServer

HEAVY = %r
grpc_url, http_url, image_path = sys.argv[1:4]


def loaded():
    return sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY))


page = UiServer(grpc_url, port=0, board_interval_s=0.2).start()  # the HTTP address found as edge-serve ui finds it
assert page.http_url == http_url, page.http_how
connection = http.client.HTTPConnection("127.0.0.1", page.port, timeout=120)
statuses = {}


def call(method, path, body=None):
    connection.request(method, path, body=body)
    response = connection.getresponse()
    data = response.read()
    statuses.setdefault(path, []).append(response.status)
    return data


try:
    for _ in range(3):
        for path in ("/", "/static/app.js", "/static/style.css", "/api/models", "/api/board"):
            call("GET", path)
    models = json.loads(call("GET", "/api/models"))["models"]
    before = loaded()
    with open(image_path, "rb") as image:
        answer = json.loads(call("POST", "/api/try?model=lane_detection", image.read()))
    after = loaded()
finally:
    page.stop()
print(json.dumps({"statuses": statuses, "models": models, "before": before, "after": after, "answer": answer}))
"""


@pytest.fixture(scope="module")
def ui_triton(triton_server_factory, tmp_path_factory):
    return start_triton(triton_server_factory, tmp_path_factory)


def test_serving_the_page_loads_no_grpc_or_pillow_until_a_try(ui_triton, tmp_path):
    image = tmp_path / "road.png"
    image.write_bytes(road_png(640, 360))
    command = ui_triton.command
    run = subprocess.run([sys.executable, "-c", CHILD % (HEAVY,), command.grpc_url, command.http_url, str(image)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert all(set(codes) == {200} for codes in result["statuses"].values()), result["statuses"]
    models = {m["name"]: m for m in result["models"]}
    lanes = models["lane_detection"]
    assert lanes["state"] == "READY" and lanes["image_input"]["mode"] == "bytes" and lanes["versions"][0]["window"]
    assert lanes["kind"] == "lane detector" and models["digits"]["kind"] is None, "the kits' words, or none"
    assert models["digits"]["image_input"]["layout"] == "CHW", "tryout_inputs read the HTTP config"
    assert result["before"] == ["numpy"], f"serving the page loaded {result['before']} (numpy only: the kits)"
    assert result["answer"]["kind"] == "lanes", result["answer"]
    assert result["after"] == sorted(HEAVY), "the first try loads the gRPC client, numpy and Pillow"


def test_the_http_statistics_match_grpcs(ui_triton):
    import tritonclient.grpc as grpcclient

    from orinkit.ui.models import ModelsView

    grpc = grpcclient.InferenceServerClient(ui_triton.command.grpc_url)
    try:
        # No request runs in between (the test module's own tries have finished): both read the same counters.
        by_grpc = from_response(grpc.get_inference_statistics(as_json=False))
        as_json = grpc.get_inference_statistics(as_json=True)  # the gRPC JSON form: 64-bit counts as strings
    finally:
        grpc.close()
    by_http = ModelsView(ui_triton.command.http_url).statistics()
    assert by_http == by_grpc and from_json(as_json) == by_grpc
    assert ("lane_detection", "1") in by_http


def test_a_malformed_http_address_is_refused_at_construction():
    # How the default is found: tests/test_ui_address.py.
    assert UiServer("localhost:8001", http_url="http://127.0.0.1:9000", port=0).http_url == "http://127.0.0.1:9000"
    for wrong in ("localhost:8000", "ftp://host:8000", "http://:8000", "http://host:port"):
        with pytest.raises(UiError, match="not an http://HOST"):
            UiServer("localhost:8001", http_url=wrong, port=0)


def test_the_upload_limits_are_the_image_steps():
    from orinkit.repo.pymodels import image_preprocess
    from orinkit.ui import server

    assert (server.MAX_IMAGE_BYTES, server.MAX_PIXELS) == (image_preprocess.MAX_IMAGE_BYTES,
                                                           image_preprocess.MAX_PIXELS)
