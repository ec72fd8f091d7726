"""The lane demo: LaneATT from torch to lanes over gRPC, end to end on a local tritonserver.

    python -m orinkit.lanes.demo [--seed 0] [--image road.jpg] [--checkpoint W] [--random-weights] [--out lanes.png]
                                 [--runs 10]

Builds the model (the weights that ship with orinkit, trained on synthetic roads; or --checkpoint; or random),
exports and converts it with edge-convert (FP16 gate), lays out the lane_detection ensemble, starts tritonserver,
sends a road (drawn from --seed, with its true lanes; or --image), prints the lanes, their precision, recall and F1
against the drawn road's truth, and the latency of --runs timed requests after one warm-up, and writes an overlay
PNG (found lanes red, true lanes green): to --out, or else to a new file in the system's temporary folder (never
the current folder, which is often the source tree), whose path it prints. Everything else is built in a temporary
folder that is removed at the end (or in --work, which is kept).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from orinkit.core.errors import EXIT_INTERRUPTED, OrinkitError
from orinkit.core.signals import sigterm_as_interrupt
from orinkit.lanes.errors import LaneError


def _step(message: str) -> float:
    print(message, flush=True)
    return time.perf_counter()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=Path, default=None, help="a road image (JPEG/PNG); default: drawn here")
    parser.add_argument("--seed", type=int, default=0, help="which road to draw (and the random weights' seed)")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="weights: a reference LaneATT checkpoint (.pt) or an orinkit weights card (.json)")
    parser.add_argument("--random-weights", action="store_true", help="untrained weights, to test the plumbing")
    parser.add_argument("--arch", default=None, choices=_architectures(),
                        help="lane architecture (default: the shipped weights with the best held-out F1; random "
                             "weights: lite)")
    parser.add_argument("--out", type=Path, default=None,
                        help="overlay PNG to write (default: a new orinkit-lanes-*.png in the system's temporary "
                             "folder, such as /tmp; its path is printed at the end)")
    parser.add_argument("--runs", type=int, default=10, help="timed requests, after one warm-up (default 10)")
    parser.add_argument("--work", type=Path, default=None, help="keep the ONNX files and repository here")
    parser.add_argument("--conf-threshold", type=float, default=None,
                        help="keep lanes scoring above this (default: the weights card's calibrated threshold, "
                             "orinkit.lanes.calibrate; 0.5 for weights without one)")
    return parser


def _architectures() -> list[str]:
    from orinkit.lanes.architectures import ARCHITECTURES

    return [*ARCHITECTURES, "resnet34"]


def _check_arguments(args) -> None:
    """Everything a user can get wrong, refused before the slow work starts."""
    if args.random_weights and args.checkpoint is not None:
        raise LaneError("--random-weights and --checkpoint exclude each other", hint="give one of them")
    if args.checkpoint is not None and not args.checkpoint.exists():
        raise LaneError(f"--checkpoint {args.checkpoint} does not exist", hint="check the path")
    if args.runs < 1:
        raise LaneError(f"--runs {args.runs} is below 1", hint="use 1 or more")
    if args.conf_threshold is not None and not 0.0 <= args.conf_threshold <= 1.0:
        raise LaneError(f"--conf-threshold {args.conf_threshold} is not in [0, 1]", hint="e.g. 0.5")
    if args.out is not None and not args.out.parent.is_dir():
        raise LaneError(f"the folder of --out {args.out} does not exist", hint="create it, or write elsewhere")
    if args.work is not None and args.work.exists() and not args.work.is_dir():
        raise LaneError(f"--work {args.work} is a file", hint="name a folder (it is created if missing)")
    if args.image is not None:
        _read_image(args.image)


def _read_image(path: Path) -> bytes:
    from PIL import Image, UnidentifiedImageError

    try:
        data = path.read_bytes()
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except FileNotFoundError:
        raise LaneError(f"--image {path} does not exist", hint="check the path") from None
    except (OSError, UnidentifiedImageError) as exc:
        raise LaneError(f"--image {path} is not an image Pillow can read ({exc})",
                        hint="pass a JPEG or PNG file") from None
    return data


@contextlib.contextmanager
def _work_folder(work: Path | None):
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
        yield work
        return
    with tempfile.TemporaryDirectory(prefix="orinkit-lanes-") as folder:
        yield Path(folder)


def main(argv=None) -> int:
    begun = time.perf_counter()
    args = _parser().parse_args(argv)
    with sigterm_as_interrupt():
        try:
            _check_arguments(args)
            with _work_folder(args.work) as work:
                code = _run(args, work)
            print(f"done in {time.perf_counter() - begun:.0f} s")
            return code
        except OrinkitError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print("interrupted: stopped the server and removed what the demo made", file=sys.stderr)
            return EXIT_INTERRUPTED


def _model(args):
    import torch

    from orinkit.lanes.model import build_lane_model, show_random_lanes
    from orinkit.lanes.weights import has_shipped_weights

    torch.manual_seed(args.seed)
    if args.checkpoint is not None:
        return build_lane_model(args.arch, checkpoint=args.checkpoint), f"weights from {args.checkpoint}"
    if not args.random_weights and has_shipped_weights(args.arch):
        model = build_lane_model(args.arch)
        card = model.card
        judged = (f", F1 {card['judge_f1']:.3f} on {card['judge_images']} roads of the judge renderer it never saw "
                  "(expect less on a real camera: docs/guides/lanes.md)" if card.get("judge_f1") is not None else "")
        return model, (f"the shipped weights: {card['arch']} trained on synthetic roads, held-out F1 "
                       f"{card['f1']:.3f}{judged} ({card['images']} images, {card['minutes']:.0f} min on "
                       f"{card['device']})")
    model = show_random_lanes(build_lane_model(args.arch, random_weights=True))
    why = "asked for" if args.random_weights else "no trained weights ship with this orinkit yet"
    return model, (f"RANDOM weights ({why}): the lanes below show that the pipeline works, not what a trained "
                   "model sees (the length head's bias is set so that random lanes are long enough to draw)")


def _road(args):
    """The image bytes and, for a drawn road, its true lanes in the image's pixels."""
    if args.image is not None:
        return _read_image(args.image), None, str(args.image)
    from orinkit.lanes.synth import render_road

    road = render_road(args.seed, 1280, 720)
    return road.encode("PNG"), road.lanes, f"the road drawn from seed {args.seed}"


def _run(args, work: Path) -> int:
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx
    from orinkit.lanes.calibrate import card_threshold
    from orinkit.lanes.client import LaneDetector
    from orinkit.lanes.draw import overlay
    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.metrics import score_image
    from orinkit.lanes.postprocess import PostprocessOptions
    from orinkit.lanes.repository import build_lane_repository
    from orinkit.server.local import start_on_free_ports

    started = _step("[1/5] the lane model in torch")
    model, weights = _model(args)
    print(f"      {weights}")
    onnx_path = export_lane_onnx(model, work / "laneatt.onnx", dynamic_batch=True)
    print(f"      exported {onnx_path} and {onnx_path.stem}.anchors.npy in {time.perf_counter() - started:.1f} s")

    started = _step("[2/5] edge-convert: validate, simplify, FP16 accuracy gate")
    shapes = {"image": (1, 3, 360, 640)}
    options = ConvertOptions(min_shapes=shapes, opt_shapes=shapes, max_shapes={"image": (4, 3, 360, 640)},
                             samples=4, data=_gate_frames(work, args.seed),
                             metric=None if model.weights_are_random else "lanes")
    result = convert_onnx(onnx_path, work / "laneatt.edge", options, force=True,
                          progress=lambda m: print("      " + m) if m.startswith("  ") or "TensorRT" in m else None)
    artifact = result.artifacts.get("plan") or result.artifacts["fp32_onnx"]
    print(f"      {'engine built' if result.engine_built else 'no TensorRT here: serving the ONNX model'} "
          f"in {time.perf_counter() - started:.1f} s")

    started = _step("[3/5] the lane_detection ensemble")
    repository = work / "models"
    threshold = card_threshold(model.card) if args.conf_threshold is None else args.conf_threshold
    build_lane_repository(repository, artifact, postprocess=PostprocessOptions(conf_threshold=threshold),
                          progress=lambda m: print("      " + m))
    source = "--conf-threshold" if args.conf_threshold is not None else "the weights card's threshold"
    print(f"      laid out in {time.perf_counter() - started:.1f} s; lanes kept above {threshold:.2f} ({source})")

    started = _step("[4/5] tritonserver")
    image, truth, what = _road(args)
    server = start_on_free_ports(repository, work / "tritonserver.log")
    try:
        print(f"      ready in {time.perf_counter() - started:.1f} s on {server.command.grpc_url}")
        started = _step(f"[5/5] lanes for {what}")
        with LaneDetector(server.command.grpc_url) as detect:
            lanes = detect(image)
            latencies = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                detect(image)
                latencies.append((time.perf_counter() - t0) * 1000)
        requested = time.perf_counter() - started
    finally:
        server.stop()
    for index, lane in enumerate(lanes):
        first, last = lane.points[0], lane.points[-1]
        print(f"      lane {index}: score {lane.score:.3f}, {len(lane.points)} points from "
              f"({first[0]:.0f}, {first[1]:.0f}) to ({last[0]:.0f}, {last[1]:.0f})")
    if not lanes:
        print("      no lane scored above the threshold")
    if truth is not None:
        score = score_image([lane.points for lane in lanes], truth, (720, 1280))
        print(f"      against the drawn road's {len(truth)} true lanes (CULane rule): {score.describe()}")
    ordered = sorted(latencies)
    print(f"      latency over {args.runs} requests (image bytes in, lanes out): median "
          f"{statistics.median(ordered):.1f} ms, p90 {ordered[int(0.9 * (len(ordered) - 1))]:.1f} ms "
          f"({1 + args.runs} requests in {requested:.1f} s)")
    out = args.out or _new_png()
    try:
        overlay(image, lanes, out, truth=truth)
    except BaseException:
        if args.out is None:
            out.unlink(missing_ok=True)
        raise
    print(f"wrote {out} (found lanes red{', true lanes green' if truth is not None else ''})"
          + (" (random weights)" if model.weights_are_random else ""))
    return 0


def _new_png() -> Path:
    """A new file for the overlay in the system's temporary folder: not the current folder, which is often the
    source tree the demo runs from (make demo)."""
    handle, name = tempfile.mkstemp(prefix="orinkit-lanes-", suffix=".png")
    os.close(handle)
    return Path(name)


def _gate_frames(work: Path, seed: int) -> Path:
    """Four drawn roads (not the demo's own) as the FP16 gate's inputs: real frames, not noise."""
    import numpy as np

    from orinkit.lanes.synth import render_road

    frames = np.stack([render_road(seed + 1000 + i, 640, 360).bgr().astype(np.float32).transpose(2, 0, 1) / 255
                       for i in range(4)])
    path = work / "gate_frames.npz"
    np.savez(path, image=frames)
    return path


if __name__ == "__main__":
    sys.exit(main())
