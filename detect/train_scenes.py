"""Train the drawn-scenes detector on the CPU, judge it on held-out scenes, write its ONNX and card.

    python -m orinkit.detect.train_scenes --out detect/weights --minutes 15

Scenes come from :func:`orinkit.detect.scenes.draw_scene` with seeds ``data_seed, data_seed + 1, ...`` (below
:data:`HELD_OUT_SEED`), drawn by one worker process while the model trains; each batch takes ``fresh`` new scenes
and fills the rest from the scenes drawn so far (waiting for the worker rather than reusing more), so step ``k``
sees the same pictures on any machine. The learning rate follows the clock (warm-up, then a cosine over
``--minutes``), so how many steps a run takes depends on the machine's speed; ``--steps N`` schedules by steps
instead, for a run that repeats exactly (up to floating-point order). Assignment is YOLOv8's task-aligned one in
small (anchors inside or near a truth box, the top 10 by score^0.5 x IoU^6, soft IoU-aware class targets), the
box loss CIoU plus L1 on the side distances; the weights shipped are an exponential moving average. Judged at the
end through :class:`orinkit.detect.Detector` on the exported ONNX, against the truth of scenes
``HELD_OUT_SEED + i`` that training never draws: F1 at IoU 0.5 (conf 0.25, as served) and mAP50-95 (conf 0.001,
as validated).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

from orinkit.core.files import atomic_write_text

HELD_OUT_SEED = 1_000_000_000  # scenes from here on are never trained on: they judge the model
CALIBRATION_SEED = 500_000_000  # nor these: they place the score threshold (see calibrate)
MODEL_NAME = "scenes_yolo"
CROP = (32, 288)  # rows of the 320x320 letterbox a 4:3 scene fills (40..280), trained on with 8 rows of pad
CLS_GAIN = 1.0  # YOLOv8's 0.5 doubled: telling the classes apart is what a short run learns last


def _draw(seed: int):
    """One training sample: a 4:3 scene of 4-12 objects (denser than draw_scene's 1-12: more to learn from per
    step, the same kinds of objects and backgrounds), or of 8-20 small ones, letterboxed to 320x320 as the Detector
    will (centred, 114) and cropped to CROP rows: RGB uint8 [256, 320, 3], boxes [M, 4] in the crop's pixels,
    classes [M]."""
    from orinkit.detect.preprocess import Preprocess, letterbox
    from orinkit.detect.scene_model import IMGSZ
    from orinkit.detect.scenes import draw_scene

    # a third of the scenes hold 8-20 objects of only 16-64 px: the small ones are the hard ones to learn
    if seed % 3 == 2:
        scene = draw_scene(seed, objects=8 + seed % 13, sizes=(16, 64), background=False)
    else:
        scene = draw_scene(seed, objects=4 + seed % 9, background=False)
    canvas, transform = letterbox(scene.image, Preprocess(IMGSZ))
    boxes = transform.to_model(scene.truth.xyxy)
    boxes[:, [1, 3]] -= CROP[0]
    return np.ascontiguousarray(canvas[CROP[0]:CROP[1], :, ::-1]), boxes.astype(np.float32), scene.truth.class_id


def _worker(first_seed: int, queue) -> None:
    seed = first_seed
    while True:
        queue.put(_draw(seed))
        seed += 1


# ---------------------------------------------------------------- assignment and loss

def _pairwise_iou(a, b):
    """IoU of boxes a [B, M, 4] with b [B, N, 4] (xyxy): [B, M, N]."""
    import torch

    lt = torch.maximum(a[:, :, None, :2], b[:, None, :, :2])
    rb = torch.minimum(a[:, :, None, 2:], b[:, None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area_a = (a[..., 2:] - a[..., :2]).clamp(min=0).prod(-1)
    area_b = (b[..., 2:] - b[..., :2]).clamp(min=0).prod(-1)
    return inter / (area_a[:, :, None] + area_b[:, None, :] - inter + 1e-7)


def _ciou(a, b):
    """Complete IoU of matching rows of a and b [K, 4] (xyxy)."""
    import torch

    lt, rb = torch.maximum(a[:, :2], b[:, :2]), torch.minimum(a[:, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    wa, ha = (a[:, 2] - a[:, 0]).clamp(min=1e-6), (a[:, 3] - a[:, 1]).clamp(min=1e-6)
    wb, hb = (b[:, 2] - b[:, 0]).clamp(min=1e-6), (b[:, 3] - b[:, 1]).clamp(min=1e-6)
    iou = inter / (wa * ha + wb * hb - inter + 1e-7)
    outer = (torch.maximum(a[:, 2:], b[:, 2:]) - torch.minimum(a[:, :2], b[:, :2])).pow(2).sum(-1) + 1e-7
    centres = ((a[:, :2] + a[:, 2:]) - (b[:, :2] + b[:, 2:])).pow(2).sum(-1) / 4
    v = (4 / math.pi ** 2) * (torch.atan(wb / hb) - torch.atan(wa / ha)).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + 1e-7))
    return iou - (centres / outer + v * alpha)


def assign(scores, boxes, centres, strides, gt_boxes, gt_classes, gt_valid, topk: int = 10):
    """Task-aligned assignment: (foreground [B, N], target boxes [B, N, 4], target scores [B, N, C]).

    Candidates of a truth box are anchors whose centre lies inside it or within one stride of its centre (so the
    smallest boxes have some at every level); of those, the ``topk`` with the best score^0.5 x IoU^6; an anchor
    claimed by several truths goes to the one it overlaps most."""
    import torch

    batch, count = gt_classes.shape
    num_classes = scores.shape[2]
    ax, ay = centres[0][None, None], centres[1][None, None]
    x1, y1, x2, y2 = (gt_boxes[..., i, None] for i in range(4))
    inside = (ax > x1) & (ax < x2) & (ay > y1) & (ay < y2)
    near = ((ax - (x1 + x2) / 2).abs() < strides) & ((ay - (y1 + y2) / 2).abs() < strides)
    candidate = (inside | near) & gt_valid[..., None]
    iou = _pairwise_iou(gt_boxes, boxes) * candidate
    class_scores = scores.transpose(1, 2).gather(1, gt_classes[..., None].expand(-1, -1, scores.shape[1]))
    metric = class_scores.pow(0.5) * iou.pow(6) * candidate
    top = metric.topk(topk, dim=-1).indices
    chosen = torch.zeros_like(metric, dtype=torch.bool).scatter_(-1, top, True) & candidate
    several = chosen.sum(1, keepdim=True) > 1
    best = torch.nn.functional.one_hot((iou * chosen).argmax(1), count).transpose(1, 2).bool()
    chosen = torch.where(several, best & candidate, chosen)
    foreground = chosen.any(1)
    owner = chosen.float().argmax(1)
    target_boxes = gt_boxes.gather(1, owner[..., None].expand(-1, -1, 4))
    target_classes = gt_classes.gather(1, owner)
    metric = metric * chosen
    norm = metric * (iou * chosen).amax(-1, keepdim=True) / (metric.amax(-1, keepdim=True) + 1e-9)
    strength = norm.amax(1) * foreground
    target_scores = torch.nn.functional.one_hot(target_classes, num_classes).float() * strength[..., None]
    return foreground, target_boxes, target_scores


def loss_terms(model, images, gt_boxes, gt_classes, gt_valid):
    """(total, box, l1, cls) losses of one batch, YOLOv8's weights (box 7.5; L1 1.5 in DFL's place) but cls 1."""
    import torch

    distances, logits = model.raw(images)
    height, width = images.shape[2:]
    boxes = model.boxes(distances, height, width).transpose(1, 2)
    centres, strides = model.grid(height, width)
    with torch.no_grad():
        foreground, target_boxes, target_scores = assign(logits.sigmoid().transpose(1, 2), boxes.detach(), centres,
                                                         strides, gt_boxes, gt_classes, gt_valid)
    total = max(float(target_scores.sum()), 1.0)
    cls = torch.nn.functional.binary_cross_entropy_with_logits(logits.transpose(1, 2), target_scores,
                                                               reduction="sum") / total
    if foreground.any():
        weight = target_scores.sum(-1)[foreground]
        box = ((1 - _ciou(boxes[foreground], target_boxes[foreground])) * weight).sum() / total
        anchor = centres.T[None].expand(len(images), -1, -1)[foreground]
        stride = strides.T[None].expand(len(images), -1, -1)[foreground]
        wanted = torch.cat((anchor - target_boxes[foreground][:, :2], target_boxes[foreground][:, 2:] - anchor), 1)
        wanted = (wanted / stride).clamp(min=0)
        l1 = (torch.nn.functional.smooth_l1_loss(distances.transpose(1, 2)[foreground], wanted, reduction="none")
              .mean(-1) * weight).sum() / total
    else:
        box = l1 = logits.sum() * 0
    return 7.5 * box + 1.5 * l1 + CLS_GAIN * cls, float(box.detach()), float(l1.detach()), float(cls.detach())


# ---------------------------------------------------------------- batches

def _batch(samples, rng: np.random.Generator):
    """NCHW float tensor (RGB /255), padded truth; each image flipped left-right and/or upside down at random
    (every class is its own mirror image)."""
    import torch

    count = max(len(s[1]) for s in samples) or 1
    images = np.empty((len(samples), 3, CROP[1] - CROP[0], 320), np.float32)
    boxes = np.zeros((len(samples), count, 4), np.float32)
    classes = np.zeros((len(samples), count), np.int64)
    valid = np.zeros((len(samples), count), bool)
    height, width = images.shape[2:]
    for index, (pixels, xyxy, class_id) in enumerate(samples):
        xyxy = xyxy.copy()
        if rng.random() < 0.5:
            pixels = pixels[:, ::-1]
            xyxy[:, [0, 2]] = width - xyxy[:, [2, 0]]
        if rng.random() < 0.5:
            pixels = pixels[::-1]
            xyxy[:, [1, 3]] = height - xyxy[:, [3, 1]]
        np.multiply(pixels.transpose(2, 0, 1), np.float32(1 / 255), out=images[index])
        boxes[index, :len(xyxy)], classes[index, :len(xyxy)], valid[index, :len(xyxy)] = xyxy, class_id, True
    return torch.from_numpy(images), torch.from_numpy(boxes), torch.from_numpy(classes), torch.from_numpy(valid)


def _average(averaged, model, decay: float) -> None:
    import torch

    with torch.no_grad():
        for mine, theirs in zip(averaged.state_dict().values(), model.state_dict().values()):
            if mine.dtype.is_floating_point:
                mine.lerp_(theirs, 1 - decay)
            else:
                mine.copy_(theirs)


# ---------------------------------------------------------------- judging

def evaluate(model_path: Path, scenes: int = 100, first_seed: int = HELD_OUT_SEED) -> dict:
    """F1 at IoU 0.5 (conf 0.25) and mAP50-95 (conf 0.001) of the ONNX model on held-out drawn scenes."""
    from orinkit.detect.detector import Detector
    from orinkit.detect.metrics import detection_f1, map50_95
    from orinkit.detect.postprocess import NmsOptions
    from orinkit.detect.scenes import draw_scene

    served = Detector(model_path, providers=["CPUExecutionProvider"])
    validating = Detector(model_path, options=NmsOptions(conf=0.001), providers=["CPUExecutionProvider"])
    truths, found, loose = [], [], []
    for seed in range(first_seed, first_seed + scenes):
        scene = draw_scene(seed)
        truths.append(scene.truth)
        found.append(served(scene.image))
        loose.append(validating(scene.image))
    return {"held_out_scenes": scenes, "held_out_seed": first_seed, "held_out_objects": sum(map(len, truths)),
            "f1": round(detection_f1(truths, found), 4), "map50_95": round(map50_95(truths, loose), 4)}


def calibrate(model, scratch: Path, scenes: int = 100, first_seed: int = CALIBRATION_SEED) -> dict:
    """Shift the class biases so the served threshold (conf 0.25) sits where F1 is best on ``scenes`` calibration
    scenes (neither trained on nor held out). A shift of every class logit is monotone: the order of the scores,
    hence NMS and mAP, are unchanged; only which scores pass 0.25 moves (Platt-style calibration, one parameter)."""
    import torch

    from orinkit.detect.detector import Detector
    from orinkit.detect.metrics import detection_f1
    from orinkit.detect.postprocess import NmsOptions
    from orinkit.detect.scene_model import export_onnx
    from orinkit.detect.scenes import CLASSES, draw_scene

    export_onnx(model, scratch, CLASSES)
    try:
        loose = Detector(scratch, options=NmsOptions(conf=0.05), providers=["CPUExecutionProvider"])
        truths, found = [], []
        for seed in range(first_seed, first_seed + scenes):
            scene = draw_scene(seed, background=False)
            truths.append(scene.truth)
            found.append(loose(scene.image))
    finally:
        scratch.unlink(missing_ok=True)
    thresholds = np.round(np.arange(0.15, 0.61, 0.025), 3)
    scores = [detection_f1(truths, [d[d.score > t] for d in found]) for t in thresholds]
    best = float(thresholds[int(np.argmax(scores))])
    shift = math.log(0.25 / 0.75) - math.log(best / (1 - best))
    with torch.no_grad():
        for head in model.heads:
            head.cls[-1].bias += shift
    return {"calibration_scenes": scenes, "calibration_seed": first_seed, "calibrated_threshold": best,
            "calibration_f1_at_0.25": round(scores[int(np.argmin(np.abs(thresholds - 0.25)))], 4),
            "calibration_f1": round(max(scores), 4), "score_shift": round(shift, 4)}


# ---------------------------------------------------------------- training

def train(out: Path, minutes: float, *, steps_wanted: int | None = None, batch: int = 16, fresh: int = 2,
          lr: float = 5e-3, seed: int = 0, data_seed: int = 0, threads: int = 1, held_out: int = 100,
          bf16: bool = True, checkpoint: Path | None = None, log=None) -> dict:
    """Train for ``minutes`` (or ``steps_wanted`` steps, the minutes then a limit), export to ``out`` and judge."""
    import torch

    from orinkit.detect.scene_model import build, export_onnx
    from orinkit.detect.scenes import CLASSES
    from orinkit.detect.train_scenes import _worker  # by its module's name: a spawned child cannot find __main__'s

    log = log or (lambda line: print(line, flush=True))

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue(maxsize=64)
    worker = context.Process(target=_worker, args=(data_seed, queue), daemon=True)
    worker.start()
    model = build(len(CLASSES)).to(memory_format=torch.channels_last)  # oneDNN's fast layout on x86
    model.train()
    waited = 0.0
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=5e-4)
    averaged = copy.deepcopy(model).eval()  # an exponential moving average of the weights is what ships
    drawn: list = []
    start = time.monotonic()
    budget = minutes * 60
    steps = images = 0
    history = []
    try:
        while True:
            elapsed = time.monotonic() - start
            if elapsed >= budget or (steps_wanted and steps >= steps_wanted):
                break
            # warm-up then cosine, over the time budget where the step count is not known in advance
            progress = steps / steps_wanted if steps_wanted else elapsed / budget
            factor = min(1.0, (steps + 1) / 100) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * progress)))
            for group in optimiser.param_groups:
                group["lr"] = lr * factor
            waiting = time.monotonic()
            new = [queue.get() for _ in range(fresh if drawn else batch)]
            waited += time.monotonic() - waiting
            picks = [drawn[i] for i in rng.integers(0, len(drawn), batch - len(new))] if drawn else []
            drawn.extend(new)
            images_t, *truth = _batch(new + picks, rng)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss, box, l1, cls = loss_terms(model, images_t.contiguous(memory_format=torch.channels_last), *truth)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            optimiser.step()
            steps += 1
            _average(averaged, model, 0.998 * (1 - math.exp(-steps / 200)))
            images += batch
            if steps % 50 == 0:
                history.append([steps, round(elapsed / 60, 2), round(loss.item(), 4), round(box, 4), round(l1, 4),
                                round(cls, 4)])
                log(f"step {steps} {elapsed / 60:.1f} min (waited {waited / 60:.1f}) scenes {len(drawn)} "
                    f"loss {loss.item():.3f} (box {box:.3f} l1 {l1:.3f} cls {cls:.3f})")
    finally:
        worker.terminate()
        worker.join()
    trained_minutes = (time.monotonic() - start) / 60
    out.mkdir(parents=True, exist_ok=True)
    if checkpoint:
        torch.save(averaged.state_dict(), checkpoint)
    calibrated = calibrate(averaged, out / f".{MODEL_NAME}.calibrating.onnx")
    log(f"calibrated: {calibrated}")
    onnx_path = export_onnx(averaged, out / f"{MODEL_NAME}.onnx", CLASSES)
    log(f"exported {onnx_path} ({onnx_path.stat().st_size} bytes); judging on {held_out} held-out scenes")
    judged = evaluate(onnx_path, held_out)
    card = {"model": MODEL_NAME, "format": "ONNX FP32, Ultralytics YOLOv8 raw head [B, 4 + nc, N]",
            "names": list(CLASSES), "input": [3, 320, 320], "strides": [8, 16, 32],
            "steps": steps, "scheduled_by": "steps" if steps_wanted else "minutes", "images": images,
            "distinct_scenes": len(drawn), "batch": batch, "fresh_per_batch": fresh,
            "minutes": round(trained_minutes, 2), "lr": lr, "seed": seed, "data_seed": data_seed, "threads": threads,
            "bf16": bf16, "waited_minutes": round(waited / 60, 2), **calibrated, **judged,
            "f1_conf": 0.25, "map_conf": 0.001, "iou": 0.5, "history": history,
            "command": "nice -n 5 python -m orinkit.detect.train_scenes " + " ".join(sys.argv[1:])}
    atomic_write_text(out / f"{MODEL_NAME}.json", json.dumps(card, indent=2) + "\n")
    log(json.dumps({k: v for k, v in card.items() if k != "history"}))
    return card


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orinkit.detect.train_scenes", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for scenes_yolo.onnx and scenes_yolo.json")
    parser.add_argument("--minutes", type=float, default=15.0, help="training time (wall clock)")
    parser.add_argument("--steps", type=int, default=None,
                        help="schedule by steps and stop after this many (--minutes still limits)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--fresh", type=int, default=2, help="new scenes per batch (the rest are reused)")
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (one is fastest on a busy machine)")
    parser.add_argument("--no-bf16", dest="bf16", action="store_false",
                        help="train in FP32 (bfloat16 autocast is ~1.8x faster where the CPU has AMX or AVX-512 BF16)")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="also save the averaged weights (torch state dict, before calibration) here")
    parser.add_argument("--held-out", type=int, default=100, help="held-out scenes judged at the end")
    args = parser.parse_args(argv)
    if not 0 < args.fresh <= args.batch:
        parser.error("--fresh must be in 1..--batch")
    train(args.out, args.minutes, steps_wanted=args.steps, batch=args.batch, fresh=args.fresh, lr=args.lr,
          seed=args.seed, data_seed=args.data_seed, threads=args.threads, held_out=args.held_out, bf16=args.bf16,
          checkpoint=args.checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
