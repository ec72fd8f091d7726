"""Score a lane model on a lane dataset's test list with CULane's metric, per category where it has them.

``python -m orinkit.lanes.evaluate --dataset culane:/data/CULane --weights runs/culane/laneatt_lite_culane.json``

Each image is resized to the 640x360 input (its lanes scaled with it), the model's proposals are post-processed
with LaneATT's settings for the dataset's kind (CULane 0.5 / 50 px / 4 lanes, TuSimple 0.2 / 45 px / 5; override
with ``--conf-threshold``, ``--nms-threshold``, ``--top-k``), and the lanes found are matched to the true ones by
CULane's rule (:mod:`orinkit.lanes.metrics`: 30 px wide on 1640x590, IoU >= 0.5, Hungarian matching). It prints
precision, recall and F1 over the split and for each of CULane's nine test categories; ``cross`` (crossroads,
no lane to find) reports its false positives only, as CULane's own evaluation does. ``--limit N`` scores N images
spread evenly over the list; ``--json PATH`` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.lanes.datasets import KINDS, NO_LANE_CATEGORIES, SPLITS, LaneDataset, problem_of, raise_problem
from orinkit.lanes.errors import DatasetError, LaneError
from orinkit.lanes.metrics import LaneScore
from orinkit.lanes.train_options import IMG_H, IMG_W


@dataclass(frozen=True)
class DatasetScore:
    """CULane counts over the images scored, and per category (name, images, counts) in the dataset's order."""

    images: int
    total: LaneScore
    categories: tuple[tuple[str, int, LaneScore], ...] = ()

    def table(self) -> list[str]:
        rows = [f"{'category':10} {'images':>7} {'precision':>10} {'recall':>8} {'F1':>8}"]
        for name, count, score in (*self.categories, ("overall", self.images, self.total)):
            if name in NO_LANE_CATEGORIES:
                rows.append(f"{name:10} {count:7d} {'-':>10} {'-':>8} {'-':>8}   {score.false_positives} false "
                            "positives (no lane to find: CULane counts these only)")
            else:
                rows.append(f"{name:10} {count:7d} {score.precision:10.4f} {score.recall:8.4f} {score.f1:8.4f}")
        return rows

    def as_dict(self) -> dict:
        def figures(count: int, score: LaneScore) -> dict:
            return {"images": count, "precision": round(score.precision, 4), "recall": round(score.recall, 4),
                    "f1": round(score.f1, 4), "matched": score.true_positives, "extra": score.false_positives,
                    "missed": score.false_negatives}

        return {**figures(self.images, self.total),
                "categories": {name: figures(count, score) for name, count, score in self.categories}}


def spread(count: int, limit: int | None) -> np.ndarray:
    """``limit`` indices spread evenly over ``count`` (lists are ordered by drive: the first N are one scene)."""
    if limit is None or limit >= count:
        return np.arange(count)
    return np.unique(np.linspace(0, count - 1, max(1, limit)).round().astype(int))


class _Images:
    """The images to score, loaded by the data-loader workers: (index, BGR CHW uint8, true lanes, problem)."""

    def __init__(self, data: LaneDataset, indices: np.ndarray) -> None:
        self.data, self.indices = data, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int):
        index = int(self.indices[position])
        try:
            image, lanes = self.data.load(index, IMG_W, IMG_H)
        except DatasetError as exc:
            return index, None, [], problem_of(exc)
        return index, np.ascontiguousarray(image.transpose(2, 0, 1)), lanes, ""


def _as_list(batch):
    return batch


def score_dataset(model, data: LaneDataset, *, device: str = "cpu", batch: int = 8, workers: int = 0,
                  limit: int | None = None, options=None, progress=None) -> DatasetScore:
    """CULane counts of ``model`` on ``data`` (``limit`` images spread over it, or all), per category too.
    ``options``: :class:`~orinkit.lanes.postprocess.PostprocessOptions`, by default LaneATT's for the kind."""
    import torch

    from orinkit.lanes.metrics import score_image
    from orinkit.lanes.postprocess import PostprocessOptions, postprocess

    kind = KINDS[data.kind]
    options = options or PostprocessOptions(kind.conf_threshold, kind.nms_threshold, kind.top_k)
    indices = spread(len(data), limit)
    member: dict[int, list[str]] = {}
    for name, category in data.categories:
        for index in category:
            member.setdefault(index, []).append(name)
    counts = {name: [0, LaneScore(0, 0, 0)] for name, _ in data.categories}
    total, done, last = LaneScore(0, 0, 0), 0, time.monotonic()
    loader = torch.utils.data.DataLoader(_Images(data, indices), batch_size=batch, num_workers=workers,
                                         collate_fn=_as_list)
    was_training = model.training
    model.eval()
    for items in loader:
        raise_problem(item[3] for item in items)
        pixels = torch.from_numpy(np.stack([item[1] for item in items])).to(device).float().div_(255.0)
        with torch.no_grad():
            proposals = model(pixels).float().cpu().numpy()
        for (index, _, truth, _), output in zip(items, proposals):
            score = score_image(postprocess(output, (IMG_H, IMG_W), options).lanes, truth, (IMG_H, IMG_W))
            total = total + score
            for name in member.get(index, ()):
                counts[name][0] += 1
                counts[name][1] = counts[name][1] + score
        done += len(items)
        if progress is not None and time.monotonic() - last >= 30:
            last = time.monotonic()
            progress(f"scored {done}/{len(indices)} images: F1 so far {total.f1:.4f}")
    model.train(was_training)
    categories = tuple((name, count, score) for name, (count, score) in counts.items())
    return DatasetScore(len(indices), total, categories)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, metavar="KIND:PATH",
                        help="culane:PATH, tusimple:PATH, curvelanes:PATH or frames:PATH")
    parser.add_argument("--split", choices=SPLITS, default="test", help="default test")
    parser.add_argument("--weights", type=Path, help="a weights card (.json); default: the best that ships")
    parser.add_argument("--arch", help="the architecture of the shipped weights to take (without --weights)")
    parser.add_argument("--limit", type=int, help="score this many images spread over the list (default all)")
    parser.add_argument("--batch", type=int, default=8, help="default 8")
    parser.add_argument("--workers", type=int, default=1, help="image-loading processes (default 1)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="default cpu")
    parser.add_argument("--conf-threshold", type=float, help="default: LaneATT's for the dataset's kind")
    parser.add_argument("--nms-threshold", type=float, help="in input pixels; default: LaneATT's for the kind")
    parser.add_argument("--top-k", type=int, help="the most lanes per image; default: LaneATT's for the kind")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    return parser


def evaluate_command(args: argparse.Namespace, progress=print) -> DatasetScore:
    """What ``main`` runs, raising :class:`~orinkit.lanes.errors.LaneError` on bad input."""
    import torch

    from orinkit.core.files import atomic_write_text
    from orinkit.lanes.datasets import open_dataset, parse_spec
    from orinkit.lanes.model import build_lane_model
    from orinkit.lanes.postprocess import PostprocessOptions

    kind = KINDS[parse_spec(args.dataset)[0]]
    for name in ("limit", "batch", "top_k"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise LaneError(f"--{name.replace('_', '-')} must be 1 or more", hint="e.g. --batch 8")
    if args.workers < 0:
        raise LaneError("--workers must be 0 or more", hint="0 loads the images in this process")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise LaneError("--device cuda but torch sees no CUDA GPU", hint="evaluate on a GPU machine, or --device cpu")
    options = PostprocessOptions(
        kind.conf_threshold if args.conf_threshold is None else args.conf_threshold,
        kind.nms_threshold if args.nms_threshold is None else args.nms_threshold,
        kind.top_k if args.top_k is None else args.top_k)
    data = open_dataset(args.dataset, args.split)
    model = build_lane_model(args.arch, checkpoint=args.weights).to(args.device)
    arch = (getattr(model, "card", None) or {}).get("arch", type(model).__name__)
    weights = args.weights or f"the shipped {arch} weights"
    progress(f"{data.describe()}: scoring {len(spread(len(data), args.limit)):,} with {weights} ({arch}); "
             f"score > {options.conf_threshold:g}, NMS {options.nms_threshold:g} px, at most {options.top_k} lanes")
    result = score_dataset(model, data, device=args.device, batch=args.batch, workers=args.workers,
                           limit=args.limit, options=options, progress=progress)
    for row in result.table():
        progress(row)
    if args.json is not None:
        figures = {"dataset": args.dataset, "split": args.split, "weights": str(weights),
                   "postprocess": [options.conf_threshold, options.nms_threshold, options.top_k],
                   **result.as_dict()}
        atomic_write_text(args.json, json.dumps(figures, indent=1) + "\n")
        progress(f"wrote {args.json}")
    return result


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        evaluate_command(args, progress=lambda m: print(m, flush=True))
    except LaneError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
