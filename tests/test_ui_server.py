"""The device page's server over HTTP: routes, JSON errors, limits, the token, the host and origin checks, and
control through edge-repo's rules, against a real tritonserver (the repository of ui_fixtures)."""

from __future__ import annotations

import http.client
import io
import json
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner
from ui_fixtures import (
    CONTROLLED,
    RAW_PIXELS,
    UINT8_CLASSIFIER,
    digit_png,
    make_page,
    road_png,
    solid_png,
    start_triton,
    ui_repository,
)

from orinkit.cli.serve import main as serve_main
from orinkit.repo.deploy import deploy_version
from orinkit.server.ports import free_ports
from orinkit.ui import UiError, UiServer, UnsafeBindError

TOKEN = "a-test-token-that-is-long-enough"


@pytest.fixture(scope="module")
def ui_triton(triton_server_factory, tmp_path_factory):
    return start_triton(triton_server_factory, tmp_path_factory)


@pytest.fixture(scope="module")
def repository(ui_triton, tmp_path_factory):
    return ui_repository(tmp_path_factory)


@pytest.fixture(scope="module")
def page(ui_triton, repository):
    server = make_page(ui_triton, repository=repository, allow_control=True)
    yield server
    server.stop()


def call(page, path, *, method="GET", body=None, headers=None, host=None):
    """(status, headers, JSON or bytes) of one request sent as it is (no client-side path clean-up)."""
    connection = http.client.HTTPConnection(host or page.host, page.port, timeout=120)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        kind = response.getheader("Content-Type", "")
        return response.status, response, json.loads(data) if kind.startswith("application/json") else data
    finally:
        connection.close()


def assert_error(result, status, *needles, kind=None):
    code, _, body = result
    assert code == status, body
    error = body["error"]
    assert set(error) == {"type", "message", "hint", "exit_code"}
    for needle in needles:
        assert needle in error["message"], error
    if kind:
        assert error["type"] == kind, error
    return error


def models_by_name(page):
    status, _, body = call(page, "/api/models")
    assert status == 200, body
    return {m["name"]: m for m in body["models"]}, body


def test_the_page_and_its_files_are_served_with_a_strict_policy(page):
    status, response, html = call(page, "/")
    assert status == 200 and response.getheader("Content-Type").startswith("text/html")
    policy = response.getheader("Content-Security-Policy")
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'" and directives["img-src"] == "'self' data:"
    assert {directives[d] for d in ("script-src", "style-src", "connect-src")} == {"'self'"}
    assert "unsafe" not in policy
    assert response.getheader("X-Content-Type-Options") == "nosniff"
    assert response.getheader("Server") == "orinkit-ui"
    assert b'src="/static/app.js"' in html and b"<script>" not in html and b"style=" not in html
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        status, response, _ = call(page, f"/static/{name}")
        assert status == 200 and response.getheader("Content-Type").startswith(kind)


@pytest.mark.parametrize("path", [
    "/static/../setup.cfg", "/static/%2e%2e/setup.cfg", "/static/..%2fsetup.cfg", "/static/%2e%2e%2fsetup.cfg",
    "/static/..%5csetup.cfg", "/static//etc/passwd", "/static/app.js/../../setup.cfg", "/../setup.cfg",
    "/static/", "/static/tryout.py", "/static/../tryout.py", "/%2e%2e/setup.cfg", "/index.html/../setup.cfg",
])
def test_static_paths_outside_the_fixed_table_are_refused(page, path):
    code, _, body = call(page, path)
    assert code == 404 and body["error"]["type"] == "RequestError", body


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/api/nope", 404), ("GET", "/nope", 404), ("POST", "/", 405), ("GET", "/api/try", 405),
    ("POST", "/api/models", 405), ("GET", "/api/control/unload?model=x", 405), ("PUT", "/api/models", 501),
    ("DELETE", "/", 501),
])
def test_unknown_routes_and_methods_answer_json(page, method, path, status):
    code, response, body = call(page, path, method=method, body=b"" if method in ("POST", "PUT") else None)
    assert code == status and response.getheader("Content-Type") == "application/json", body
    assert body["error"]["message"]


def test_malformed_requests_answer_json_not_html(page):
    with socket.create_connection((page.host, page.port), timeout=10) as raw:
        # http.server refuses it itself (more than 100 header lines), before any route runs.
        raw.sendall(b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(120)) + b"\r\n")
        answer = b""
        while b"}}" not in answer and (chunk := raw.recv(65536)):
            answer += chunk
        answer = answer.decode()
    head, _, body = answer.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.") and " 431 " in head.splitlines()[0], head
    assert json.loads(body)["error"]["type"] == "HTTPError" and "<html" not in answer.lower()


def test_models_lists_states_io_image_inputs_and_windowed_counts(page):
    models, body = models_by_name(page)
    assert body["control"] is True and body["max_upload_bytes"] == 16 << 20
    assert {"mnist", "lane_detection", CONTROLLED, "digits"} <= set(models)
    mnist = models["mnist"]
    assert mnist["state"] == "READY" and mnist["platform"] == "ensemble"
    assert mnist["image_input"]["mode"] == "bytes" and mnist["inputs"][0]["dtype"] == "BYTES"
    assert [o["name"] for o in mnist["outputs"]] == ["scores", "class_ids"]
    assert models[CONTROLLED]["image_input"] is None and models["digits_top"]["image_input"] is None
    pixels = models["digits"]["image_input"]  # the classifier alone takes a 1x8x8 tensor: an image too
    assert (pixels["mode"], pixels["layout"], pixels["width"], pixels["height"]) == ("tensor", "CHW", 8, 8)
    png, _ = digit_png(1)
    for _ in range(3):
        assert call(page, "/api/try?model=mnist", method="POST", body=png)[0] == 200
    time.sleep(0.3)
    models, _ = models_by_name(page)
    window = models["mnist"]["versions"][0]["window"]
    assert window["success"] >= 3 and window["failure"] == 0 and window["seconds"] > 0
    assert window["queue_ms"] is not None and window["compute_ms"] > 0
    assert models["mnist"]["versions"][0]["success"] >= 3


def test_board_gives_samples_and_only_newer_ones_after_since(page):
    deadline = time.monotonic() + 10
    while True:
        status, _, board = call(page, "/api/board")
        if board["samples"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert status == 200 and board["running"] and board["source"] in ("proc", "tegrastats")
    assert {"t", "power_mw", "temps_c", "cpu_load_pct", "gpu_load_pct", "mem_used_mb"} <= set(board["samples"][0])
    last = board["samples"][-1]["t"]
    _, _, newer = call(page, f"/api/board?since={last}")
    assert all(s["t"] > last for s in newer["samples"])
    assert_error(call(page, "/api/board?since=soon"), 400, "is not a time")
    assert_error(call(page, "/api/board?since=nan"), 400, "is not a time")


def test_a_digit_gets_its_class_and_each_output_downloads_as_npy(page):
    png, digit = digit_png(0)
    status, _, answer = call(page, "/api/try?model=mnist", method="POST", body=png,
                             headers={"Content-Type": "application/octet-stream"})
    assert status == 200, answer
    assert answer["kind"] == "classes" and answer["answer"]["top"][0]["index"] == digit
    assert answer["latency_ms"] > 0 and set(answer["npy"]) == {"scores", "class_ids"}
    status, response, data = call(page, answer["npy"]["class_ids"])
    assert status == 200 and "attachment" in response.getheader("Content-Disposition")
    class_ids = np.load(io.BytesIO(data), allow_pickle=False)
    assert class_ids.shape == (3,) and int(class_ids[0]) == digit
    assert_error(call(page, f"/api/try/{answer['id']}/nope.npy"), 404, "no output 'nope'")
    assert_error(call(page, "/api/try/unknown-id/scores.npy"), 404, "no try result")


def test_a_road_gets_lanes_in_image_pixels(page):
    status, _, answer = call(page, "/api/try?model=lane_detection", method="POST", body=road_png(640, 360))
    assert status == 200, answer
    assert answer["kind"] == "lanes" and (answer["answer"]["width"], answer["answer"]["height"]) == (640, 360)
    assert answer["answer"]["lanes"] and all(len(lane["points"]) >= 2 for lane in answer["answer"]["lanes"])


def test_a_classifier_taking_the_encoded_file_as_uint8_is_listed_and_answers_with_its_labels(page):
    models, _ = models_by_name(page)
    listed = models[UINT8_CLASSIFIER]
    assert listed["state"] == "READY" and listed["inputs"] == [{"name": "INPUT_0", "dtype": "UINT8", "dims": [-1]}]
    assert (listed["image_input"]["mode"], listed["image_input"]["dtype"]) == ("bytes", "UINT8")
    status, _, answer = call(page, f"/api/try?model={UINT8_CLASSIFIER}", method="POST", body=solid_png((20, 40, 230)),
                             headers={"Content-Type": "application/octet-stream"})
    assert status == 200, answer
    assert answer["kind"] == "classes" and answer["answer"]["top"][0]["label"] == "blue"  # labels.txt's third
    assert [c["label"] for c in answer["answer"]["top"]] == ["blue", "green", "red"]


def test_a_uint8_input_that_wants_raw_pixels_is_refused_saying_so(page):
    error = assert_error(call(page, f"/api/try?model={RAW_PIXELS}", method="POST", body=solid_png((0, 0, 0))), 400,
                         "UINT8 [-1] input 'PIXELS'", "does not take an encoded image", "expected 784 raw pixels",
                         kind="NotAnImageModelError")
    assert error["hint"]


@pytest.mark.parametrize("path, body, status, kind, needle", [
    ("/api/try?model=mnist", b"\x89PNG\r\n\x1a\n broken", 400, "BadImageError", "not an image"),
    ("/api/try?model=mnist", b"plain text, not a picture", 400, "BadImageError", "not an image"),
    ("/api/try?model=nope", b"x", 404, "ModelNotFoundError", "unknown model: 'nope'"),
    (f"/api/try?model={CONTROLLED}", b"x", 400, "NotAnImageModelError", "takes no image"),
    ("/api/try", b"x", 400, "RequestError", "needs ?model="),
    ("/api/try?model=mnist&model=digits", b"x", 400, "RequestError", "given 2 times"),
    ("/api/try?model=mnist", b"", 400, "RequestError", "no image"),
])
def test_try_errors_are_json_with_orinkit_messages(page, path, body, status, kind, needle):
    assert_error(call(page, path, method="POST", body=body), status, needle, kind=kind)


def test_the_body_limit_is_enforced_before_the_body_is_read(ui_triton):
    small = make_page(ui_triton, max_upload_bytes=100)
    try:
        with socket.create_connection((small.host, small.port), timeout=10) as raw:
            # Headers only: a server that read the body first would wait here until its timeout.
            raw.sendall(f"POST /api/try?model=mnist HTTP/1.1\r\nHost: 127.0.0.1:{small.port}\r\n"
                        "Content-Length: 1000000000\r\n\r\n".encode())
            answer = b""
            while chunk := raw.recv(65536):  # the server closes: the unread body would be taken for a request
                answer += chunk
            answer = answer.decode()
        assert " 413 " in answer.splitlines()[0] and "above the page server's limit" in answer
        png, _ = digit_png(2)
        assert len(png) > 100
        assert_error(call(small, "/api/try?model=mnist", method="POST", body=png), 413, "limit")
        assert_error(call(small, "/api/try?model=mnist", method="POST", body=b"x",
                          headers={"Transfer-Encoding": "chunked"}), 411, "chunked")
    finally:
        small.stop()


def test_other_host_names_are_refused_on_loopback_against_dns_rebinding(page):
    assert_error(call(page, "/api/models", headers={"Host": f"evil.example:{page.port}"}), 403, "localhost")
    assert_error(call(page, "/", headers={"Host": f"127.0.0.1:{page.port + 1}"}), 403)
    for host in ("localhost", "127.0.0.1"):
        assert call(page, "/", headers={"Host": f"{host}:{page.port}"})[0] == 200


def test_browser_requests_from_another_site_may_not_change_anything(page):
    png, _ = digit_png(3)
    assert_error(call(page, "/api/try?model=mnist", method="POST", body=png,
                      headers={"Origin": "http://evil.example"}), 403, "evil.example")
    assert_error(call(page, f"/api/control/unload?model={CONTROLLED}", method="POST", body=b"",
                      headers={"Sec-Fetch-Site": "cross-site"}), 403, "cross-site")
    same = {"Origin": f"http://127.0.0.1:{page.port}", "Sec-Fetch-Site": "same-origin"}
    assert call(page, "/api/try?model=mnist", method="POST", body=png, headers=same)[0] == 200


def test_off_loopback_every_api_request_needs_the_token(ui_triton):
    guarded = make_page(ui_triton, host="127.0.0.2", token=TOKEN)
    try:
        assert call(guarded, "/")[0] == 200, "the page itself is no secret: it learns the token from its URL"
        assert_error(call(guarded, "/api/models"), 401, "needs its token", kind="RequestError")
        assert_error(call(guarded, "/api/models", headers={"Authorization": "Bearer wrong-token-0123456789"}),
                     401, "wrong")
        assert_error(call(guarded, "/api/models", headers={"Authorization": f"Basic {TOKEN}"}), 401, "wrong")
        assert_error(call(guarded, "/api/try?model=mnist", method="POST", body=b"x"), 401)
        status, _, body = call(guarded, "/api/models", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and body["models"]
    finally:
        guarded.stop()


def test_a_page_open_to_the_network_without_a_token_is_refused_at_start(ui_triton, tmp_path):
    url = ui_triton.command.grpc_url
    for host in ("0.0.0.0", "192.168.1.20", "::"):
        with pytest.raises(UnsafeBindError, match="open to the network without a token"):
            UiServer(url, host=host, port=0)
    generated = UiServer(url, host="0.0.0.0", port=0, generate_token=True)
    assert generated.token and len(generated.token) >= 24 and generated.token_generated
    with pytest.raises(UnsafeBindError, match="shorter than 16"):
        UiServer(url, host="0.0.0.0", token="short")
    (tmp_path / "token").write_text(TOKEN + "\n")
    assert UiServer(url, host="0.0.0.0", token_file=tmp_path / "token").token == TOKEN
    with pytest.raises(UiError, match="control needs the model repository"):
        UiServer(url, allow_control=True)
    result = CliRunner().invoke(serve_main, ["ui", "--url", url, "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 4 and "open to the network without a token" in result.output


def test_control_is_refused_when_off(ui_triton):
    plain = make_page(ui_triton)
    try:
        _, body = models_by_name(plain)
        assert body["control"] is False
        error = assert_error(call(plain, f"/api/control/unload?model={CONTROLLED}", method="POST", body=b""), 403)
        assert error["message"] == "control is off; start with --allow-control"
        assert models_by_name(plain)[0][CONTROLLED]["state"] == "READY"
    finally:
        plain.stop()


def test_control_unloads_loads_and_rolls_back_through_the_repository_rules(page, repository, ui_triton):
    def control(action, model=CONTROLLED):
        return call(page, f"/api/control/{action}?model={model}", method="POST", body=b"")

    status, _, body = control("unload")
    assert status == 200, body
    model = models_by_name(page)[0][CONTROLLED]
    assert model["state"] == "UNAVAILABLE" and model["versions"][0]["state"] == "UNAVAILABLE"
    status, _, body = control("load")
    assert status == 200 and body["serving"] == [1], body
    assert models_by_name(page)[0][CONTROLLED]["state"] == "READY"

    # A second version deployed the edge-repo way, then rolled back from the page: version 1 serves again.
    deployed = deploy_version(repository, CONTROLLED, repository / CONTROLLED / "1" / "model.py",
                              server=ui_triton.command.grpc_url)
    assert deployed.serving == (2,)
    status, _, body = control("rollback")
    assert status == 200 and body["rolled_back"] == 2 and body["serving"] == [1], body
    assert (repository / CONTROLLED / "rolled-back-2").is_dir()
    assert_error(control("rollback"), 400, "nothing to roll back to", kind="DeployError")
    assert_error(control("unload", "nope"), 404, "no model 'nope'")
    assert_error(control("explode"), 404, "no control action")


def test_a_triton_that_does_not_answer_is_a_json_502_naming_it():
    grpc_port, http_port = free_ports(2)
    with UiServer(f"127.0.0.1:{grpc_port}", http_url=f"http://127.0.0.1:{http_port}", port=0,
                  board_interval_s=0.5) as lonely:
        error = assert_error(call(lonely, "/api/models"), 502, f"http://127.0.0.1:{http_port}",
                             kind="ServerUnavailableError")
        assert error["hint"] and error["exit_code"] == 6
        assert call(lonely, "/api/board")[0] == 200, "the board does not need Triton"


def test_a_grpc_port_given_as_the_http_address_is_a_json_502_saying_so(ui_triton):
    grpc_port = ui_triton.command.grpc_url.rpartition(":")[2]
    with UiServer(ui_triton.command.grpc_url, http_url=f"http://127.0.0.1:{grpc_port}", port=0,
                  board_interval_s=0.5) as wrong:
        error = assert_error(call(wrong, "/api/models"), 502, f"http://127.0.0.1:{grpc_port}")
        assert "HTTP endpoint" in error["hint"]


def test_an_unexpected_failure_is_an_opaque_json_500(page, monkeypatch):
    def broken():
        raise RuntimeError("secret internals")

    monkeypatch.setattr(page.models, "models", broken)
    status, _, body = call(page, "/api/models")
    assert status == 500 and body["error"]["type"] == "InternalError"
    assert "secret" not in json.dumps(body) and "Traceback" not in json.dumps(body)


def test_edge_serve_ui_serves_until_sigterm(ui_triton):
    port = free_ports(1)[0]
    process = subprocess.Popen([sys.executable, "-m", "orinkit.cli.serve", "ui", "--url", ui_triton.command.grpc_url,
                                "--http-url", ui_triton.command.http_url, "--port", str(port)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = process.stdout.readline()
        assert f"on http://127.0.0.1:{port}/" in first, first + process.stderr.read()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/api/models")
        assert connection.getresponse().status == 200
        connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "GET /api/models 200" in err


def test_importing_the_package_stays_light():
    code = ("import sys, orinkit.ui; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tritonclient', 'grpc', 'numpy', 'torch', 'onnxruntime', 'PIL', 'http')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
