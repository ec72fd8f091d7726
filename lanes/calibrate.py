"""The confidence threshold a lane model's card carries, chosen on roads of its own training data.

``python -m orinkit.lanes.calibrate --weights CARD`` (and every training run on drawn roads, at its end).

A LaneATT model keeps a lane when its score beats a threshold; 0.5 is LaneATT's choice for CULane, but a model
continued at a low learning rate on harder roads comes out under-confident: its lanes score 0.3-0.5 and are
dropped (the ``wide-v1`` ``lite`` weights found 82 % of the held-out lines at 0.5 and 91 % at 0.3). So a card
records its own operating point, ``conf_threshold``: the threshold of the best F1 on :data:`CALIBRATION_ROADS` roads
of the run's own data version drawn from :data:`CALIBRATION_SEED` (no held-out, stress or judge road: those
still measure, at the threshold chosen here, and nothing is chosen by them). The demo and the benchmark serve a
card at its threshold; a card without one (weights from before calibration) is served at 0.5.

Calibrating an existing card scores it again at the new threshold (held-out, stress and the judge renderer) and
rewrites the card in place, the old figures kept under ``before_calibration``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.lanes.errors import LaneError

CALIBRATION_SEED = 3_000_000_019  # apart from the training roads (seed * 10**8 + index), held-out and stress seeds
CALIBRATION_ROADS = 200
THRESHOLDS = tuple(round(0.15 + 0.05 * i, 2) for i in range(12))  # 0.15 ... 0.70
DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class Calibration:
    threshold: float
    f1: dict  # threshold -> F1 on the calibration roads
    data: str
    roads: int

    def as_card(self) -> dict:
        return {"conf_threshold": self.threshold,
                "calibration": {"data": self.data, "seed": CALIBRATION_SEED, "roads": self.roads,
                                "f1": {f"{t:.2f}": round(f1, 4) for t, f1 in self.f1.items()}}}


def card_threshold(info: dict | None) -> float:
    """The threshold a card's weights are served at: its calibrated one, else LaneATT's 0.5."""
    value = (info or {}).get("conf_threshold")
    return DEFAULT_THRESHOLD if value is None else float(value)


def card_data(info: dict) -> str:
    """The data version a card's weights were trained on: recorded since calibration came; before, only in the
    command (``--data``); before data versions, the first renderer's ``synth-v1``."""
    import shlex

    if info.get("data"):
        return str(info["data"])
    words = shlex.split(str(info.get("command") or ""))
    for index, word in enumerate(words):
        if word == "--data" and index + 1 < len(words):
            return words[index + 1]
        if word.startswith("--data="):
            return word.partition("=")[2]
    return "synth-v1"


def calibrate(model, data: str, roads: int = CALIBRATION_ROADS, *, device: str = "cpu", batch: int = 8) -> Calibration:
    """The threshold of :data:`THRESHOLDS` with the best CULane F1 on ``roads`` roads of data version ``data``
    (:data:`orinkit.lanes.augment.DATA_VERSIONS`) at 640x360, as drawn (no augmentation). Ties go to the
    threshold nearest 0.5."""
    import torch

    from orinkit.lanes.augment import training_road
    from orinkit.lanes.metrics import LaneScore, score_image
    from orinkit.lanes.postprocess import PostprocessOptions, postprocess
    from orinkit.lanes.train_options import IMG_H, IMG_W

    if roads < 1:
        raise LaneError(f"calibration needs 1 road or more, got {roads}", hint=f"e.g. {CALIBRATION_ROADS}")
    totals = {t: LaneScore(0, 0, 0) for t in THRESHOLDS}
    options = {t: PostprocessOptions(conf_threshold=t) for t in THRESHOLDS}
    was_training = model.training
    model.eval()
    try:
        for start in range(0, roads, batch):
            drawn = [training_road(data, CALIBRATION_SEED + i, IMG_W, IMG_H)
                     for i in range(start, min(roads, start + batch))]
            images = np.stack([image.astype(np.float32).transpose(2, 0, 1) / 255.0 for image, _ in drawn])
            with torch.no_grad():
                outputs = model(torch.from_numpy(images).to(device)).float().cpu().numpy()
            for (_, lanes), output in zip(drawn, outputs):
                for t in THRESHOLDS:
                    found = postprocess(output, (IMG_H, IMG_W), options[t]).lanes
                    totals[t] = totals[t] + score_image(found, lanes, (IMG_H, IMG_W))
    finally:
        model.train(was_training)
    f1 = {t: totals[t].f1 for t in THRESHOLDS}
    best = max(THRESHOLDS, key=lambda t: (round(f1[t], 4), -abs(t - DEFAULT_THRESHOLD)))
    return Calibration(best, f1, data, roads)


def calibrate_card(card: Path, *, roads: int = CALIBRATION_ROADS, eval_images: int | None = None,
                   judge_images: int | None = None, progress=print) -> dict:
    """Calibrate the weights of ``card``, score them again at the threshold found and rewrite the card (atomic);
    returns the new card's information."""
    from orinkit.core.files import atomic_write_text
    from orinkit.lanes.model import build_lane_model
    from orinkit.lanes.train import end_scores

    model = build_lane_model(checkpoint=card)
    info = dict(model.card)
    if info.get("dataset") or info.get("frames"):
        raise LaneError(f"{card} was trained on a lane dataset or your frames, not drawn roads alone",
                        hint="give python -m orinkit.lanes.evaluate --conf-threshold on the dataset's own split")
    data = card_data(info)
    progress(f"calibrating on {roads} {data} roads (seed {CALIBRATION_SEED})")
    found = calibrate(model, data, roads)
    progress("   " + "  ".join(f"{t:.2f}: {f1:.4f}" for t, f1 in found.f1.items()))
    progress(f"conf_threshold {found.threshold:.2f} (was {card_threshold(info):.2f})")
    eval_images = (info.get("held_out_images") or 500) if eval_images is None else eval_images
    judge_images = (info.get("judge_images") or 150) if judge_images is None else judge_images
    before = {k: info.get(k) for k in ("conf_threshold", "f1", "precision", "recall", "stress_f1", "judge_f1")}
    scores = end_scores(model, eval_images, judge_images, found.threshold)
    held, stress = scores["held_out"], scores["stress"]
    progress(f"held-out ({eval_images} roads): {held.describe()}")
    progress(f"stress ({eval_images} roads): {stress.describe()}")
    info.update(found.as_card(), f1=round(held.f1, 4), precision=round(held.precision, 4),
                recall=round(held.recall, 4), stress_f1=round(stress.f1, 4), held_out_images=eval_images,
                before_calibration=before)
    if "judge" in scores:
        progress(f"judge ({judge_images} roads, read only): {scores['judge'].describe()}")
        info.update(judge_f1=round(scores["judge"].f1, 4), judge_images=judge_images)
    atomic_write_text(card, json.dumps(info, indent=2) + "\n")
    progress(f"wrote {card}")
    return info


def main(argv=None) -> int:
    from orinkit.core.errors import EXIT_INTERRUPTED

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, required=True, help="the weights card (.json) to calibrate")
    parser.add_argument("--roads", type=int, default=CALIBRATION_ROADS, help=f"default {CALIBRATION_ROADS}")
    parser.add_argument("--eval-images", type=int, help="held-out and stress roads (default: the card's)")
    parser.add_argument("--judge-images", type=int, help="judge-renderer roads (default: the card's; 0: none)")
    args = parser.parse_args(argv)
    try:
        if not args.weights.is_file() or args.weights.suffix != ".json":
            raise LaneError(f"--weights {args.weights} is not a weights card", hint="name the .json beside its shards")
        for name in ("eval_images", "judge_images"):
            if (getattr(args, name) or 0) < 0:
                raise LaneError(f"--{name.replace('_', '-')} must be 0 or more", hint="e.g. 150")
        calibrate_card(args.weights, roads=args.roads, eval_images=args.eval_images, judge_images=args.judge_images,
                       progress=lambda m: print(m, flush=True))
    except LaneError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # the card is written whole or not at all
        print("interrupted: the card is unchanged", file=sys.stderr)
        return EXIT_INTERRUPTED
    return 0


if __name__ == "__main__":
    sys.exit(main())
