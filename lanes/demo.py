"""The main job: LaneATT from torch to lanes over gRPC, end to end on this machine's tritonserver.

    python -m orinkit.lanes.demo [--image road.jpg] [--checkpoint laneatt.pt] [--out lanes.png] [--runs 50]

Builds the model (random weights unless --checkpoint), exports and converts it with edge-convert (FP16 gate),
lays out the lane_detection ensemble, starts tritonserver, sends a road image (drawn here, or --image), prints
the lanes and the latency, and writes an overlay PNG.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from orinkit.core.errors import OrinkitError


def _step(message: str) -> float:
    print(message, flush=True)
    return time.perf_counter()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=Path, default=None, help="a road image (JPEG/PNG); default: drawn here")
    parser.add_argument("--checkpoint", type=Path, default=None, help="a reference LaneATT checkpoint (.pt)")
    parser.add_argument("--backbone", default="resnet18", choices=["resnet18", "resnet34"])
    parser.add_argument("--out", type=Path, default=Path("lanes.png"), help="overlay PNG to write")
    parser.add_argument("--runs", type=int, default=30, help="timed requests")
    parser.add_argument("--work", type=Path, default=None, help="keep the ONNX files and repository here")
    parser.add_argument("--conf-threshold", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights (without --checkpoint)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="orinkit-lanes-"))
    try:
        return _run(args, work)
    except OrinkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(args, work: Path) -> int:
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx
    from orinkit.lanes.client import LaneDetector
    from orinkit.lanes.draw import overlay, road_image
    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.model import build_lane_model, show_random_lanes
    from orinkit.lanes.postprocess import PostprocessOptions
    from orinkit.lanes.repository import build_lane_repository
    from orinkit.server import TritonProcess
    from orinkit.server.testing import start_on_free_ports

    started = _step(f"[1/5] LaneATT ({args.backbone}) in torch")
    import torch

    torch.manual_seed(args.seed)  # the same random weights, so the same lanes, on every run
    model = build_lane_model(args.backbone, checkpoint=args.checkpoint)
    if model.weights_are_random:
        show_random_lanes(model)
        print("      weights are RANDOM (no --checkpoint): the lanes below show that the pipeline works, not what a "
              "trained model sees (the length head's bias is set so that random lanes are long enough to draw)")
    onnx_path = export_lane_onnx(model, work / "laneatt.onnx", dynamic_batch=True)
    print(f"      exported {onnx_path} and {onnx_path.stem}.anchors.npy in {time.perf_counter() - started:.1f} s")

    started = _step("[2/5] edge-convert: validate, simplify, FP16 accuracy gate")
    shapes = {"image": (1, 3, 360, 640)}
    result = convert_onnx(onnx_path, work / "laneatt.edge", ConvertOptions(
        min_shapes=shapes, opt_shapes=shapes, max_shapes={"image": (4, 3, 360, 640)}, samples=4), force=True,
        progress=lambda m: print("      " + m) if m.startswith("  ") or "TensorRT" in m else None)
    artifact = result.artifacts.get("plan") or result.artifacts["fp32_onnx"]
    print(f"      {'engine built' if result.engine_built else 'no TensorRT here: serving the ONNX model'} "
          f"in {time.perf_counter() - started:.1f} s")

    started = _step("[3/5] the lane_detection ensemble")
    repository = work / "models"
    build_lane_repository(repository, artifact, postprocess=PostprocessOptions(conf_threshold=args.conf_threshold),
                          progress=lambda m: print("      " + m))

    started = _step("[4/5] tritonserver")
    server: TritonProcess = start_on_free_ports(repository, work / "tritonserver.log")
    try:
        print(f"      ready in {time.perf_counter() - started:.1f} s on {server.command.grpc_url} "
              f"(log {work / 'tritonserver.log'})")
        image = args.image.read_bytes() if args.image else road_image()
        _step(f"[5/5] lanes for {'the drawn road' if args.image is None else args.image}")
        with LaneDetector(server.command.grpc_url) as detect:
            lanes = detect(image)
            latencies = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                detect(image)
                latencies.append((time.perf_counter() - t0) * 1000)
    finally:
        server.stop()
    for index, lane in enumerate(lanes):
        first, last = lane.points[0], lane.points[-1]
        print(f"      lane {index}: score {lane.score:.3f}, {len(lane.points)} points from "
              f"({first[0]:.0f}, {first[1]:.0f}) to ({last[0]:.0f}, {last[1]:.0f})")
    if not lanes:
        print("      no lane scored above the threshold")
    ordered = sorted(latencies)
    print(f"      latency over {args.runs} requests (image bytes in, lanes out): median "
          f"{statistics.median(ordered):.1f} ms, p90 {ordered[int(0.9 * (len(ordered) - 1))]:.1f} ms")
    overlay(image, lanes, args.out)
    print(f"wrote {args.out}" + (" (random weights)" if model.weights_are_random else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
