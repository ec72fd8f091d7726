"""Train a lane model: ``python -m orinkit.lanes.train --out runs/lite`` (CPU or ``--device cuda``).

On drawn roads by default: every training image is a pure function of (``--seed``, its index), road ``index``
drawn by :mod:`orinkit.lanes.synth` in :data:`~orinkit.lanes.augment.TRAINING_STYLE`, then augmented and mirrored
from a generator seeded by the same pair (:mod:`orinkit.lanes.train_data`). ``--dataset culane:PATH`` (or
``tusimple:PATH``, ``curvelanes:PATH``, ``frames:PATH``; :mod:`orinkit.lanes.datasets`) trains on a lane dataset's
train split instead (``--frames-share`` below 1 mixes drawn roads in), ``--frames DIR`` mixes your own labelled
frames (CULane format) in; ``--init`` starts from earlier weights (a new run, new optimiser), so the two fine-tune.
Evaluate on the dataset's test list with ``python -m orinkit.lanes.evaluate``.

A run is its options plus a step count, and ``--resume`` continues exactly where the last checkpoint left it:
model, optimiser, schedule, step and data position (:mod:`orinkit.lanes.train_checkpoint`). Checkpoints
(``OUT/checkpoint.pt``, written whole then renamed into place) come every ``--checkpoint-minutes`` (5) and when
SIGTERM or Ctrl-C stop the run, so a run killed at any moment loses at most one interval. ``--pause-after-minutes``
ends a stretch of training with a checkpoint (a session that ends before the run does).

AdamW, linear warm-up, cosine decay over ``--steps`` (or over ``--minutes`` of training time, counted across
resumes, whichever ends first); bf16 autocast on CUDA. Progress every ``--log-seconds``: loss, images/s, time left;
the held-out F1 (CULane rule, roads from another seed) every ``--eval-minutes``. At the end: F1 on
``--eval-images`` held-out roads and as many stress roads (:data:`~orinkit.lanes.augment.STRESS_STYLE`, style
settings never trained on), the FP16 weights and their card. Before those scores, the card's confidence threshold
is chosen on ``--calibration-images`` roads of the run's own data (:mod:`orinkit.lanes.calibrate`), and every end
score is at it.
"""

from __future__ import annotations

import argparse
import math
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from orinkit.core.errors import EXIT_INTERRUPTED
from orinkit.lanes.datasets import raise_problem
from orinkit.lanes.errors import DatasetError, LaneError
from orinkit.lanes.train_checkpoint import (  # noqa: F401 - names this module has always offered
    CHECKPOINT,
    CHECKPOINT_FORMAT,
    Paused,
    _options_dict,
    _options_from,
    _read_checkpoint,
    _write_checkpoint,
    optimizer_to,
    resume_options,
)
from orinkit.lanes.train_checkpoint import Stop as _Stop
from orinkit.lanes.train_data import (  # noqa: F401
    _leave_stopping_to_the_trainer,
    _loader,
    _pair,
    _sample,
    open_training_data,
    skipped_images,
    training_pair,
)
from orinkit.lanes.train_options import (  # noqa: F401
    HELD_OUT_SEED,
    IMG_H,
    IMG_W,
    RESUMABLE_CHANGES,
    STRESS_SEED,
    TrainOptions,
)


def schedule(step: int, steps: int, elapsed: float, budget: float | None, lr: float, warmup: int) -> float:
    """Linear warm-up, then a cosine to zero over whichever runs out first: steps or the time budget."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    if budget:
        progress = max(progress, elapsed / budget)
    return lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def evaluate(model, count: int, *, device: str = "cpu", batch: int = 8, seed: int = HELD_OUT_SEED, options=None,
             threshold: float = 0.5):
    """CULane precision/recall/F1 of ``model`` on ``count`` roads of ``options`` (the training style by default)
    drawn at 640x360 from ``seed``, lanes kept above ``threshold``."""
    import torch

    from orinkit.lanes.augment import TRAINING_STYLE
    from orinkit.lanes.metrics import LaneScore, score_image
    from orinkit.lanes.postprocess import PostprocessOptions, postprocess
    from orinkit.lanes.synth import render_road

    kept = PostprocessOptions(conf_threshold=threshold)
    total = LaneScore(0, 0, 0)
    was_training = model.training
    model.eval()
    for start in range(0, count, batch):
        roads = [render_road(seed + i, IMG_W, IMG_H, options=options or TRAINING_STYLE)
                 for i in range(start, min(count, start + batch))]
        images = np.stack([r.bgr().astype(np.float32).transpose(2, 0, 1) / 255.0 for r in roads])
        with torch.no_grad():
            proposals = model(torch.from_numpy(images).to(device)).float().cpu().numpy()
        for road, output in zip(roads, proposals):
            found = postprocess(output, (IMG_H, IMG_W), kept).lanes
            total = total + score_image(found, road.lanes, (IMG_H, IMG_W))
    model.train(was_training)
    return total


def judge(model, count: int, *, device: str = "cpu", threshold: float = 0.5):
    """CULane counts of ``model`` on ``count`` roads of the judge renderer (orinkit.lanes.judge_roads, at its three
    camera sizes), each stretched to 640x360 as the ensemble's image step does, lanes kept above ``threshold``.
    Only read: nothing here trains or chooses anything by it."""
    import torch
    from PIL import Image

    from orinkit.lanes.judge_roads import judge_f1
    from orinkit.lanes.postprocess import PostprocessOptions, postprocess

    kept = PostprocessOptions(conf_threshold=threshold)
    was_training = model.training
    model.eval()

    def detect(image: np.ndarray):
        height, width = image.shape[:2]
        small = np.asarray(Image.fromarray(image[:, :, ::-1]).resize((IMG_W, IMG_H), Image.BILINEAR))
        tensor = small[:, :, ::-1].transpose(2, 0, 1)[None].astype(np.float32) * np.float32(1 / 255)
        with torch.no_grad():
            output = model(torch.from_numpy(tensor).to(device)).float().cpu().numpy()[0]
        return postprocess(output, (height, width), kept).lanes

    try:
        return judge_f1(detect, count)["overall"]
    finally:
        model.train(was_training)


def end_scores(model, eval_images: int, judge_images: int, threshold: float, *, device: str = "cpu") -> dict:
    """The scores a card records, lanes kept above ``threshold``: ``held_out`` and ``stress`` on ``eval_images``
    roads each, ``judge`` on ``judge_images`` roads of the judge renderer (left out at 0)."""
    from orinkit.lanes.augment import STRESS_STYLE

    scores = {"held_out": evaluate(model, eval_images, device=device, threshold=threshold),
              "stress": evaluate(model, eval_images, device=device, seed=STRESS_SEED, options=STRESS_STYLE,
                                 threshold=threshold)}
    if judge_images:
        scores["judge"] = judge(model, judge_images, device=device, threshold=threshold)
    return scores


def train(options: TrainOptions, progress=print, *, resume: bool = False):
    """Train, evaluate and save; returns the path of the weights card. Raises :class:`Paused` when the run stops
    with a checkpoint before its end."""
    import torch

    from orinkit.lanes.architectures import make_lane_model
    from orinkit.lanes.loss import laneatt_loss
    from orinkit.lanes.weights import card_arch, load_weights

    if options.device == "cuda" and not torch.cuda.is_available():
        raise LaneError("--device cuda but torch sees no CUDA GPU", hint="train on a GPU machine, or --device cpu")
    frames = open_training_data(options, progress)  # first: a dataset that cannot be read stops the run at once
    torch.manual_seed(options.seed)
    model = make_lane_model(options.arch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay)
    checkpoint = options.out / CHECKPOINT
    run = {"step": 0, "seen": 0, "train_seconds": 0.0, "history": [], "sessions": 0, "skipped": 0}
    if resume:
        state = _read_checkpoint(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        run = {k: state.get(k, v) for k, v in run.items()}  # "skipped" came later than the first checkpoints
        progress(f"resuming {options.arch} at step {run['step']} of {options.steps} ({run['seen']} images, "
                 f"{run['train_seconds'] / 60:.1f} min of training so far) from {checkpoint}")
    elif options.init is not None:
        weights, info = load_weights(options.init)
        if card_arch(info) != options.arch:
            raise LaneError(f"--init {options.init} holds {card_arch(info)} weights, not --arch {options.arch}",
                            hint=f"give --arch {card_arch(info)}, or an --init card of {options.arch} weights")
        model.load_state_dict(weights)
        progress(f"continuing from {options.init}")
    elif checkpoint.exists():
        raise LaneError(f"{options.out} holds a run's checkpoint already",
                        hint="continue it with --resume, or start this run in another --out folder")
    run["sessions"] += 1
    model.to(options.device).train()
    optimizer_to(optimizer, options.device)
    anchors = model.anchors
    budget = options.minutes * 60 if options.minutes else None
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if options.device == "cuda" and options.bf16 \
        else torch.autocast("cpu", enabled=False)
    options.out.mkdir(parents=True, exist_ok=True)
    started = last_log = last_save = last_eval = time.monotonic()
    seen_here, losses = 0, []
    batches = iter(_loader(options, run["seen"], frames))

    def done() -> bool:
        return run["step"] >= options.steps or bool(budget and run["train_seconds"] >= budget)

    with _Stop() as stop:
        while not done():
            if stop.signum is not None or options.pause_at_step == run["step"] or (
                    options.pause_minutes and time.monotonic() - started >= options.pause_minutes * 60):
                _write_checkpoint(checkpoint, model, optimizer, options, run)
                progress(f"paused at step {run['step']}: checkpoint {checkpoint}; continue with "
                         f"python -m orinkit.lanes.train --resume --out {options.out}")
                raise Paused(checkpoint, run["step"], stop.signum)
            tick = time.monotonic()
            try:
                images, targets, problems = next(batches)
            except RuntimeError:
                if stop.signum is None:
                    raise
                continue  # a worker killed along with us (SIGKILL, say): the checkpoint comes at the loop's top
            stopping, skipped = skipped_images(problems)
            try:
                raise_problem(stopping)
            except DatasetError:
                if run["step"]:  # fix the file, then --resume redraws this very batch
                    _write_checkpoint(checkpoint, model, optimizer, options, run)
                raise
            if any(skipped):
                for problem, skip in zip(problems, skipped):
                    if skip:
                        progress(f"{problem} (the renderer failed to draw this road; the run goes on without it; "
                                 "please report this line)")
                run["skipped"] += sum(skipped)
                keep = torch.tensor([not skip for skip in skipped])
                images, targets = images[keep], targets[keep]
                if not len(images):
                    continue
            for group in optimizer.param_groups:
                group["lr"] = schedule(run["step"], options.steps, run["train_seconds"], budget, options.lr,
                                       options.warmup_steps)
            images = images.to(options.device, non_blocking=True).float().div_(255.0)
            targets = targets.to(options.device, non_blocking=True)
            with autocast:
                proposals = model(images)
            parts = laneatt_loss(proposals, anchors, targets, cls_weight=options.cls_weight)
            optimizer.zero_grad(set_to_none=True)
            parts.total.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            optimizer.step()
            run["step"] += 1
            run["seen"] += len(images)
            seen_here += len(images)
            now = time.monotonic()
            run["train_seconds"] += now - tick
            losses.append(float(parts.total.detach()))
            if now - last_log >= options.log_seconds:
                last_log = now
                rate = seen_here / (now - started)
                left = (options.steps - run["step"]) * options.batch / rate
                if budget:
                    left = min(left, budget - run["train_seconds"])
                progress(f"step {run['step']}/{options.steps}: loss {np.mean(losses[-50:]):.4f} (cls "
                         f"{float(parts.cls):.4f}, reg {float(parts.reg):.4f}, {parts.positives} positives), lr "
                         f"{optimizer.param_groups[0]['lr']:.2e}, {rate:.1f} images/s, {left / 60:.0f} min left")
            if options.eval_minutes and options.eval_quick and now - last_eval >= options.eval_minutes * 60:
                score = evaluate(model, options.eval_quick, device=options.device)
                run["history"].append([run["seen"], round(score.f1, 4)])
                progress(f"held-out after {run['seen']} images: {score.describe()}")
                last_eval = time.monotonic()
            if now - last_save >= options.checkpoint_minutes * 60:
                _write_checkpoint(checkpoint, model, optimizer, options, run)
                last_save = time.monotonic()
    _write_checkpoint(checkpoint, model, optimizer, options, run)
    return _finish(model, options, run, frames, progress)


def _finish(model, options: TrainOptions, run: dict, frames, progress) -> Path:
    import torch

    from orinkit.lanes.architectures import ARCHITECTURES
    from orinkit.lanes.calibrate import DEFAULT_THRESHOLD, calibrate
    from orinkit.lanes.weights import save_weights

    minutes = run["train_seconds"] / 60
    progress(f"trained {run['step']} steps ({run['seen']} images) in {minutes:.1f} min; evaluating on "
             f"{options.eval_images} held-out and {options.eval_images} stress roads")
    scores, calibration, threshold = {}, {}, DEFAULT_THRESHOLD
    # --eval-images 0 skips every end score, this one too (tests, and runs whose card is made elsewhere).
    if options.eval_images and options.calibration_images and options.dataset is None and options.frames is None:
        found = calibrate(model, options.data, options.calibration_images, device=options.device)
        calibration, threshold = found.as_card(), found.threshold
        progress(f"conf_threshold {threshold:.2f}: the best F1 ({found.f1[threshold]:.4f}) on {found.roads} "
                 f"{options.data} roads of the calibration seed; every score below is at it")
    if options.eval_images and options.judge_images:  # --eval-images 0 skips every end score
        progress(f"then {options.judge_images} roads of the judge renderer (read only, never trained on)")
    if options.eval_images:
        scores = end_scores(model, options.eval_images, options.judge_images, threshold, device=options.device)
    for name, score in scores.items():
        progress(f"{name.replace('_', '-')}: {score.describe()}")
    kind, arguments = ARCHITECTURES[options.arch]
    info = {
        "model": kind, "arch": options.arch, "config": arguments, "anchors": int(model.anchors.shape[0]),
        "input": [3, IMG_H, IMG_W], "steps": run["step"], "images": run["seen"], "batch": options.batch,
        "minutes": round(minutes, 2), "sessions": run["sessions"], "lr": options.lr, "data_seed": options.seed,
        "augment": options.augment, "augment_strength": options.augment_strength,
        "augment_ramp": options.augment_ramp, "held_out_seed": HELD_OUT_SEED, "stress_seed": STRESS_SEED,
        "held_out_images": options.eval_images,
        "f1": round(scores["held_out"].f1, 4) if "held_out" in scores else None,
        "precision": round(scores["held_out"].precision, 4) if "held_out" in scores else None,
        "recall": round(scores["held_out"].recall, 4) if "held_out" in scores else None,
        "stress_f1": round(scores["stress"].f1, 4) if "stress" in scores else None,
        "judge_f1": round(scores["judge"].f1, 4) if "judge" in scores else None,
        "judge_images": options.judge_images if "judge" in scores else 0,
        "skipped_images": run["skipped"],  # roads the renderer failed to draw (each said in the run's log)
        "history": run["history"],
        "init": None if options.init is None else str(options.init),
        "frames": None if options.frames is None else {"folder": str(options.frames), "count": len(frames),
                                                       "share": options.share},
        "dataset": None if options.dataset is None else {
            "spec": options.dataset, "kind": frames.kind, "split": frames.split, "images": len(frames),
            "share": options.share},
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if options.device == "cuda" else
        f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)",
        "command": options.command,
        "data": options.data,
        **calibration,  # conf_threshold and how it was found; absent: served at 0.5
    }
    card = options.out / f"{options.card_name}.json"
    save_weights(model.state_dict(), card, info)
    return card


def _parser() -> argparse.ArgumentParser:
    from orinkit.lanes.architectures import ARCHITECTURES

    defaults = TrainOptions()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], argument_default=argparse.SUPPRESS)
    parser.add_argument("--resume", action="store_true", default=False,
                        help="continue the run whose checkpoint is in --out, exactly where it stopped")
    parser.add_argument("--arch", choices=list(ARCHITECTURES), help=f"default {defaults.arch}")
    parser.add_argument("--device", choices=["cuda", "cpu"], help=f"default {defaults.device}")
    parser.add_argument("--steps", type=int, help=f"default {defaults.steps}")
    parser.add_argument("--minutes", type=float, help="training-time budget; the schedule ends with it")
    parser.add_argument("--batch", type=int, help=f"default {defaults.batch}")
    parser.add_argument("--workers", type=int, help=f"road-drawing processes (default {defaults.workers})")
    parser.add_argument("--lr", type=float, help=f"default {defaults.lr}")
    parser.add_argument("--warmup-steps", type=int, help=f"default {defaults.warmup_steps}")
    parser.add_argument("--seed", type=int, help="data seed: the roads drawn (default 0)")
    parser.add_argument("--no-augment", dest="augment", action="store_false", help="train on the roads as drawn")
    parser.add_argument("--augment-strength", type=float, help="how often each augmentation happens: 1 the usual "
                        "rates, 0 none, 2 twice as often (default 1)")
    parser.add_argument("--augment-ramp", type=int, help="images over which the strength rises from 0 to "
                        "--augment-strength (default 0: at full strength from the first image)")
    parser.add_argument("--data", help=f"the drawn roads' version: synth-v1 (the first renderer's), wide-v1 "
                        f"(domain randomised) or mix-v1 (the two alternating; default {defaults.data})")
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="train in FP32 on CUDA")
    parser.add_argument("--eval-images", type=int, help=f"held-out and stress roads at the end "
                        f"(default {defaults.eval_images} each)")
    parser.add_argument("--judge-images", type=int, help=f"judge-renderer roads scored at the end, read only "
                        f"(default {defaults.judge_images}; 0: none)")
    parser.add_argument("--calibration-images", type=int, help=f"roads of the run's own data that choose the "
                        f"card's confidence threshold at the end (default {defaults.calibration_images}; 0: keep 0.5)")
    parser.add_argument("--eval-minutes", type=float, help=f"held-out F1 this often (default "
                        f"{defaults.eval_minutes:g}; 0: never)")
    parser.add_argument("--log-seconds", type=float, help=f"default {defaults.log_seconds:g}")
    parser.add_argument("--checkpoint-minutes", type=float, help="at most 5 (default 5)")
    parser.add_argument("--pause-after-minutes", dest="pause_minutes", type=float,
                        help="stop with a checkpoint after this long; --resume continues")
    parser.add_argument("--init", type=Path, help="weights card (.json) to start a new run from")
    parser.add_argument("--dataset", metavar="KIND:PATH",
                        help="train on a lane dataset's train split: culane:PATH, tusimple:PATH, curvelanes:PATH "
                             "or frames:PATH")
    parser.add_argument("--frames", type=Path,
                        help="a folder of your labelled frames (image + NAME.lines.txt, CULane format) to fine-tune on")
    parser.add_argument("--frames-share", type=float, help="share of training images from --frames or --dataset, "
                        "the rest drawn roads (default 0.5 with --frames, 1 with --dataset)")
    parser.add_argument("--out", type=Path, help=f"the run's folder (default {defaults.out})")
    parser.add_argument("--name", help="the weights card's name (default laneatt_<arch>_synth, or "
                        "laneatt_<arch>_<kind> with --dataset)")
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    given = vars(_parser().parse_args(argv))
    resume = given.pop("resume")
    command = "python -m orinkit.lanes.train " + shlex.join(argv)
    try:
        if resume:
            options = resume_options(given.pop("out", TrainOptions.out), given)
        else:
            options = TrainOptions(**given, command=command)
        card = train(options, progress=lambda m: print(m, flush=True), resume=resume)
    except Paused as paused:
        return EXIT_INTERRUPTED if paused.signum is not None else 0
    except LaneError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {card} and its shards")
    if options.dataset is not None:
        print(f"evaluate it: python -m orinkit.lanes.evaluate --dataset {shlex.quote(options.dataset)} "
              f"--weights {shlex.quote(str(card))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
