"""Train a lane model on synthetic roads: ``python -m orinkit.lanes.train --out runs/lite`` (CPU or ``--device cuda``).

Every training image is a pure function of (``--seed``, its index): road ``index`` drawn by
:mod:`orinkit.lanes.synth` in :data:`~orinkit.lanes.augment.TRAINING_STYLE`, then augmented and mirrored from a
generator seeded by the same pair. A run is therefore its options plus a step count, and ``--resume`` continues
exactly where the last checkpoint left it: model, optimiser, schedule, step and data position. Checkpoints
(``OUT/checkpoint.pt``, written whole then renamed into place) come every ``--checkpoint-minutes`` (5) and when
SIGTERM or Ctrl-C stop the run, so a run killed at any moment loses at most one interval. ``--pause-after-minutes``
ends a stretch of training with a checkpoint (a session that ends before the run does).

AdamW, linear warm-up, cosine decay over ``--steps`` (or over ``--minutes`` of training time, counted across
resumes, whichever ends first); bf16 autocast on CUDA. Progress every ``--log-seconds``: loss, images/s, time left;
the held-out F1 (CULane rule, roads from another seed) every ``--eval-minutes``. At the end: F1 on
``--eval-images`` held-out roads and as many stress roads (:data:`~orinkit.lanes.augment.STRESS_STYLE`, style
settings never trained on), the FP16 weights and their card. ``--init`` starts from earlier weights (a new run,
new optimiser); ``--frames DIR`` mixes in your own labelled frames (CULane format).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import platform
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from orinkit.core.errors import EXIT_INTERRUPTED
from orinkit.lanes.errors import LaneError

IMG_W, IMG_H = 640, 360
HELD_OUT_SEED = 1_000_000_007  # held-out roads never overlap training roads (those are seed * 10**8 + index)
STRESS_SEED = 2_000_000_011
CHECKPOINT = "checkpoint.pt"
CHECKPOINT_FORMAT = 2
# Options a resumed run may change: where and how fast it runs, never what it computes.
RESUMABLE_CHANGES = ("device", "workers", "log_seconds", "checkpoint_minutes", "eval_minutes", "pause_minutes",
                     "pause_at_step", "out", "command")


@dataclass(frozen=True)
class TrainOptions:
    arch: str = "lite"
    device: str = "cpu"
    steps: int = 20000
    minutes: float | None = None  # training-time budget (resumes included); the schedule ends with it
    batch: int = 8
    workers: int = 1
    lr: float = 1e-3
    weight_decay: float = 1e-4
    warmup_steps: int = 300
    seed: int = 0
    augment: bool = True
    cls_weight: float = 10.0
    bf16: bool = True
    log_seconds: float = 30.0
    checkpoint_minutes: float = 5.0
    eval_minutes: float = 10.0  # held-out F1 on eval_quick roads this often (0: never during training)
    eval_quick: int = 100
    eval_images: int = 500
    pause_minutes: float | None = None  # stop with a checkpoint after this much wall time in this process
    pause_at_step: int | None = None  # the same at a step (tests)
    init: Path | None = None
    frames: Path | None = None  # your own labelled frames (CULane format) to fine-tune on
    frames_share: float = 0.5  # the share of training images taken from ``frames``; the rest are drawn roads
    out: Path = Path("laneatt-train")
    name: str | None = None  # the card's name; default laneatt_<arch>_synth
    command: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        from orinkit.lanes.architectures import ARCHITECTURES

        if self.arch not in ARCHITECTURES:
            raise LaneError(f"--arch {self.arch} is not a lane architecture", hint=f"use one of "
                            f"{', '.join(ARCHITECTURES)}")
        if self.device not in ("cuda", "cpu"):
            raise LaneError(f"--device must be cuda or cpu, got {self.device}", hint="use --device cuda on a GPU")
        for name in ("steps", "batch"):
            if getattr(self, name) < 1:
                raise LaneError(f"--{name} must be 1 or more", hint="e.g. --batch 8")
        if self.workers < 0 or self.eval_images < 0 or self.eval_quick < 0:
            raise LaneError("--workers and --eval-images must be 0 or more", hint="e.g. --workers 1")
        if not 0.0 <= self.frames_share <= 1.0:
            raise LaneError(f"--frames-share {self.frames_share} is not in [0, 1]", hint="e.g. 0.5")
        if not 0 < self.checkpoint_minutes <= 5:
            raise LaneError(f"--checkpoint-minutes {self.checkpoint_minutes} is not in (0, 5]",
                            hint="a killed run loses at most this much: keep it at 5 or less")
        for name in ("minutes", "pause_minutes"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise LaneError(f"--{name.replace('_', '-')} must be above 0", hint="e.g. 30")

    @property
    def card_name(self) -> str:
        return self.name or f"laneatt_{self.arch.replace('-', '_')}_synth"


def _pair(image: np.ndarray, lanes, flip: bool):
    """A BGR CHW uint8 image (scaled to 0..1 on the device, which is cheaper than in the drawing workers) and its
    [4, 77] targets, mirrored left-right when ``flip``."""
    from orinkit.lanes.targets import lane_targets

    lanes = [np.asarray(lane, dtype=np.float64) for lane in lanes]
    if flip:
        image = image[:, ::-1]
        lanes = [np.stack([(IMG_W - 1) - lane[:, 0], lane[:, 1]], axis=1) for lane in lanes]
    return np.ascontiguousarray(image.transpose(2, 0, 1)), lane_targets(lanes, 4, IMG_W, IMG_H)


def _sample(seed: int, flip: bool):
    """One training pair from the road of ``seed``, as drawn (no augmentation)."""
    from orinkit.lanes.synth import render_road

    road = render_road(seed, IMG_W, IMG_H)
    return _pair(road.image[:, :, ::-1], road.lanes, flip)


def training_pair(index: int, seed: int, *, augmented: bool = True, frames=None, share: float = 0.0):
    """Training image ``index`` of data seed ``seed``: the same pair whenever and wherever it is asked for."""
    from orinkit.lanes.augment import TRAINING_STYLE, augment
    from orinkit.lanes.synth import render_road

    rng = np.random.default_rng([seed, index])
    if frames is not None and rng.random() < share:
        bgr, lanes = frames.load(int(rng.integers(len(frames))), IMG_W, IMG_H)
    else:
        road = render_road(seed * 10**8 + index, IMG_W, IMG_H, options=TRAINING_STYLE)
        bgr, lanes = road.image[:, :, ::-1], road.lanes
    if augmented:
        bgr, lanes = augment(np.ascontiguousarray(bgr), lanes, rng)
    return _pair(bgr, lanes, bool(rng.random() < 0.5))


def _loader(options: TrainOptions, start: int, frames):
    """Batches of images ``start``, ``start + 1``, … in order, drawn by ``options.workers`` processes."""
    import torch

    class Roads(torch.utils.data.Dataset):
        def __getitem__(self, index):
            image, targets = training_pair(index, options.seed, augmented=options.augment, frames=frames,
                                           share=options.frames_share)
            return torch.from_numpy(image), torch.from_numpy(targets)

    class From(torch.utils.data.Sampler):
        def __iter__(self):
            index = start
            while True:
                yield index
                index += 1

    return torch.utils.data.DataLoader(Roads(), batch_size=options.batch, sampler=From(),
                                       num_workers=options.workers, pin_memory=options.device == "cuda",
                                       prefetch_factor=4 if options.workers else None,
                                       worker_init_fn=_leave_stopping_to_the_trainer)


def _leave_stopping_to_the_trainer(worker: int) -> None:
    """Ctrl-C and ``systemctl stop``/``kill -- -PGID`` signal the whole process group: a drawing worker that died of
    it would end the run before the trainer wrote its last checkpoint. The trainer stops the workers itself."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def schedule(step: int, steps: int, elapsed: float, budget: float | None, lr: float, warmup: int) -> float:
    """Linear warm-up, then a cosine to zero over whichever runs out first: steps or the time budget."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    if budget:
        progress = max(progress, elapsed / budget)
    return lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def evaluate(model, count: int, *, device: str = "cpu", batch: int = 8, seed: int = HELD_OUT_SEED, options=None):
    """CULane precision/recall/F1 of ``model`` on ``count`` roads of ``options`` (the training style by default)
    drawn at 640x360 from ``seed``."""
    import torch

    from orinkit.lanes.augment import TRAINING_STYLE
    from orinkit.lanes.metrics import LaneScore, score_image
    from orinkit.lanes.postprocess import postprocess
    from orinkit.lanes.synth import render_road

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
            found = postprocess(output, (IMG_H, IMG_W)).lanes
            total = total + score_image(found, road.lanes, (IMG_H, IMG_W))
    model.train(was_training)
    return total


def _options_dict(options: TrainOptions) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(options).items()}


def _options_from(saved: dict, changes: dict) -> TrainOptions:
    fields = {f.name for f in dataclasses.fields(TrainOptions)}
    # A pause belongs to the process that was asked to pause, not to the run.
    values = {k: v for k, v in saved.items() if k in fields and k not in ("pause_minutes", "pause_at_step")}
    for key in ("init", "frames", "out"):
        if values.get(key) is not None:
            values[key] = Path(values[key])
    values.update(changes)
    return TrainOptions(**values)


def resume_options(out: Path, changes: dict | None = None) -> TrainOptions:
    """The options of the run whose checkpoint is in ``out``, with ``changes`` (only
    :data:`RESUMABLE_CHANGES`) applied; refuses a change that would make the resumed run another run."""
    changes = dict(changes or {})
    refused = sorted(set(changes) - set(RESUMABLE_CHANGES))
    if refused:
        names = ", ".join("--" + k.replace("_", "-") for k in refused)
        raise LaneError(f"--resume continues the run as it was started; {names} would change it",
                        hint="drop those options, or start a new run in another --out folder")
    state = _read_checkpoint(Path(out) / CHECKPOINT)
    return _options_from(state["options"], {"out": Path(out), **changes})


def _read_checkpoint(path: Path) -> dict:
    import torch

    if not path.is_file():
        raise LaneError(f"no checkpoint to resume from at {path}",
                        hint="give --out the folder of the run to resume, or start a run without --resume")
    try:
        # weights_only: the checkpoint holds tensors, numbers, strings and lists only.
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - truncated or foreign files raise many types
        raise LaneError(f"cannot read checkpoint {path}: {type(exc).__name__}: {exc}",
                        hint="it is written whole then renamed: restore it from git, or start the run again") from exc
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise LaneError(f"{path} is not an orinkit training checkpoint (format {CHECKPOINT_FORMAT})",
                        hint="resume from a checkpoint.pt written by python -m orinkit.lanes.train")
    return state


def _write_checkpoint(path: Path, model, optimizer, options: TrainOptions, run: dict) -> None:
    import torch

    from orinkit.core.files import atomic_write_bytes

    buffer = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, "options": _options_dict(options), "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), **run}, buffer)
    atomic_write_bytes(path, buffer.getvalue())


class _Stop:
    """SIGTERM and SIGINT set a flag that the loop reads between steps, so the checkpoint it then writes is
    whole; a second signal interrupts at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict = {}

    def __enter__(self):
        def handle(signum, frame):
            if self.signum is not None:
                raise KeyboardInterrupt
            self.signum = signum

        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self.previous[sig] = signal.signal(sig, handle)
            except ValueError:  # not the main thread
                pass
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self.previous.items():
            signal.signal(sig, previous)


class Paused(Exception):
    """The run stopped with a checkpoint before its end (a pause or a signal); ``--resume`` continues it."""

    def __init__(self, checkpoint: Path, step: int, signum: int | None) -> None:
        super().__init__(f"paused at step {step}; checkpoint {checkpoint}")
        self.checkpoint, self.step, self.signum = checkpoint, step, signum


def train(options: TrainOptions, progress=print, *, resume: bool = False):
    """Train, evaluate and save; returns the path of the weights card. Raises :class:`Paused` when the run stops
    with a checkpoint before its end."""
    import torch

    from orinkit.lanes.architectures import make_lane_model
    from orinkit.lanes.loss import laneatt_loss
    from orinkit.lanes.weights import load_weights

    if options.device == "cuda" and not torch.cuda.is_available():
        raise LaneError("--device cuda but torch sees no CUDA GPU", hint="train on a GPU machine, or --device cpu")
    torch.manual_seed(options.seed)
    model = make_lane_model(options.arch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay)
    checkpoint = options.out / CHECKPOINT
    run = {"step": 0, "seen": 0, "train_seconds": 0.0, "history": [], "sessions": 0}
    if resume:
        state = _read_checkpoint(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        run = {k: state[k] for k in run}
        progress(f"resuming {options.arch} at step {run['step']} of {options.steps} ({run['seen']} images, "
                 f"{run['train_seconds'] / 60:.1f} min of training so far) from {checkpoint}")
    elif options.init is not None:
        weights, _ = load_weights(options.init)
        model.load_state_dict(weights)
        progress(f"continuing from {options.init}")
    elif checkpoint.exists():
        raise LaneError(f"{options.out} holds a run's checkpoint already",
                        hint="continue it with --resume, or start this run in another --out folder")
    run["sessions"] += 1
    model.to(options.device).train()
    optimizer_to(optimizer, options.device)
    anchors = model.anchors
    frames = None
    if options.frames is not None:
        from orinkit.lanes.culane import CulaneFrames

        frames = CulaneFrames.find(options.frames)
        progress(f"fine-tuning on {len(frames)} labelled frames from {options.frames} "
                 f"({options.frames_share:.0%} of the images) and drawn roads")
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
                images, targets = next(batches)
            except RuntimeError:
                if stop.signum is None:
                    raise
                continue  # a worker killed along with us (SIGKILL, say): the checkpoint comes at the loop's top
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


def optimizer_to(optimizer, device: str) -> None:
    """Move an optimiser's state (loaded on the CPU) to ``device``."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if hasattr(value, "to") and key != "step":
                state[key] = value.to(device)


def _finish(model, options: TrainOptions, run: dict, frames, progress) -> Path:
    import torch

    from orinkit.lanes.architectures import ARCHITECTURES
    from orinkit.lanes.augment import STRESS_STYLE
    from orinkit.lanes.weights import save_weights

    minutes = run["train_seconds"] / 60
    progress(f"trained {run['step']} steps ({run['seen']} images) in {minutes:.1f} min; evaluating on "
             f"{options.eval_images} held-out and {options.eval_images} stress roads")
    scores = {}
    if options.eval_images:
        scores["held_out"] = evaluate(model, options.eval_images, device=options.device)
        scores["stress"] = evaluate(model, options.eval_images, device=options.device, seed=STRESS_SEED,
                                    options=STRESS_STYLE)
        for name, score in scores.items():
            progress(f"{name.replace('_', '-')}: {score.describe()}")
    kind, arguments = ARCHITECTURES[options.arch]
    info = {
        "model": kind, "arch": options.arch, "config": arguments, "anchors": int(model.anchors.shape[0]),
        "input": [3, IMG_H, IMG_W], "steps": run["step"], "images": run["seen"], "batch": options.batch,
        "minutes": round(minutes, 2), "sessions": run["sessions"], "lr": options.lr, "data_seed": options.seed,
        "augment": options.augment, "held_out_seed": HELD_OUT_SEED, "stress_seed": STRESS_SEED,
        "held_out_images": options.eval_images,
        "f1": round(scores["held_out"].f1, 4) if scores else None,
        "precision": round(scores["held_out"].precision, 4) if scores else None,
        "recall": round(scores["held_out"].recall, 4) if scores else None,
        "stress_f1": round(scores["stress"].f1, 4) if scores else None,
        "history": run["history"],
        "init": None if options.init is None else str(options.init),
        "frames": None if frames is None else {"folder": str(options.frames), "count": len(frames),
                                               "share": options.frames_share},
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if options.device == "cuda" else
        f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)",
        "command": options.command,
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
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="train in FP32 on CUDA")
    parser.add_argument("--eval-images", type=int, help=f"held-out and stress roads at the end "
                        f"(default {defaults.eval_images} each)")
    parser.add_argument("--eval-minutes", type=float, help=f"held-out F1 this often (default "
                        f"{defaults.eval_minutes:g}; 0: never)")
    parser.add_argument("--log-seconds", type=float, help=f"default {defaults.log_seconds:g}")
    parser.add_argument("--checkpoint-minutes", type=float, help="at most 5 (default 5)")
    parser.add_argument("--pause-after-minutes", dest="pause_minutes", type=float,
                        help="stop with a checkpoint after this long; --resume continues")
    parser.add_argument("--init", type=Path, help="weights card (.json) to start a new run from")
    parser.add_argument("--frames", type=Path,
                        help="a folder of your labelled frames (image + NAME.lines.txt, CULane format) to fine-tune on")
    parser.add_argument("--frames-share", type=float, help="share of training images from --frames (default 0.5)")
    parser.add_argument("--out", type=Path, help=f"the run's folder (default {defaults.out})")
    parser.add_argument("--name", help="the weights card's name (default laneatt_<arch>_synth)")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
