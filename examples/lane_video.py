"""Lanes on a video: a road drive rendered here, streamed through the ``lane_detection`` ensemble by edge-stream's
pipeline, the lanes drawn on an H.264 MP4 and written as JSON lines, each frame scored against its true lanes.

Uses the lane weights that ship with orinkit (random weights, and an F1 near 0, where none ship yet). The same
run from the command line, once the ensemble is served::

    edge-stream road.mp4 --model lane_detection --save lanes.mp4 --results lanes.jsonl

    python examples/lane_video.py [--work DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _runner import run_example

from orinkit.client import Client
from orinkit.lanes.export import export_lane_onnx
from orinkit.lanes.model import build_lane_model, show_random_lanes
from orinkit.lanes.repository import build_lane_repository
from orinkit.lanes.road_video import road_truth, write_road_video
from orinkit.lanes.video import LaneAdapter, lane_f1
from orinkit.lanes.weights import has_shipped_weights
from orinkit.server.local import start_on_free_ports
from orinkit.video.mp4 import Mp4Sink
from orinkit.video.pipeline import Pipeline
from orinkit.video.sinks import JsonLinesSink

FRAMES = 90


def run(work: Path) -> dict:
    trained = has_shipped_weights()
    model = build_lane_model() if trained else show_random_lanes(build_lane_model(random_weights=True))
    print(f"lane model: {'the shipped weights' if trained else 'random weights (no trained weights ship yet)'}")
    onnx = export_lane_onnx(model, work / "lane.onnx", dynamic_batch=True)
    build_lane_repository(work / "models", onnx, runtime="python-onnxruntime", progress=print)
    video = work / "road.mp4"
    write_road_video(video, frames=FRAMES, seed=0)
    print(f"rendered {FRAMES} frames of a road drive to {video} (true lanes in {video.stem}.lanes.jsonl)")
    server = start_on_free_ports(work / "models", work / "server.log")
    try:
        with Client(server.command.grpc_url, "lane_detection") as client:
            adapter = LaneAdapter()
            results = JsonLinesSink(work / "lanes.jsonl")
            summary = Pipeline([str(video)], client, adapter,
                               sinks=[results, Mp4Sink(work / "lanes.mp4", draw=adapter.draw)]).run()
    finally:
        server.stop()
    stats = summary.stats
    latency = stats["latency_ms_overall"]
    print(f"answered {stats['answered']} of {stats['read']} frames at {stats['fps_overall']:.1f} FPS, "
          f"capture→answer p50 {latency['p50']:.0f} ms, p95 {latency['p95']:.0f} ms")
    lines = (work / "lanes.jsonl").read_text().splitlines()
    score = lane_f1([json.loads(line) for line in lines], road_truth(video))
    print(f"lanes against the truth: {score.describe()}")
    print(f"wrote {work / 'lanes.mp4'} (lanes drawn) and {work / 'lanes.jsonl'}")
    return {"trained": trained, "read": stats["read"], "answered": stats["answered"], "lines": len(lines),
            "f1": score.f1, "video": str(work / "lanes.mp4")}


def main(argv=None, facts: dict | None = None) -> int:
    return run_example(__doc__, run, lambda m: m["answered"] == m["read"] == FRAMES and m["lines"] == FRAMES,
                       argv, facts, prefix="lane-video")


if __name__ == "__main__":
    sys.exit(main())
