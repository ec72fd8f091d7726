"""Train LaneATT on synthetic roads: ``python -m orinkit.lanes.train --device cuda --minutes 8 --out weights/``.

Roads are drawn on the fly by :mod:`orinkit.lanes.synth` in data-loader worker processes (each image from its own
seed, so a run is reproducible from ``--seed``); half of them mirrored. AdamW with a warm-up and a cosine decay
that ends when the step count or the wall-clock budget ends, whichever comes first; bf16 autocast on CUDA.
Progress (loss, images/s, time left) at least every ``--log-seconds``; a checkpoint every ``--checkpoint-minutes``;
at the end the held-out F1 (CULane rule, roads from another seed) and the FP16 weights with their card.
``--init`` continues from earlier weights (a short warm-up, no optimiser state). On CPU it runs too, for tests.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from orinkit.lanes.errors import LaneError

IMG_W, IMG_H = 640, 360
HELD_OUT_SEED = 1_000_000_007  # held-out roads never overlap training seeds (those count up from --seed)
SHUFFLE_BUFFER = 16


@dataclass(frozen=True)
class TrainOptions:
    device: str = "cuda"
    steps: int = 20000
    minutes: float | None = None  # wall-clock budget for the training loop (evaluation and saving come after)
    batch: int = 32
    workers: int = 8
    lr: float = 6e-4
    weight_decay: float = 1e-4
    warmup_steps: int = 300
    seed: int = 0
    cls_weight: float = 10.0
    bf16: bool = True
    log_seconds: float = 10.0
    checkpoint_minutes: float = 5.0
    eval_images: int = 500
    init: Path | None = None
    frames: Path | None = None  # your own labelled frames (CULane format) to fine-tune on
    frames_share: float = 0.5  # the share of training images taken from ``frames``; the rest are drawn roads
    out: Path = Path("laneatt-train")
    name: str = "laneatt_r18_synth"
    command: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.device not in ("cuda", "cpu"):
            raise LaneError(f"--device must be cuda or cpu, got {self.device}", hint="use --device cuda on a GPU")
        for name in ("steps", "batch"):
            if getattr(self, name) < 1:
                raise LaneError(f"--{name} must be 1 or more", hint="e.g. --batch 32")
        if self.workers < 0 or self.eval_images < 0:
            raise LaneError("--workers and --eval-images must be 0 or more", hint="e.g. --workers 14")
        if not 0.0 <= self.frames_share <= 1.0:
            raise LaneError(f"--frames-share {self.frames_share} is not in [0, 1]", hint="e.g. 0.5")


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
    """One training pair from the road of ``seed``."""
    from orinkit.lanes.synth import render_road

    road = render_road(seed, IMG_W, IMG_H)
    return _pair(road.image[:, :, ::-1], road.lanes, flip)


def _dataset(seed: int, frames=None, share: float = 0.0):
    import torch

    from orinkit.lanes.synth import render_road

    class Roads(torch.utils.data.IterableDataset):
        """Endless roads: worker w of W draws seeds seed + w, seed + w + W, … (disjoint, reproducible). Each road
        is used as drawn and mirrored, which halves the drawing per image; a shuffle buffer keeps the two apart."""

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            worker, count = (info.id, info.num_workers) if info else (0, 1)
            rng = np.random.default_rng(seed + worker)
            buffer: list = []
            index = worker
            while True:
                if frames is not None and rng.random() < share:
                    bgr, lanes = frames.load(int(rng.integers(len(frames))), IMG_W, IMG_H)
                else:
                    road = render_road(seed + index, IMG_W, IMG_H)
                    bgr, lanes = road.image[:, :, ::-1], road.lanes
                    index += count
                buffer += [_pair(bgr, lanes, False), _pair(bgr, lanes, True)]
                while len(buffer) > SHUFFLE_BUFFER:
                    image, targets = buffer.pop(int(rng.integers(len(buffer))))
                    yield torch.from_numpy(image), torch.from_numpy(targets)

    return Roads()


def schedule(step: int, steps: int, elapsed: float, budget: float | None, lr: float, warmup: int) -> float:
    """Linear warm-up, then a cosine to zero over whichever runs out first: steps or the time budget."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    if budget:
        progress = max(progress, elapsed / budget)
    return lr * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def evaluate(model, count: int, *, device: str = "cpu", batch: int = 8, seed: int = HELD_OUT_SEED):
    """CULane precision/recall/F1 of ``model`` on ``count`` held-out roads drawn at 640x360."""
    import torch

    from orinkit.lanes.metrics import LaneScore, score_image
    from orinkit.lanes.postprocess import postprocess
    from orinkit.lanes.synth import render_road

    total = LaneScore(0, 0, 0)
    model.eval()
    for start in range(0, count, batch):
        roads = [render_road(seed + i, IMG_W, IMG_H) for i in range(start, min(count, start + batch))]
        images = np.stack([r.bgr().astype(np.float32).transpose(2, 0, 1) / 255.0 for r in roads])
        with torch.no_grad():
            proposals = model(torch.from_numpy(images).to(device)).float().cpu().numpy()
        for road, output in zip(roads, proposals):
            found = postprocess(output, (IMG_H, IMG_W)).lanes
            total = total + score_image(found, road.lanes, (IMG_H, IMG_W))
    return total


def train(options: TrainOptions, progress=print):
    """Train, evaluate and save; returns the path of the weights card."""
    import torch

    from orinkit.lanes.loss import laneatt_loss
    from orinkit.lanes.model import build_lane_model
    from orinkit.lanes.weights import load_weights, save_weights

    if options.device == "cuda" and not torch.cuda.is_available():
        raise LaneError("--device cuda but torch sees no CUDA GPU", hint="train on a GPU machine, or --device cpu")
    torch.manual_seed(options.seed)
    model = build_lane_model("resnet18", random_weights=True)
    if options.init is not None:
        state, _ = load_weights(options.init)
        model.load_state_dict(state)
        progress(f"continuing from {options.init}")
    model.to(options.device).train()
    anchors = model.anchors
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, weight_decay=options.weight_decay)
    frames = None
    if options.frames is not None:
        from orinkit.lanes.culane import CulaneFrames

        frames = CulaneFrames.find(options.frames)
        progress(f"fine-tuning on {len(frames)} labelled frames from {options.frames} "
                 f"({options.frames_share:.0%} of the images) and drawn roads")
    loader = torch.utils.data.DataLoader(_dataset(options.seed * 100_000_000, frames, options.frames_share),
                                         batch_size=options.batch,
                                         num_workers=options.workers, pin_memory=options.device == "cuda",
                                         persistent_workers=options.workers > 0)
    budget = options.minutes * 60 if options.minutes else None
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if options.device == "cuda" and options.bf16 \
        else torch.autocast("cpu", enabled=False)
    started = last_log = last_save = time.monotonic()
    seen = step = 0
    losses: list[float] = []
    options.out.mkdir(parents=True, exist_ok=True)
    for images, targets in loader:
        elapsed = time.monotonic() - started
        if step >= options.steps or (budget and elapsed >= budget):
            break
        for group in optimizer.param_groups:
            group["lr"] = schedule(step, options.steps, elapsed, budget, options.lr, options.warmup_steps)
        images = images.to(options.device, non_blocking=True).float().div_(255.0)
        targets = targets.to(options.device, non_blocking=True)
        with autocast:
            proposals = model(images)
        parts = laneatt_loss(proposals, anchors, targets, cls_weight=options.cls_weight)
        optimizer.zero_grad(set_to_none=True)
        parts.total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        step += 1
        seen += len(images)
        losses.append(float(parts.total))
        now = time.monotonic()
        if now - last_log >= options.log_seconds:
            last_log = now
            rate = seen / (now - started)
            left = (budget - (now - started)) if budget else (options.steps - step) * len(images) / rate
            progress(f"step {step}: loss {np.mean(losses[-50:]):.4f} (cls {float(parts.cls):.4f}, reg "
                     f"{float(parts.reg):.4f}, {parts.positives} positives), lr {optimizer.param_groups[0]['lr']:.2e}, "
                     f"{rate:.0f} images/s, {left / 60:.1f} min left")
        if now - last_save >= options.checkpoint_minutes * 60:
            last_save = now
            save_weights(model.state_dict(), options.out / "checkpoint.json", {"steps": step}, half=False)
    minutes = (time.monotonic() - started) / 60
    progress(f"trained {step} steps ({seen} images) in {minutes:.1f} min; evaluating on {options.eval_images} "
             "held-out roads")
    score = evaluate(model, options.eval_images, device=options.device) if options.eval_images else None
    if score is not None:
        progress(f"held-out: {score.describe()}")
    info = {
        "model": "LaneATT", "backbone": "resnet18", "anchors": int(anchors.shape[0]), "input": [3, IMG_H, IMG_W],
        "steps": step, "images": seen, "batch": options.batch, "minutes": round(minutes, 2), "lr": options.lr,
        "data_seed": options.seed, "held_out_seed": HELD_OUT_SEED, "held_out_images": options.eval_images,
        "f1": None if score is None else round(score.f1, 4),
        "precision": None if score is None else round(score.precision, 4),
        "recall": None if score is None else round(score.recall, 4),
        "init": None if options.init is None else str(options.init),
        "frames": None if frames is None else {"folder": str(options.frames), "count": len(frames),
                                               "share": options.frames_share},
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if options.device == "cuda" else "cpu", "command": options.command,
    }
    return save_weights(model.state_dict(), options.out / f"{options.name}.json", info)[0].with_name(
        f"{options.name}.json")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--steps", type=int, default=TrainOptions.steps)
    parser.add_argument("--minutes", type=float, default=None, help="wall-clock budget of the training loop")
    parser.add_argument("--batch", type=int, default=TrainOptions.batch)
    parser.add_argument("--workers", type=int, default=TrainOptions.workers, help="road-drawing processes")
    parser.add_argument("--lr", type=float, default=TrainOptions.lr)
    parser.add_argument("--warmup-steps", type=int, default=TrainOptions.warmup_steps)
    parser.add_argument("--seed", type=int, default=0, help="data seed: the roads drawn")
    parser.add_argument("--no-bf16", action="store_true", help="train in FP32 on CUDA")
    parser.add_argument("--eval-images", type=int, default=TrainOptions.eval_images)
    parser.add_argument("--log-seconds", type=float, default=TrainOptions.log_seconds)
    parser.add_argument("--init", type=Path, default=None, help="weights card (.json) to continue from")
    parser.add_argument("--frames", type=Path, default=None,
                        help="a folder of your labelled frames (image + NAME.lines.txt, CULane format) to fine-tune on")
    parser.add_argument("--frames-share", type=float, default=TrainOptions.frames_share,
                        help="share of training images from --frames (the rest: drawn roads)")
    parser.add_argument("--out", type=Path, default=TrainOptions.out)
    parser.add_argument("--name", default=TrainOptions.name)
    args = parser.parse_args(argv)
    try:
        options = TrainOptions(device=args.device, steps=args.steps, minutes=args.minutes, batch=args.batch,
                               workers=args.workers, lr=args.lr, warmup_steps=args.warmup_steps, seed=args.seed,
                               bf16=not args.no_bf16, eval_images=args.eval_images, log_seconds=args.log_seconds,
                               init=args.init, frames=args.frames, frames_share=args.frames_share, out=args.out,
                               name=args.name,
                               command="python -m orinkit.lanes.train " + shlex.join(argv or sys.argv[1:]))
        card = train(options, progress=lambda m: print(m, flush=True))
    except LaneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"wrote {card} and its shards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
