"""The live view on the device page, through the real page server (UiServer; no Triton is needed for the view, so
none is started): /live.mjpg read back by PyAV's MJPEG demuxer (the frames decoded and compared pixel by pixel with
what the pipeline wrote), /api/live's figures, the token rule, and streams that end with the view or the page."""

from __future__ import annotations

import http.client
import json
import threading
import time

import av
import numpy as np
import pytest

from orinkit.server.ports import free_ports
from orinkit.ui import UiServer
from orinkit.video import Frame, Result
from orinkit.video.live import BOUNDARY, LiveView

W, H = 640, 360
BITS = 16
TOKEN = "live-view-test-token-0123456789"


def picture(i: int) -> np.ndarray:
    """A 640x360 frame whose index is written in its pixels (16 blocks, black or white: one bit each), over a
    smooth background and a box that moves, so a decoded frame says which one it is."""
    y, x = np.mgrid[0:H, 0:W]
    image = np.empty((H, W, 3), np.uint8)
    image[..., 0] = (x + 4 * i) % 256
    image[..., 1] = y * 255 // (H - 1)
    image[..., 2] = 80
    left = (i * 10) % (W - 80)
    image[200:280, left:left + 80] = (0, 64, 255)
    for bit in range(BITS):
        image[0:40, bit * 40:(bit + 1) * 40] = 255 if (i >> bit) & 1 else 0
    return image


def index_of(image: np.ndarray) -> int:
    return sum(1 << bit for bit in range(BITS) if image[10:30, bit * 40 + 10:bit * 40 + 30].mean() > 128)


def mae(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def write(view: LiveView, i: int) -> None:
    now = time.time()
    view.write(Result("rtsp://camera/1", Frame(i, picture(i), now - 0.05), answer=None, record={},
                      sent=now - 0.04, answered=now))


class Camera:
    """Writes frame after frame into the view (about 50 a second) until stopped, as the pipeline's sink thread."""

    def __init__(self, view: LiveView) -> None:
        self.view, self.written, self._stop = view, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            write(self.view, self.written)
            self.written += 1
            self._stop.wait(0.02)

    def __enter__(self) -> Camera:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()


def lonely_page(**options) -> UiServer:
    """A page server whose Triton is not there: the live view needs none."""
    grpc_port, http_port = free_ports(2)
    return UiServer(f"127.0.0.1:{grpc_port}", http_url=f"http://127.0.0.1:{http_port}", port=0,
                    board_interval_s=0.5, **options).start()


@pytest.fixture
def view():
    live = LiveView(quality=80)
    yield live
    live.close()


@pytest.fixture
def page(view):
    server = lonely_page(live=view)
    yield server
    server.stop()


def get(page, path, headers=None, host=None):
    connection = http.client.HTTPConnection(host or page.host, page.port, timeout=30)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        kind = response.getheader("Content-Type", "")
        return response.status, response, json.loads(data) if kind.startswith("application/json") else data
    finally:
        connection.close()


def test_the_mjpeg_stream_decodes_to_the_frames_written(page, view):
    with Camera(view) as camera:
        container = av.open(f"{page.address}live.mjpg", format="mpjpeg", timeout=30)
        try:
            decoded = []
            for frame in container.decode(video=0):
                decoded.append(frame.to_ndarray(format="bgr24"))
                if len(decoded) == 8:
                    break
        finally:
            container.close()
    indices = [index_of(image) for image in decoded]
    assert indices == sorted(set(indices)), "each part a newer frame"
    assert indices[-1] < camera.written
    for image, i in zip(decoded, indices):
        assert image.shape == (H, W, 3)
        assert mae(image, picture(i)) < 3.0, "JPEG at quality 80 of the frame written"


def test_each_part_is_a_jpeg_with_its_length_under_the_pages_policy(page, view):
    write(view, 7)
    connection = http.client.HTTPConnection(page.host, page.port, timeout=30)
    try:
        connection.request("GET", "/live.mjpg")
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("Content-Type") == f"multipart/x-mixed-replace; boundary={BOUNDARY}"
        assert "img-src 'self'" in response.getheader("Content-Security-Policy")
        assert response.getheader("Cache-Control") == "no-store" and response.getheader("Content-Length") is None
        assert response.getheader("Transfer-Encoding") == "chunked"
        assert response.readline() == f"--{BOUNDARY}\r\n".encode()
        headers = {}
        while (line := response.readline()) != b"\r\n":
            key, _, value = line.decode().partition(":")
            headers[key.lower()] = value.strip()
        assert headers["content-type"] == "image/jpeg"
        jpeg = response.read(int(headers["content-length"]))
        assert jpeg[:2] == b"\xff\xd8" and jpeg[-2:] == b"\xff\xd9" and response.read(2) == b"\r\n"
        write(view, 8)  # the next frame arrives as the next part
        assert response.readline() == f"--{BOUNDARY}\r\n".encode()
    finally:
        connection.close()


def test_api_live_reports_the_view_and_the_pipelines_figures(page, view):
    status, _, body = get(page, "/api/live")
    assert status == 200 and body["live"] is True and body["frames"] == 0 and body["size"] is None
    assert body["stats"] is None
    write(view, 3)
    view.stats({"fps": 29.7, "latency_ms": {"p50": 41.0, "p95": 48.5, "p99": float("nan")}, "read": 120,
                "answered": 100, "dropped": 20, "sources": {"rtsp://camera/1": {"state": "running"}},
                "window": (1, 2), "count": np.int64(5)})
    status, _, body = get(page, "/api/live")
    assert status == 200 and body["frames"] == 1 and body["size"] == [W, H] and body["closed"] is False
    assert body["last"]["source"] == "rtsp://camera/1" and body["last"]["frame"] == 3
    assert body["last"]["latency_ms"] == pytest.approx(50.0, abs=0.2)
    stats = body["stats"]
    assert stats["latency_ms"] == {"p50": 41.0, "p95": 48.5, "p99": None}, "NaN (no answers yet) is null"
    assert (stats["fps"], stats["dropped"], stats["count"], stats["window"]) == (29.7, 20, 5, [1, 2])
    assert stats["sources"]["rtsp://camera/1"]["state"] == "running"


def test_closing_the_view_ends_the_streams(page, view):
    write(view, 1)
    container = av.open(f"{page.address}live.mjpg", format="mpjpeg", timeout=30)
    try:
        frames = container.decode(video=0)
        assert index_of(next(frames).to_ndarray(format="bgr24")) == 1, "the newest frame at once"
        view.close()
        assert list(frames) == [], "the stream ends with the view"
    finally:
        container.close()
    assert get(page, "/api/live")[2]["closed"] is True


def test_stopping_the_page_ends_a_stream_waiting_for_frames(view):
    server = lonely_page(live=view)
    write(view, 1)
    connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
    connection.request("GET", "/live.mjpg")
    response = connection.getresponse()
    response.readline()
    server.stop()  # no frame comes; the stream must not hold its thread forever
    rest = response.read()
    connection.close()
    assert rest.endswith(b"\xff\xd9\r\n"), "the first part whole, then the end of the stream"


def test_a_page_without_a_view_says_so():
    server = lonely_page()
    try:
        status, _, body = get(server, "/api/live")
        assert (status, body) == (200, {"live": False})
        status, _, body = get(server, "/live.mjpg")
        assert status == 404 and body["error"]["message"] == "this page has no live view" and body["error"]["hint"]
    finally:
        server.stop()


def test_off_loopback_the_stream_needs_the_token_as_a_header_or_in_its_url(view):
    server = lonely_page(live=view, host="127.0.0.2", token=TOKEN)
    try:
        write(view, 5)
        assert get(server, "/live.mjpg")[0] == 401
        assert get(server, "/live.mjpg?token=wrong-token-0123456789")[0] == 401
        assert get(server, "/api/live")[0] == 401
        assert get(server, "/api/live?token=" + TOKEN)[0] == 401, "the API takes the header only"
        assert get(server, "/api/live", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
        for path, headers in ((f"/live.mjpg?token={TOKEN}", {}), ("/live.mjpg", {"Authorization": f"Bearer {TOKEN}"})):
            connection = http.client.HTTPConnection(server.host, server.port, timeout=30)
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            assert response.status == 200 and response.readline() == f"--{BOUNDARY}\r\n".encode()
            connection.close()
    finally:
        server.stop()


def test_the_page_has_a_live_section_shown_only_with_a_view(page):
    status, _, html = get(page, "/")
    assert status == 200
    assert b'<section id="live-panel" hidden>' in html and b'<img id="live-image"' in html
    assert b"style=" not in html and b"<script>" not in html
    _, _, script = get(page, "/static/app.js")
    assert b'"/api/live"' in script and b'"/live.mjpg"' in script
