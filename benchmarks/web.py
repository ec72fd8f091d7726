"""The device page's server (``edge-serve ui``), measured in one run beside a local tritonserver.

    python benchmarks/web.py [--rounds 40] [--browse 20]

1. memory: ``edge-serve ui`` started as a real child process (``python -m orinkit.cli.serve ui``); its VmRSS
   (/proc/PID/status) at start, after one headless Chromium has shown the page for ``--browse`` seconds (the page
   polls the models and the board itself; goal: at most 60 MiB), and after one try (reported only: the first try
   loads the gRPC client, numpy and Pillow, which the page alone does without);
2. latency: one 1280x720 road PNG through the lane_detection ensemble (LaneATT with random weights, onnxruntime in
   the Python backend), ``--rounds`` rounds, each sending the same bytes as POST /api/try to that child (http.client,
   one keep-alive connection) and to LaneDetector and orinkit's Client called directly, one after the other (each
   first in turn); medians, p90 and the page's ratio to each (goal: at most 1.2x the direct call), and the page's
   own share of each try (its POST time less the inference call it timed inside), which the model's spread does
   not blur.

Chromium is Debian's (env ORINKIT_CHROMIUM, else /usr/bin/chromium), driven by Playwright.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from orinkit.client import Client
from orinkit.core.stats import percentile
from orinkit.lanes.client import LaneDetector
from orinkit.lanes.draw import road_image
from orinkit.server.local import start_on_free_ports
from orinkit.server.ports import free_ports

CHROMIUM = os.environ.get("ORINKIT_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # as tests/test_ui_browser.py
RSS_GOAL_MIB = 60.0
RATIO_GOAL = 1.2


def build_repository(work: Path) -> Path:
    """The lane ensemble of tests/test_lane_pipeline.py: random weights, a low threshold so that lanes appear."""
    import torch

    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.model import build_lane_model, show_random_lanes
    from orinkit.lanes.postprocess import PostprocessOptions
    from orinkit.lanes.repository import build_lane_repository

    torch.manual_seed(0)
    model = show_random_lanes(build_lane_model("resnet18", random_weights=True))
    onnx_path = export_lane_onnx(model, work / "laneatt.onnx", dynamic_batch=True)
    repository = work / "models"
    build_lane_repository(repository, onnx_path, runtime="python-onnxruntime",
                          postprocess=PostprocessOptions(conf_threshold=0.05, nms_threshold=50.0, top_k=4))
    return repository


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def mapped(pid: int) -> str:
    """Which of numpy's and gRPC's native libraries the process has mapped: what it imported, seen from outside."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    found = [name for name, needle in (("numpy", "/numpy/"), ("grpc", "cygrpc"), ("Pillow", "/PIL/")) if needle in maps]
    return ", ".join(found) or "none of numpy, grpc, Pillow"


def start_page(grpc_url: str, http_url: str) -> tuple[subprocess.Popen, int]:
    port = free_ports(1)[0]
    child = subprocess.Popen([sys.executable, "-m", "orinkit.cli.serve", "ui", "--url", grpc_url, "--http-url",
                              http_url, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    first = child.stdout.readline()
    if "orinkit page for" not in first:
        child.kill()
        raise RuntimeError(f"edge-serve ui did not start: {first!r}")
    return child, port


def post_try(connection: http.client.HTTPConnection, image: bytes) -> dict:
    connection.request("POST", "/api/try?model=lane_detection", body=image,
                       headers={"Content-Type": "application/octet-stream"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"POST /api/try answered {response.status}: {answer}")
    return answer


def browse(address: str, seconds: float) -> int:
    """Show the page in one headless Chromium for ``seconds``; the number of errors its console logged."""
    from playwright.sync_api import sync_playwright

    errors = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(address)
            page.locator('#models tr[data-model="lane_detection"] .state').filter(has_text="READY").wait_for()
            page.wait_for_timeout(seconds * 1000)
        finally:
            browser.close()
    return len(errors)


def memory(child: subprocess.Popen, port: int, image: bytes, seconds: float) -> None:
    time.sleep(1.0)  # the board monitor's first samples
    at_start = rss_mib(child.pid)
    errors = browse(f"http://127.0.0.1:{port}/", seconds)
    after_page, page_libraries = rss_mib(child.pid), mapped(child.pid)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    post_try(connection, image)
    connection.close()
    after_try = rss_mib(child.pid)
    verdict = "met" if after_page <= RSS_GOAL_MIB else "missed"
    print(f"1. memory of edge-serve ui (pid {child.pid}, VmRSS in MiB):")
    print(f"   at start                                {at_start:6.1f}")
    print(f"   after one browser showed the page {seconds:g} s  {after_page:6.1f}   goal <= {RSS_GOAL_MIB:g}: "
          f"{verdict} (browser console errors: {errors}; native libraries mapped: {page_libraries})")
    print(f"   after one try                           {after_try:6.1f}   (reported only: the first try loads the "
          f"gRPC client, numpy and Pillow; mapped now: {mapped(child.pid)})")


def _line(label: str, times: list[float]) -> str:
    ordered = sorted(times)
    return f"   {label:34} median {statistics.median(ordered):7.1f} ms   p90 {percentile(ordered, 90):7.1f} ms"


def latency(grpc_url: str, port: int, image: bytes, rounds: int) -> None:
    page, detector, client, overhead = [], [], [], []
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    batch = np.array([image], dtype=np.object_)
    with LaneDetector(grpc_url) as detect, Client(grpc_url, "lane_detection") as plain:
        lanes = len(post_try(connection, image)["answer"]["lanes"])  # warm all three
        detect(image)
        plain(batch)
        answers = []
        calls = [(page, lambda: answers.append(post_try(connection, image))), (detector, lambda: detect(image)),
                 (client, lambda: plain(batch))]
        for index in range(rounds):
            # Each round starts with the next of the three: none always runs first, right after the idle gap.
            for times, call in calls[index % 3:] + calls[:index % 3]:
                started = time.perf_counter()
                call()
                times.append((time.perf_counter() - started) * 1000)
                if times is page:  # the answer carries its inference call's own time, measured inside the page
                    overhead.append(times[-1] - answers[-1]["latency_ms"])
    connection.close()
    print(f"2. latency, one 1280x720 road PNG ({len(image):,} bytes, {lanes} lanes) through lane_detection, "
          f"{rounds} rounds, the three calls one after the other in each (in turn first):")
    print(_line("POST /api/try (edge-serve ui)", page))
    print(_line("LaneDetector called directly", detector))
    print(_line("Client called directly", client))
    # Paired within each request, so the model's own spread (hundreds of ms on a shared CPU) cancels out.
    print(_line("the page's own share of each try", overhead) + "   (POST time less the inference call)")
    for label, times in (("LaneDetector", detector), ("Client", client)):
        ratio = statistics.median(page) / statistics.median(times)
        print(f"   page / {label:12} median ratio {ratio:5.3f}   goal <= {RATIO_GOAL:g}: "
              f"{'met' if ratio <= RATIO_GOAL else 'missed'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--browse", type=float, default=20.0, help="seconds the browser shows the page")
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"no chromium at {CHROMIUM} (env ORINKIT_CHROMIUM): apt-get install chromium", file=sys.stderr)
        return 2
    image = road_image(1280, 720, seed=3)
    with tempfile.TemporaryDirectory() as work:
        repository = build_repository(Path(work))
        server = start_on_free_ports(repository, Path(work) / "server.log")
        try:
            child, port = start_page(server.command.grpc_url, server.command.http_url)
            try:
                memory(child, port, image, args.browse)
                latency(server.command.grpc_url, port, image, args.rounds)
                print(f"   (edge-serve ui after the latency rounds: {rss_mib(child.pid):.1f} MiB)")
            finally:
                child.terminate()
                child.wait(timeout=30)
        finally:
            server.stop()
    print("model: LaneATT resnet18 with random weights, onnxruntime on this machine's CPU; the page server and the "
          "benchmark share this machine's cores with tritonserver")
    return 0


if __name__ == "__main__":
    sys.exit(main())
