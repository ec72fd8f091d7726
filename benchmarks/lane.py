"""The lane model: its training cost per architecture, its accuracy, and serving it on the local tritonserver.

    python benchmarks/lane.py [--frames 60] [--repeat 200] [--weights shipped|random|CARD.json] [--images 500]
                              [--architectures [--archs lite,r18]] [--equal-minutes M | --equal-steps N
                                 [--equal-data synth-v1,wide-v1] [--equal-augment 1,0,2,2@6000] [--equal-init CARD]
                                 [--equal-lr LR]]
                              [--plot F1.png]
                              [--judge 300] [--cards CARD ...]

0. (--architectures) per candidate architecture (orinkit.lanes.architectures): parameters, GMAC per 360x640
   image, training images/s (forward + loss + backward + AdamW, batch 8, this machine's threads); with
   --equal-minutes M (or --equal-steps N: equal images, robust to a loaded machine), each candidate also trains M
   minutes of training time (from scratch, or from --equal-init) on each --equal-data version at each
   --equal-augment strength, and its held-out F1 (200 roads) and judge-renderer F1 (--equal-judge, 60 roads) are printed
   beside: the equal-time comparison that says what transfers;
   (--plot F1.png) held-out F1 against training images, from the weights card (and the run's checkpoint while a
   run goes on: --plot-run DIR);

1. post-processing time per frame at 2784 proposals: orinkit.lanes.postprocess vs the plain loop implementation
   of the reference semantics (from the tests), on the same proposals;
2. end-to-end frames/s and latency percentiles through the lane_detection ensemble (encoded image in, lanes out),
   at concurrency 1 and 4;
3. bytes sent per frame: encoded images (PNG, JPEG) vs the raw 1x3x360x640 FP32 tensor;
4. accuracy on held-out synthetic roads (1280x720, seeds no training run draws) and on the stress set (style
   settings never trained on, orinkit.lanes.augment.STRESS_STYLE): CULane precision, recall and F1 of the FP32
   model (onnxruntime), of its FP16 emulation (edge-convert's), and through the whole lane_detection ensemble on
   the local server, which must give exactly the in-process FP32 lanes. Goals: F1 >= 0.95 (FP32, held-out), FP16
   within 0.005 of FP32, the ensemble identical to in-process. It needs trained weights (the shipped ones, or
   --weights CARD.json); with random weights it is skipped.
5. (--judge N, default 300) every shipped model (or --cards) on N roads of the judge renderer
   (orinkit.lanes.judge_roads, written without reading the training renderer and never trained on) beside its
   held-out and stress F1: the figure that says whether a model learned roads or our renderer. Goal >= 0.85.
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
from orinkit.lanes.calibrate import card_threshold  # noqa: E402
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
        if label == "model output":
            print(f"   {'':28} goal <= 2 ms per frame on the model's output: {'met' if ours <= 2.0 else 'NOT MET'}")


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
    # Scaled as the step scales (a float32 multiply by 1/255, not a division): a pixel one ulp apart can flip a
    # lane whose score or NMS gap sits on its threshold, and then in-process and served lanes would differ.
    return (np.asarray(image, np.float32)[:, :, ::-1].transpose(2, 0, 1) * np.float32(1 / 255))[None]


def accuracy(onnx_path: Path, url: str, images: int, kept: PostprocessOptions) -> None:
    import onnx

    from orinkit.convert.fp16.emulate import Emulator
    from orinkit.lanes.augment import STRESS_STYLE, TRAINING_STYLE
    from orinkit.lanes.metrics import LaneScore, score_image
    from orinkit.lanes.synth import render_road
    from orinkit.lanes.train import HELD_OUT_SEED, STRESS_SEED

    emulator = Emulator(onnx.load(str(onnx_path)))
    print(f"4. accuracy on {images} roads per set (CULane rule, 1280x720, lanes above {kept.conf_threshold:.2f}, "
          "the card's threshold):")
    for label, seed, style in (("held-out", HELD_OUT_SEED, TRAINING_STYLE), ("stress", STRESS_SEED, STRESS_STYLE)):
        scores = {"FP32 (onnxruntime)": LaneScore(0, 0, 0), "FP16 emulation": LaneScore(0, 0, 0),
                  "ensemble on the server": LaneScore(0, 0, 0)}
        differing = 0
        with LaneDetector(url) as detect:
            for index in range(images):
                road = render_road(seed + index, 1280, 720, options=style)
                png = road.encode("PNG")
                sample = [{"image": _frame(png)}]
                fp32 = postprocess(emulator.reference(sample)[0][0][0], (720, 1280), kept).lanes
                fp16 = postprocess(emulator.emulate(sample)[0][0][0], (720, 1280), kept).lanes
                served = [lane.points for lane in detect(png)]
                differing += len(served) != len(fp32) or any(
                    not np.allclose(a, b, atol=1e-2) for a, b in zip(served, fp32))
                for name, lanes in zip(scores, (fp32, fp16, served)):
                    scores[name] = scores[name] + score_image(lanes, road.lanes, (720, 1280))
        print(f"   {label} roads:")
        for name, score in scores.items():
            print(f"     {name:24} {score.describe()}")
        f1 = {name: score.f1 for name, score in scores.items()}
        print(f"     FP16 - FP32 F1: {f1['FP16 emulation'] - f1['FP32 (onnxruntime)']:+.4f} (goal within 0.005); "
              f"ensemble images differing from in-process: {differing} (goal 0)")


def augment_settings(text: str) -> list[tuple[str, float, int]]:
    """``--equal-augment`` "1,0,2,2@6000" → (label, strength, ramp): a strength, or a strength reached at image N."""
    settings = []
    for part in text.split(","):
        strength, _, ramp = part.strip().partition("@")
        try:
            settings.append((part.strip(), float(strength), int(ramp or 0)))
        except ValueError:
            raise SystemExit(f"error: --equal-augment {part!r} is not STRENGTH or STRENGTH@IMAGES "
                             "(e.g. 2@6000)") from None
    return settings


def architectures(seconds: float, equal_minutes: float | None, eval_images: int = 200,
                  data_versions: tuple[str, ...] = ("wide-v1",), judge_images: int = 60,
                  archs: tuple[str, ...] | None = None, augment: str = "1", init: Path | None = None,
                  lr: float | None = None, equal_steps: int | None = None) -> None:
    """Section 0: what each candidate costs to train here, and (optionally) what it learns in equal time, on each
    data version and at each augmentation setting (``augment``, :func:`augment_settings`), from scratch or from
    the card ``init``: held-out F1 (its own renderer) and the judge renderer's F1 (the figure that decides).
    ``equal_steps`` instead of ``equal_minutes``: equal training images, which is equal CPU time between
    candidates of the same cost per image (the cost column says) and, unlike a clock, holds on a loaded machine."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from orinkit.lanes.architectures import ARCHITECTURES, make_lane_model
    from orinkit.lanes.loss import laneatt_loss
    from orinkit.lanes.train import TrainOptions, evaluate, train, training_pair
    from orinkit.lanes.train import judge as judge_model

    unknown = set(archs or ()) - set(ARCHITECTURES)
    if unknown:
        raise SystemExit(f"error: --archs {','.join(sorted(unknown))} is no architecture; "
                         f"use some of {','.join(ARCHITECTURES)}")
    pairs = [training_pair(index, 0) for index in range(8)]
    images = torch.from_numpy(np.stack([p[0] for p in pairs])).float() / 255
    targets = torch.from_numpy(np.stack([p[1] for p in pairs]))
    settings = augment_settings(augment)
    extra = {} if lr is None else {"lr": lr}
    start = "from scratch" if init is None else f"from {init}"
    budget = f"{equal_steps} steps (batch 8)" if equal_steps else f"{equal_minutes or 0:g} min"
    print(f"0. training cost per architecture (batch 8, {torch.get_num_threads()} threads; after "
          f"{budget} of training {start} per data version and augmentation strength: F1 on "
          f"{eval_images} held-out roads / on {judge_images} judge roads)")
    print(f"   {'arch':14} {'augment':>8} {'params':>8} {'GMAC':>6} {'train img/s':>12} "
          + " ".join(f"{version + ' held/judge':>22}" for version in data_versions))
    for arch in archs or ARCHITECTURES:
        torch.manual_seed(0)
        model = make_lane_model(arch)
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model.eval()(images[:1])
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(model=model, optimizer=optimizer):
            loss = laneatt_loss(model(images), model.anchors, targets).total
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        step()
        count, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            step()
            count += 1
        rate = count * len(images) / (time.perf_counter() - started)
        equal = bool(equal_minutes or equal_steps)
        for label, strength, ramp in settings if equal else [("-", 1.0, 0)]:
            f1 = []
            for version in data_versions if equal else ():
                with tempfile.TemporaryDirectory() as out:
                    train(TrainOptions(arch=arch, minutes=None if equal_steps else equal_minutes,
                                       steps=equal_steps or 10**9, eval_images=0, eval_minutes=0,
                                       data=version, augment_strength=strength, augment_ramp=ramp, init=init,
                                       out=Path(out), **extra), progress=lambda m: None)
                    trained = build_lane_model(checkpoint=next(Path(out).glob("*.json")))
                    f1.append(f"{evaluate(trained, eval_images).f1:.3f} / {judge_model(trained, judge_images).f1:.3f}")
            print(f"   {arch:14} {label:>8} {sum(p.numel() for p in model.parameters()) / 1e6:7.2f}M "
                  f"{counter.get_total_flops() / 2e9:6.2f} {rate:12.2f} " + " ".join(f"{x:>22}" for x in f1),
                  flush=True)


def plot_history(card: Path | None, run: Path | None, out: Path) -> None:
    """Held-out F1 against training images, as the run measured it every few minutes."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {}
    if card is not None:
        info = json.loads(card.read_text())
        curves[f"{info['arch']} (shipped: F1 {info['f1']:.3f})"] = info["history"]
    if run is not None:
        import torch

        state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)
        curves[f"{state['options']['arch']} run in progress (step {state['step']})"] = state["history"]
    figure, axes = plt.subplots(figsize=(7, 4), dpi=110)
    for label, history in curves.items():
        if history:
            seen, f1 = zip(*history)
            axes.plot(np.asarray(seen) / 1000, f1, marker=".", label=label)
    axes.axhline(0.95, color="grey", linestyle="--", linewidth=1, label="goal 0.95")
    axes.set_xlabel("training images (thousands)")
    axes.set_ylabel("held-out F1 (CULane rule)")
    axes.set_ylim(0, 1)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(out)
    print(f"wrote {out}")


def judge(cards: list[Path], count: int) -> dict:
    """5. every model side by side on the judge renderer (orinkit.lanes.judge_roads: written by someone who never
    read the training renderer, never trained on), in-process FP32 with onnxruntime, images stretched to 640x360
    as the ensemble's step does, each at its card's confidence threshold (orinkit.lanes.calibrate); held-out and
    stress F1 from each model's card."""
    import json

    import onnxruntime
    from PIL import Image

    from orinkit.lanes.judge_roads import judge_f1

    print(f"5. the judge renderer: {count} roads at 1280x720, 1640x590 and 640x480 (CULane rule, FP32):")
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for card in cards:
            info = json.loads(card.read_text())
            path = export_lane_onnx(build_lane_model(checkpoint=card), Path(work) / f"{card.stem}.onnx")
            session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

            kept = PostprocessOptions(conf_threshold=card_threshold(info))

            def detect(image, session=session, kept=kept):
                height, width = image.shape[:2]
                small = np.asarray(Image.fromarray(image[:, :, ::-1]).resize((640, 360), Image.BILINEAR))
                tensor = small[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) * np.float32(1 / 255)
                return postprocess(session.run(None, {"image": tensor})[0][0], (height, width), kept).lanes

            started = time.perf_counter()
            result = judge_f1(detect, count)
            sizes = ", ".join(f"{size} {score.f1:.3f}" for size, score in result["by_size"].items())
            results[card.stem] = result["overall"].f1
            print(f"   {card.stem:24} at {kept.conf_threshold:.2f}: held-out {info.get('f1', float('nan')):.4f}  "
                  f"stress {info.get('stress_f1', float('nan')):.4f}  judge {result['overall'].describe()}  "
                  f"({sizes}; {time.perf_counter() - started:.0f} s)")
    print("   goal: judge F1 >= 0.85 with held-out >= 0.95")
    return results


def _model(weights: str):
    if weights == "random":
        return show_random_lanes(build_lane_model(random_weights=True)), False
    from orinkit.lanes.weights import has_shipped_weights

    if weights == "shipped" and not has_shipped_weights():
        print("no trained weights ship with this orinkit yet: the accuracy section is skipped, the speed sections "
              "use random weights")
        return show_random_lanes(build_lane_model(random_weights=True)), False
    return build_lane_model(checkpoint=None if weights == "shipped" else weights), True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--weights", default="shipped", help="shipped, random, or a weights card (.json)")
    parser.add_argument("--images", type=int, default=500, help="held-out roads for the accuracy section")
    parser.add_argument("--architectures", action="store_true", help="section 0: training cost per architecture")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed training per architecture")
    parser.add_argument("--equal-minutes", type=float, default=None,
                        help="with --architectures: train each candidate this long and print its F1")
    parser.add_argument("--equal-data", default="wide-v1",
                        help="with --equal-minutes: the data versions to train each candidate on, comma-separated "
                             "(e.g. synth-v1,wide-v1)")
    parser.add_argument("--equal-steps", type=int, default=None,
                        help="with --architectures: train each candidate this many steps (equal images) instead")
    parser.add_argument("--equal-judge", type=int, default=60, help="with --equal-*: judge roads per candidate")
    parser.add_argument("--equal-augment", default="1",
                        help="with --equal-*: augmentation strengths to train each candidate at, "
                             "comma-separated; S@N rises from 0 to S over the first N images (e.g. 1,0,2,2@6000)")
    parser.add_argument("--equal-init", type=Path, default=None,
                        help="with --equal-*: a weights card every candidate starts from (default: scratch)")
    parser.add_argument("--equal-lr", type=float, default=None,
                        help="with --equal-*: the learning rate (default lanes.train's)")
    parser.add_argument("--archs", default=None,
                        help="with --architectures: the candidates, comma-separated (default: every one)")
    parser.add_argument("--plot", type=Path, default=None, help="PNG of held-out F1 against training images")
    parser.add_argument("--plot-run", type=Path, default=None, help="with --plot: a run folder in progress")
    parser.add_argument("--only", action="store_true", help="only the sections asked for (0, the plot, 5)")
    parser.add_argument("--judge", type=int, default=300, help="section 5: judge roads per model (0: skip)")
    parser.add_argument("--cards", type=Path, nargs="*", default=None,
                        help="section 5: the weights cards to compare (default: every card that ships)")
    args = parser.parse_args()
    if args.architectures:
        architectures(args.seconds, args.equal_minutes, data_versions=tuple(args.equal_data.split(",")),
                      archs=tuple(args.archs.split(",")) if args.archs else None, augment=args.equal_augment,
                      init=args.equal_init, lr=args.equal_lr, equal_steps=args.equal_steps,
                      judge_images=args.equal_judge)
    if args.judge:
        from orinkit.lanes.weights import shipped_cards

        judge(args.cards if args.cards else shipped_cards(), args.judge)
    if args.plot is not None:
        from orinkit.lanes.weights import shipped_card

        plot_history(shipped_card() if args.weights == "shipped" else None if args.weights == "random"
                     else Path(args.weights), args.plot_run, args.plot)
    if args.only:
        return 0
    with tempfile.TemporaryDirectory() as work:
        model, trained = _model(args.weights)
        onnx_path = export_lane_onnx(model, Path(work) / "laneatt.onnx", dynamic_batch=True)
        import onnxruntime

        frame = _frame(render_road(0, 1280, 720).encode("PNG"))  # a road, as the ensemble pre-processes it
        proposals = onnxruntime.InferenceSession(str(onnx_path)).run(None, {"image": frame})[0][0]
        postprocessing(proposals, args.repeat)
        repository = Path(work) / "models"
        kept = PostprocessOptions(conf_threshold=card_threshold(model.card if trained else None))
        build_lane_repository(repository, onnx_path, runtime="python-onnxruntime", postprocess=kept)
        server = start_on_free_ports(repository, Path(work) / "server.log")
        try:
            serving(server.command.grpc_url, args.frames)
            payload()
            if trained:
                accuracy(onnx_path, server.command.grpc_url, args.images, kept)
        finally:
            server.stop()
    arch = model.card["arch"] if trained else type(model).__name__
    print(f"model: {arch} with {'trained' if trained else 'random'} weights, onnxruntime on the CPU (no GPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
