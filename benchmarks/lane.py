"""LaneATT serving, measured side by side in one run on the local tritonserver.

    python benchmarks/lane.py [--frames 60] [--repeat 200] [--weights shipped|random|CARD.json] [--images 500]

1. post-processing time per frame at 2784 proposals: orinkit.lanes.postprocess vs the plain loop implementation
   of the reference semantics (from the tests), on the same proposals;
2. end-to-end frames/s and latency percentiles through the lane_detection ensemble (encoded image in, lanes out),
   at concurrency 1 and 4;
3. bytes sent per frame: encoded images (PNG, JPEG) vs the raw 1x3x360x640 FP32 tensor;
4. accuracy on held-out synthetic roads (1280x720, seeds no training run draws): CULane precision, recall and F1 of
   the FP32 model (onnxruntime), of its FP16 emulation (edge-convert's), and through the whole lane_detection
   ensemble on the local server, which must give exactly the in-process FP32 lanes. Goals: F1 >= 0.95 (FP32),
   FP16 within 0.005 of FP32, the ensemble identical to in-process. It needs trained weights (the shipped ones,
   or --weights CARD.json); with random weights it is skipped.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_lane_postprocess import ref_postprocess  # noqa: E402

from orinkit.core.stats import percentile  # noqa: E402
from orinkit.lanes.client import LaneDetector  # noqa: E402
from orinkit.lanes.export import export_lane_onnx  # noqa: E402
from orinkit.lanes.model import build_lane_model, show_random_lanes  # noqa: E402
from orinkit.lanes.postprocess import PostprocessOptions, postprocess  # noqa: E402
from orinkit.lanes.repository import build_lane_repository  # noqa: E402
from orinkit.lanes.synth import render_road  # noqa: E402
from orinkit.server.local import start_on_free_ports  # noqa: E402


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def postprocessing(proposals: np.ndarray, repeat: int) -> None:
    options = PostprocessOptions(conf_threshold=0.5, nms_threshold=50.0, top_k=4)
    above = int((proposals[:, 1] > proposals[:, 0]).sum())
    print(f"1. post-processing one frame of {len(proposals)} proposals ({above}"
          " above 0.5), median of repeated runs:")
    for label, p in (("model output", proposals), ("every proposal a candidate", _all_candidates(proposals))):
        ours = _median_ms(lambda p=p: postprocess(p, (720, 1280), options), repeat)
        loop = _median_ms(lambda p=p: ref_postprocess(p, 0.5, 50.0, 4), max(5, repeat // 20))
        print(f"   {label:28} orinkit {ours:8.3f} ms   loop {loop:9.3f} ms   ratio loop/orinkit {loop / ours:6.1f}")


def _all_candidates(proposals: np.ndarray) -> np.ndarray:
    p = proposals.copy()
    p[:, 0], p[:, 1] = 0.0, np.linspace(1.0, 3.0, len(p))
    return p


def serving(url: str, frames: int) -> None:
    image = render_road(0, 1280, 720).encode("PNG")
    print(f"2. end to end through lane_detection (1280x720 PNG in, lanes out), {frames} frames per level:")
    with LaneDetector(url) as detect:
        detect(image)
        for concurrency in (1, 4):
            latencies = []
            started = time.perf_counter()
            if concurrency == 1:
                for _ in range(frames):
                    t0 = time.perf_counter()
                    detect(image)
                    latencies.append((time.perf_counter() - t0) * 1000)
            else:
                list(detect.client.map([np.array([image], dtype=np.object_)] * frames, concurrency=concurrency))
            fps = frames / (time.perf_counter() - started)
            if latencies:
                ordered = sorted(latencies)
                print(f"   concurrency 1: {fps:6.1f} frames/s, latency p50 {percentile(ordered, 50):.1f} ms, "
                      f"p90 {percentile(ordered, 90):.1f} ms, p99 {percentile(ordered, 99):.1f} ms")
            else:
                print(f"   concurrency {concurrency}: {fps:6.1f} frames/s")


def payload() -> None:
    from PIL import Image

    png = render_road(0, 1280, 720).encode("PNG")
    buffer = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").save(buffer, "JPEG", quality=90)
    raw = 3 * 360 * 640 * 4
    print("3. bytes per frame sent to the server:")
    for label, size in (("PNG 1280x720", len(png)), ("JPEG 1280x720 q90", len(buffer.getvalue())),
                        ("raw FP32 1x3x360x640", raw)):
        print(f"   {label:22} {size:>10,} bytes   raw/this {raw / size:6.1f}")


def _frame(png: bytes) -> np.ndarray:
    """The ensemble's pre-processing, in process: BGR, 640x360 bilinear (Pillow), /255, CHW."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB").resize((640, 360), Image.BILINEAR)
    return (np.asarray(image, np.float32)[:, :, ::-1].transpose(2, 0, 1) / 255.0)[None]


def accuracy(onnx_path: Path, url: str, images: int) -> None:
    import onnx

    from orinkit.convert.fp16.emulate import Emulator
    from orinkit.lanes.metrics import LaneScore, score_image
    from orinkit.lanes.synth import render_road
    from orinkit.lanes.train import HELD_OUT_SEED

    emulator = Emulator(onnx.load(str(onnx_path)))
    scores = {"FP32 (onnxruntime)": LaneScore(0, 0, 0), "FP16 emulation": LaneScore(0, 0, 0),
              "ensemble on the server": LaneScore(0, 0, 0)}
    differing = 0
    with LaneDetector(url) as detect:
        for index in range(images):
            road = render_road(HELD_OUT_SEED + index, 1280, 720)
            png = road.encode("PNG")
            sample = [{"image": _frame(png)}]
            fp32 = postprocess(emulator.reference(sample)[0][0][0], (720, 1280)).lanes
            fp16 = postprocess(emulator.emulate(sample)[0][0][0], (720, 1280)).lanes
            served = [lane.points for lane in detect(png)]
            differing += len(served) != len(fp32) or any(
                not np.allclose(a, b, atol=1e-2) for a, b in zip(served, fp32))
            for name, lanes in zip(scores, (fp32, fp16, served)):
                scores[name] = scores[name] + score_image(lanes, road.lanes, (720, 1280))
    print(f"4. accuracy on {images} held-out synthetic roads (CULane rule):")
    for name, score in scores.items():
        print(f"   {name:24} {score.describe()}")
    f1 = {name: score.f1 for name, score in scores.items()}
    print(f"   FP16 - FP32 F1: {f1['FP16 emulation'] - f1['FP32 (onnxruntime)']:+.4f} (goal within 0.005); "
          f"ensemble images differing from in-process: {differing} (goal 0)")


def _model(weights: str):
    if weights == "random":
        return show_random_lanes(build_lane_model("resnet18", random_weights=True)), False
    from orinkit.lanes.weights import has_shipped_weights

    if weights == "shipped" and not has_shipped_weights():
        print("no trained weights ship with this orinkit yet (the training run needs a GPU): the accuracy section "
              "is skipped, the speed sections use random weights")
        return show_random_lanes(build_lane_model("resnet18", random_weights=True)), False
    return build_lane_model("resnet18", checkpoint=None if weights == "shipped" else weights), True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--weights", default="shipped", help="shipped, random, or a weights card (.json)")
    parser.add_argument("--images", type=int, default=500, help="held-out roads for the accuracy section")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model, trained = _model(args.weights)
        onnx_path = export_lane_onnx(model, Path(work) / "laneatt.onnx", dynamic_batch=True)
        import onnxruntime

        frame = np.random.default_rng(0).random((1, 3, 360, 640), dtype=np.float32)
        proposals = onnxruntime.InferenceSession(str(onnx_path)).run(None, {"image": frame})[0][0]
        postprocessing(proposals, args.repeat)
        repository = Path(work) / "models"
        build_lane_repository(repository, onnx_path, runtime="python-onnxruntime")
        server = start_on_free_ports(repository, Path(work) / "server.log")
        try:
            serving(server.command.grpc_url, args.frames)
            payload()
            if trained:
                accuracy(onnx_path, server.command.grpc_url, args.images)
        finally:
            server.stop()
    print(f"model: LaneATT resnet18 with {'trained' if trained else 'random'} weights, onnxruntime on this "
          "machine's CPU (no GPU here)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
