"""The device page in a real browser (Debian's chromium driven by Playwright) against a real tritonserver: models
listed READY, a digit classified, a road's lanes drawn on the canvas (read back pixel by pixel), control, errors
shown, the token. Never skipped: without chromium these tests fail and say how to install it."""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT
from playwright.sync_api import expect, sync_playwright
from ui_fixtures import (
    CONTROLLED,
    RAW_PIXELS,
    UINT8_CLASSIFIER,
    artifacts_folder,
    digit_png,
    make_page,
    road_png,
    solid_jpeg,
    solid_png,
    start_triton,
    ui_repository,
)

CHROMIUM = os.environ.get("ORINKIT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
TOKEN = "browser-test-token-0123456789"
LANE = [255, 0, 0, 255]  # app.js draws lanes in rgb(255,0,0), 4 px wide
# What a request the test makes fail on purpose leaves in the console; nothing else may appear there.
README_SHOT = ROOT / "docs" / "ui.png"
FAILED_REQUEST = "Failed to load resource: the server responded with a status of"


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM} (env ORINKIT_CHROMIUM): `make test` installs it "
                    "(apt-get install chromium); Playwright's own browser download is never used")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def ui_triton(triton_server_factory, tmp_path_factory):
    return start_triton(triton_server_factory, tmp_path_factory)


@pytest.fixture(scope="module")
def site(ui_triton, tmp_path_factory):
    server = make_page(ui_triton, repository=ui_repository(tmp_path_factory), allow_control=True)
    yield server
    server.stop()


# Reported by the page itself: Chromium's console line for a CSP refusal does not always say what was refused.
WATCH_CSP = """document.addEventListener("securitypolicyviolation", (e) => console.error(
    `CSP violation: ${e.effectiveDirective} refused ${e.blockedURI || "(inline)"} at ${e.sourceFile}:${e.lineNumber}` +
    (e.sample ? ` (${e.sample})` : "")));"""


class Tab:
    """A fresh browser context and page that records every console error (CSP violations included) and uncaught
    exception. The ``tab`` fixture fails the test at teardown on any the test did not announce with ``expect``."""

    def __init__(self, browser) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        # Init scripts run before the page's own, whatever its CSP; every page of the context is watched.
        self.context.add_init_script(WATCH_CSP)
        self.errors: list[str] = []
        self.expected: list[tuple[str, int]] = []
        self.context.on("page", self._watch)
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)

    def _watch(self, page) -> None:
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" or "Content Security Policy"
                in m.text else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def expect(self, prefix: str, count: int) -> None:
        """``count`` console errors starting with ``prefix`` are this test's doing (a request it makes fail)."""
        self.expected.append((prefix, count))

    def unexpected(self, *allowed: str) -> list[str]:
        allowed = allowed + tuple(prefix for prefix, _ in self.expected)
        return [e for e in self.errors if not any(e.startswith(a) for a in allowed)]

    def check(self) -> None:
        assert self.unexpected() == [], self.errors
        for prefix, count in self.expected:
            assert sum(e.startswith(prefix) for e in self.errors) == count, (prefix, count, self.errors)


@pytest.fixture
def tab(browser):
    opened = Tab(browser)
    yield opened
    opened.context.close()
    opened.check()


def shoot(page, name: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    folder = artifacts_folder()
    if folder is not None:
        shutil.copy(path, folder / path.name)
    return path


def state_of(page, model: str):
    return page.locator(f'#models tr[data-model="{model}"] .state')


def try_file(page, model: str, name: str, data: bytes, mime: str = "image/png"):
    page.select_option("#try-model", model)
    page.set_input_files("#try-file", files=[{"name": name, "mimeType": mime, "buffer": data}])
    with page.expect_response(lambda r: "/api/try?" in r.url) as response:
        page.click("#try-run")
    return response.value


def test_the_page_lists_the_models_ready_and_charts_the_board(tab, site, tmp_path):
    page = tab.page
    page.goto(site.address)
    for model in ("mnist", "lane_detection", CONTROLLED):
        expect(state_of(page, model)).to_have_text("READY")
    assert page.locator("#try-model option").all_text_contents()[:1] != []
    choices = [o.get_attribute("value") for o in page.locator("#try-model option").all()]
    assert {"mnist", "lane_detection"} <= set(choices) and CONTROLLED not in choices, "only image models"
    assert "source: proc" in page.text_content("#board-source") or "tegrastats" in page.text_content("#board-source")
    # Two board polls (2 s apart) draw the memory sparkline: some pixel of the canvas is no longer blank.
    drawn = """() => {
        const c = document.getElementById('chart-memory');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        for (let i = 3; i < d.length; i += 4) if (d[i]) return true;
        return false;
    }"""
    deadline = time.monotonic() + 15
    while not page.evaluate(drawn):  # polled from here: the page's CSP forbids the eval wait_for_function uses
        assert time.monotonic() < deadline, "the memory chart stayed blank"
        page.wait_for_timeout(250)
    assert page.locator("#legend-memory").text_content().startswith("used ")
    assert page.locator("#error").is_hidden()
    shoot(page, "models", tmp_path)
    assert tab.unexpected() == []


def test_a_digit_gets_its_class(tab, site, tmp_path):
    page = tab.page
    page.goto(site.address)
    page.wait_for_selector('#try-model option[value="mnist"]', state="attached")
    png, digit = digit_png(7)
    response = try_file(page, "mnist", "digit.png", png)
    assert response.status == 200 and response.json()["answer"]["top"][0]["index"] == digit
    first = page.locator("ol.classes li").first
    first.wait_for()
    assert f"(class {digit})" in first.text_content()
    assert "mnist: classes" in page.text_content("#try-summary")
    assert page.locator("#try-downloads button").all_text_contents() == ["scores.npy", "class_ids.npy"]
    with page.expect_download() as download:
        page.click("#try-downloads button >> nth=1")
    assert download.value.suggested_filename == "class_ids.npy"
    shoot(page, "digit", tmp_path)
    assert tab.unexpected() == []


def _distance(point, lanes) -> float:
    """Pixels from ``point`` to the nearest segment of any lane."""
    best = math.inf
    for lane in lanes:
        for (x1, y1), (x2, y2) in zip(lane["points"], lane["points"][1:]):
            dx, dy = x2 - x1, y2 - y1
            t = max(0.0, min(1.0, ((point[0] - x1) * dx + (point[1] - y1) * dy) / (dx * dx + dy * dy or 1)))
            best = min(best, math.hypot(point[0] - x1 - t * dx, point[1] - y1 - t * dy))
    return best


def test_a_road_gets_its_lanes_drawn_on_the_image(tab, site, tmp_path):
    page = tab.page
    page.goto(site.address)
    page.wait_for_selector('#try-model option[value="lane_detection"]', state="attached")
    response = try_file(page, "lane_detection", "road.png", road_png(640, 360, seed=3))
    answer = response.json()["answer"]
    assert response.status == 200 and answer["lanes"], answer
    page.wait_for_selector("#try-canvas:not([hidden])")
    assert page.eval_on_selector("#try-canvas", "c => [c.width, c.height]") == [640, 360]
    pixel = "([x, y]) => Array.from(document.getElementById('try-canvas').getContext('2d')" \
            ".getImageData(x, y, 1, 1).data)"
    inside = [(x, y) for lane in answer["lanes"] for x, y in lane["points"][1:-1] if 2 <= x < 638 and 2 <= y < 358]
    assert inside, "no lane point inside the image"
    for x, y in inside[:: max(1, len(inside) // 5)]:
        assert page.evaluate(pixel, [int(x), int(y)]) == LANE, (x, y)
    # Somewhere well away from every lane the picture shows through: the road's own colours, never the lane's.
    far = next((x, y) for y in range(5, 360, 20) for x in range(5, 640, 20) if _distance((x, y), answer["lanes"]) > 8)
    assert page.evaluate(pixel, list(far)) != LANE
    assert f"{len(answer['lanes'])} lane(s)" in page.text_content("#try-answer")
    shot = shoot(page, "lanes", tmp_path)
    # The README's picture: made when missing (or asked for), so that a test run leaves the checkout unchanged.
    if not README_SHOT.exists() or os.environ.get("ORINKIT_UPDATE_DOCS"):
        README_SHOT.parent.mkdir(exist_ok=True)
        shutil.copy(shot, README_SHOT)
    assert tab.unexpected() == []


def test_a_classifier_taking_the_encoded_file_as_uint8_gets_its_label(tab, site, tmp_path):
    page = tab.page
    page.goto(site.address)
    option = page.locator(f'#try-model option[value="{UINT8_CLASSIFIER}"]')
    option.wait_for(state="attached")
    assert option.text_content() == f"{UINT8_CLASSIFIER} (encoded file as UINT8)"
    response = try_file(page, UINT8_CLASSIFIER, "red.jpg", solid_jpeg((230, 20, 10)), mime="image/jpeg")
    assert response.status == 200, response.text()
    first = page.locator("ol.classes li").first
    first.wait_for()
    assert first.text_content().startswith("red (class 0)")
    assert "np.fromfile" in page.text_content("#try-notes")
    shoot(page, "uint8-classifier", tmp_path)


def test_a_uint8_input_that_wants_raw_pixels_shows_why_it_cannot_be_tried(tab, site):
    page = tab.page
    page.goto(site.address)
    page.wait_for_selector(f'#try-model option[value="{RAW_PIXELS}"]', state="attached")
    response = try_file(page, RAW_PIXELS, "black.png", solid_png((0, 0, 0)))
    assert response.status == 400
    page.wait_for_selector("#error:not([hidden])")
    shown = page.text_content("#error")
    assert "does not take an encoded image" in shown and "expected 784 raw pixels" in shown, shown
    tab.expect(FAILED_REQUEST, 1)


def test_a_policy_violation_fails_the_tab(browser, site):
    """The fixture's watch works: an inline script (what the policy exists to stop) is reported by its directive."""
    tab = Tab(browser)
    try:
        tab.page.goto(site.address)
        tab.page.evaluate("""() => { const s = document.createElement("script"); s.textContent = "window.ran = 1";
                                     document.body.append(s); }""")
        deadline = time.monotonic() + 10
        while not any("CSP violation" in e for e in tab.errors):
            assert time.monotonic() < deadline, tab.errors
            tab.page.wait_for_timeout(100)
        assert tab.page.evaluate("window.ran === undefined"), "the inline script ran"
    finally:
        tab.context.close()
    assert any(e.startswith("CSP violation: script-src-elem refused inline") for e in tab.errors), tab.errors
    with pytest.raises(AssertionError):
        tab.check()


def test_a_corrupt_file_shows_the_servers_message(tab, site):
    page = tab.page
    page.goto(site.address)
    page.wait_for_selector('#try-model option[value="mnist"]', state="attached")
    response = try_file(page, "mnist", "broken.png", b"\x89PNG\r\n\x1a\n this is not an image")
    assert response.status == 400
    page.wait_for_selector("#error:not([hidden])")
    assert "not an image Pillow can read" in page.text_content("#error")
    assert page.locator("#try-result").is_hidden()
    tab.expect(FAILED_REQUEST, 1)


def test_control_unloads_and_loads_a_model(tab, site, tmp_path):
    page = tab.page
    page.goto(site.address)
    row = page.locator(f'#models tr[data-model="{CONTROLLED}"]')
    row.locator('button[data-action="unload"]').click()
    expect(state_of(page, CONTROLLED)).to_have_text("UNAVAILABLE")
    assert "unloaded" in row.locator(".reason").first.text_content()
    shoot(page, "unloaded", tmp_path)
    row.locator('button[data-action="load"]').click()
    expect(state_of(page, CONTROLLED)).to_have_text("READY")
    assert tab.unexpected() == []


def test_without_control_the_buttons_are_not_shown(tab, ui_triton):
    plain = make_page(ui_triton)
    try:
        page = tab.page
        page.goto(plain.address)
        state_of(page, "mnist").wait_for()
        assert page.locator("#models button").count() == 0 and page.locator("th.control-only").is_hidden()
        assert "Control is off" in page.text_content("#models-note")
        assert tab.unexpected() == []
    finally:
        plain.stop()


def test_off_loopback_the_page_needs_its_token(tab, ui_triton):
    guarded = make_page(ui_triton, host="127.0.0.2", token=TOKEN)
    try:
        page = tab.page
        page.goto(f"{guarded.address}?token={TOKEN}")
        expect(state_of(page, "mnist")).to_have_text("READY")
        assert "token" not in page.url, "the token is taken out of the address bar"
        assert page.evaluate("sessionStorage.getItem('orinkit-token')") == TOKEN
        without = page.evaluate("fetch('/api/models').then(async r => [r.status, await r.json()])")
        assert without[0] == 401 and without[1]["error"]["message"] == "this page needs its token"
        wrong = page.evaluate("fetch('/api/models', {headers: {Authorization: 'Bearer nope'}}).then(r => r.status)")
        assert wrong == 401
        tab.expect(FAILED_REQUEST, 2)
        # A new tab without the token in its URL gets nothing, and says why (its polls fail: one line each).
        other = Tab(tab.context.browser)
        other.page.goto(guarded.address)
        other.page.wait_for_selector("#error:not([hidden])")
        assert "this page needs its token" in other.page.text_content("#error")
        other.context.close()
        assert other.unexpected(FAILED_REQUEST) == [], other.errors
    finally:
        guarded.stop()


def test_the_live_view_shows_the_stream_and_its_figures(tab, ui_triton, tmp_path):
    """A pipeline's live view beside the models, on a page that needs its token (the <img> carries it)."""
    import numpy as np

    from orinkit.video import Frame, Result
    from orinkit.video.live import LiveView

    view = LiveView()
    live = make_page(ui_triton, host="127.0.0.2", token=TOKEN, live=view)
    image = np.empty((360, 640, 3), np.uint8)
    image[:, :320] = (200, 40, 20)  # BGR: blue on the left
    image[:, 320:] = (30, 160, 230)  # orange on the right
    stop = threading.Event()

    def camera():
        index = 0
        while not stop.is_set():
            now = time.time()
            view.write(Result("rtsp://camera/1", Frame(index, image, now - 0.04), None, {}, now - 0.03, now))
            view.stats({"fps": 29.7, "latency_ms": {"p50": 41.0, "p95": 48.5, "p99": 52.25}, "read": 120,
                        "answered": 100, "dropped": 20, "sources": {"rtsp://camera/1": {"state": "running",
                                                                                         "fps": 29.7, "dropped": 20}}})
            index += 1
            stop.wait(0.05)

    writer = threading.Thread(target=camera, daemon=True)
    writer.start()
    try:
        page = tab.page
        page.goto(f"{live.address}?token={TOKEN}")
        page.wait_for_selector("#live-panel:not([hidden])")
        expect(page.locator("#live-fps")).to_have_text("29.7")
        expect(page.locator("#live-p95")).to_have_text("48.5 ms")
        expect(page.locator("#live-dropped")).to_have_text("20")
        expect(page.locator('#live-sources tr[data-source="rtsp://camera/1"] .source-state')).to_have_text("running")
        deadline = time.monotonic() + 15
        while page.eval_on_selector("#live-image", "i => i.naturalWidth") != 640:
            assert time.monotonic() < deadline, "the MJPEG stream never showed"
            page.wait_for_timeout(100)
        pixels = page.eval_on_selector("#live-image", """i => {
            const c = document.createElement('canvas'); c.width = 640; c.height = 360;
            const x = c.getContext('2d'); x.drawImage(i, 0, 0);
            return [Array.from(x.getImageData(160, 180, 1, 1).data), Array.from(x.getImageData(480, 180, 1, 1).data)];
        }""")
        for got, want in zip(pixels, ([20, 40, 200, 255], [230, 160, 30, 255])):
            assert max(abs(a - b) for a, b in zip(got, want)) <= 6, (got, want)
        expect(state_of(page, "mnist")).to_have_text("READY")
        assert page.locator("#error").is_hidden()
        shoot(page, "live", tmp_path)
        assert tab.unexpected() == []
    finally:
        stop.set()
        writer.join()
        view.close()
        live.stop()
