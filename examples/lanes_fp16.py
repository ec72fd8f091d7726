"""LaneATT with FP16 input and output end to end: half-precision frames in, half-precision proposals out.

Exports LaneATT with FP16 I/O (random weights: the example is about the data types, not the lanes), lays out
the ``lane_detection`` ensemble (its image step then writes FP16), checks every FP16 tensor in the configs, sends
a drawn road through the ensemble with ``LaneDetector``, and sends an FP16 tensor straight to ``lane_model`` to
show what comes back.

    python examples/lanes_fp16.py [--work DIR]
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _runner import run_example
from PIL import Image
from tritonclient.grpc import model_config_pb2 as mc

from orinkit.client import Client
from orinkit.lanes.client import LaneDetector
from orinkit.lanes.export import export_lane_onnx
from orinkit.lanes.model import build_lane_model, show_random_lanes
from orinkit.lanes.repository import MODEL, PRE, build_lane_repository
from orinkit.lanes.synth import render_road
from orinkit.repo.pbtxt import read_config
from orinkit.server.local import start_on_free_ports

SEED = 0


def config_dtypes(repo: Path) -> dict[str, str]:
    """The dtypes the written configs declare (what tritonserver will enforce), read back from disk."""
    model, pre = read_config(repo / MODEL / "config.pbtxt"), read_config(repo / PRE / "config.pbtxt")
    tensor = next(t for t in pre.output if t.name == "TENSOR")
    return {"model input": mc.DataType.Name(model.input[0].data_type),
            "model output": mc.DataType.Name(model.output[0].data_type),
            "image step output": mc.DataType.Name(tensor.data_type)}


def fp16_frame(png: bytes) -> np.ndarray:
    """What the image step computes, here in the client: BGR, 640x360 bilinear, /255, CHW, FP16, batch of 1."""
    with Image.open(io.BytesIO(png)) as image:
        resized = image.convert("RGB").resize((640, 360), Image.BILINEAR)
    bgr = np.asarray(resized, dtype=np.float32)[:, :, ::-1] / 255
    return np.ascontiguousarray(bgr.transpose(2, 0, 1)[None]).astype(np.float16)


def run(work: Path) -> dict:
    torch.manual_seed(SEED)
    # Random weights: the lanes below show the FP16 plumbing, not what a trained model sees. show_random_lanes
    # makes the random lanes long enough to survive decoding.
    model = show_random_lanes(build_lane_model("resnet18", random_weights=True))
    onnx = export_lane_onnx(model, work / "laneatt_fp16.onnx", dynamic_batch=True, fp16_io=True)
    repo = work / "models"
    build_lane_repository(repo, onnx, runtime="python-onnxruntime", progress=lambda m: print(m))
    dtypes = config_dtypes(repo)
    for what, kind in dtypes.items():
        print(f"{what:18} {kind}")

    png = render_road(SEED, 1280, 720).encode("PNG")
    server = start_on_free_ports(repo, work / "tritonserver.log")
    try:
        url = server.command.grpc_url
        with LaneDetector(url) as detect:
            lanes = detect(png)  # the first call also reads the model's config: not timed
            latencies = []
            for _ in range(10):
                started = time.perf_counter()
                detect(png)
                latencies.append((time.perf_counter() - started) * 1000)
        # The model alone, fed the FP16 tensor a client would make itself (skipping the image step).
        with Client(url, MODEL) as lane_model:
            served_input = lane_model.inputs[0].dtype
            proposals = lane_model(fp16_frame(png))
    finally:
        server.stop()

    print(f"lane_detection on a drawn 1280x720 road (PNG, {len(png) // 1024} kB), random weights:")
    for index, lane in enumerate(lanes):
        (x0, y0), (x1, y1) = lane.points[0], lane.points[-1]
        print(f"  lane {index}: score {lane.score:.3f}, {len(lane.points)} points from ({x0:.0f}, {y0:.0f}) "
              f"to ({x1:.0f}, {y1:.0f})")
    print(f"  latency over 10 requests: median {statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms")
    print(f"lane_model directly: input {served_input} [1, 3, 360, 640] -> proposals {proposals.dtype} "
          f"{list(proposals.shape)}, all finite: {bool(np.isfinite(proposals).all())}")
    return {"config_dtypes": dtypes, "lanes": len(lanes), "median_ms": statistics.median(latencies),
            "served_input_dtype": served_input, "direct_output_dtype": str(proposals.dtype),
            "direct_output_shape": tuple(proposals.shape), "direct_output_finite": bool(np.isfinite(proposals).all())}


def main(argv: list[str] | None = None, facts: dict | None = None) -> int:
    return run_example(__doc__, run, lambda m: (set(m["config_dtypes"].values()) == {"TYPE_FP16"}
                           and m["direct_output_dtype"] == "float16"),
                       argv, facts, prefix="lanes-fp16")


if __name__ == "__main__":
    sys.exit(main())
