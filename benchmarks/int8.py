"""INT8 on trained models: edge-convert's library call with ``int8=True`` on each, judged by its task metric on
held-out samples (never the calibration samples).

Models: the digits classifier the tests train (scikit-learn's digits, examples/mnist_ensemble.py's DigitNet),
PaddleOCR's text-direction classifier, PP-OCRv4's DBNet text detector and its text recogniser (judged by the decoded
text of drawn lines, tests/text_lines.py) as the rapidocr-onnxruntime wheel ships them (``pip install --no-deps
rapidocr-onnxruntime``, or the tests' model cache; skipped when absent), and the trained lane model
(orinkit.lanes, skipped until its weights exist). Per model it prints the share of Conv/MatMul/Gemm nodes in INT8,
FP32/FP16/INT8 task metrics, the conversion time, and the goals met or not.

    python benchmarks/int8.py [--only digits,ppocr_rec] [--int8-min-share 0.45] [--json results.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

GOAL_SHARE = 0.80  # of Conv/MatMul/Gemm nodes in INT8, on the CNNs
GOAL_SECONDS = 300.0  # per model, here
CNNS = {"ppocr_cls", "ppocr_det", "laneatt_lite"}  # digits' 3 compute nodes are below ModelOpt's size rules


def rapidocr_model(name: str) -> Path | None:
    """An ONNX model the rapidocr-onnxruntime wheel ships, found without importing the package (it imports
    OpenCV): installed, else in the tests' model cache (tests/detector_models.py; tests/test_int8_attention.py
    fills it)."""
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is not None and spec.submodule_search_locations:
        path = Path(spec.submodule_search_locations[0]) / "models" / name
        if path.is_file():
            return path
    from detector_models import CACHE

    cached = sorted(CACHE.glob(f"rapidocr-onnxruntime-*/rapidocr_onnxruntime/models/{name}"))
    return cached[-1] if cached else None


def digits(work: Path) -> dict:
    import mnist_ensemble
    import torch
    from sklearn.datasets import load_digits

    from orinkit.convert import export_torch

    data = load_digits()
    x = data.images.astype(np.float32)[:, None]
    model = mnist_ensemble.train(x[:1200], data.target[:1200])  # the rest is never trained on
    path = work / "digits.onnx"
    export_torch(model, [torch.from_numpy(x[:1])], path, input_names=["pixels"], output_names=["logits"])
    np.savez(work / "digits.calib.npz", pixels=x[1200:1500])
    np.savez(work / "digits.data.npz", pixels=x[1500:])
    # ModelOpt's size rules leave 2 of its 3 compute nodes in FP16: below the default --int8-min-share, accepted here
    return {"onnx": path, "calib": work / "digits.calib.npz", "data": work / "digits.data.npz", "metric": "topk",
            "min_share": 0.0}


def text_line(seed: int) -> np.ndarray:
    """A drawn line of text cut out and laid out as PaddleOCR's direction classifier takes it: the crop resized to
    height 48 (width in proportion, at most 192), normalised ((x - 0.5) / 0.5) and padded right with zeros;
    upright or upside down (its classes 0 and 180)."""
    import random
    import string

    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    font = ImageFont.load_default(size=rng.randint(30, 40))
    words = " ".join("".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(2, 7)))
                     for _ in range(rng.randint(1, 3)))
    paper, ink = rng.randint(180, 255), rng.randint(0, 80)
    box = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), words, font=font)
    image = Image.new("RGB", (box[2] + 8, box[3] - box[1] + 8), (paper, paper - rng.randint(0, 20), paper))
    ImageDraw.Draw(image).text((4, 4 - box[1]), words, font=font, fill=(ink, ink, ink))
    if rng.random() < 0.5:
        image = image.rotate(180)
    width = min(192, max(8, round(image.width * 48 / image.height)))
    pixels = np.asarray(image.resize((width, 48)), np.float32).transpose(2, 0, 1) / 255.0
    line = np.zeros((3, 48, 192), np.float32)
    line[:, :, :width] = (pixels - 0.5) / 0.5
    return line


def ppocr_cls(work: Path) -> dict | None:
    path = rapidocr_model("ch_ppocr_mobile_v2.0_cls_infer.onnx")
    if path is None:
        return None
    lines = np.stack([text_line(i) for i in range(320)])[:, None]
    np.savez(work / "cls.calib.npz", x=lines[:200])
    np.savez(work / "cls.data.npz", x=lines[200:])
    return {"onnx": path, "calib": work / "cls.calib.npz", "data": work / "cls.data.npz", "metric": "topk",
            "shapes": {"x": (1, 3, 48, 192)}}


def ppocr_det(work: Path) -> dict | None:
    import dense_models

    path = rapidocr_model("ch_PP-OCRv4_det_infer.onnx")
    if path is None:
        return None
    frames = (dense_models.pages(56, 320, seed=100)[:, None] - 0.5) / 0.5
    np.savez(work / "det.calib.npz", x=frames[:48])
    np.savez(work / "det.data.npz", x=frames[48:])
    # Judged by its answers, the text boxes DBNet's post-processing takes from the map (tests/text_boxes.py), not
    # by the map's pixels: with no metric the auto criterion's mask IoU (>= 0.99 at 0.3/0.5/0.7) kept 48 of its 64
    # compute nodes out of INT8 although masks at IoU 0.93 give the same boxes. One evaluation of its 8 pages takes
    # 1-2 s here: the search needs more than the default 60 s to finish.
    return {"onnx": path, "calib": work / "det.calib.npz", "data": work / "det.data.npz",
            "metric": "text_boxes:boxes_agree", "shapes": {"x": (1, 3, 320, 320)}, "gate_budget": 150.0}


def ppocr_rec(work: Path) -> dict | None:
    import text_lines

    path = rapidocr_model("ch_PP-OCRv4_rec_infer.onnx")
    if path is None:
        return None
    font = text_lines.font_file()
    np.savez(work / "rec.calib.npz", x=text_lines.lines(range(64), font))
    np.savez(work / "rec.data.npz", x=text_lines.lines(range(1000, 1048), font))  # other lines than calibration's
    # Judged by the decoded text (CTC greedy decode, tests/text_lines.py): the goal is >= 90 % of lines unchanged.
    return {"onnx": path, "calib": work / "rec.calib.npz", "data": work / "rec.data.npz",
            "metric": "text_lines:lines_agree", "min_agreement": 0.9, "shapes": {"x": (1, 3, 48, 320)},
            "gate_budget": 150.0}


def laneatt_lite(work: Path) -> dict | None:
    import realistic_models
    import torch

    from orinkit.lanes.export import export_lane_onnx
    from orinkit.lanes.model import build_lane_model
    from orinkit.lanes.weights import has_shipped_weights

    if not has_shipped_weights("lite"):
        return None
    torch.manual_seed(0)
    path = export_lane_onnx(build_lane_model("lite").eval(), work / "laneatt.onnx")
    frames = realistic_models.road_frames(96, seed=700)[:, None]
    np.savez(work / "lane.calib.npz", **{_input_name(path): frames[:64]})
    np.savez(work / "lane.data.npz", **{_input_name(path): frames[64:]})
    return {"onnx": path, "calib": work / "lane.calib.npz", "data": work / "lane.data.npz", "metric": "lanes"}


def _input_name(path: Path) -> str:
    import onnx

    return onnx.load(str(path), load_external_data=False).graph.input[0].name


MODELS = {"digits": digits, "ppocr_cls": ppocr_cls, "ppocr_det": ppocr_det, "ppocr_rec": ppocr_rec,
          "laneatt_lite": laneatt_lite}


def convert(name: str, spec: dict, work: Path, method: str | None = None, min_share: float | None = None) -> dict:
    from orinkit.convert.errors import AccuracyGateError
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    options = ConvertOptions(int8=True, calib=spec["calib"], data=spec["data"], metric=spec["metric"],
                             min_agreement=spec.get("min_agreement"),
                             shapes=spec.get("shapes", {}), calib_method=method,
                             gate_budget=spec.get("gate_budget", 60.0),
                             int8_min_share=spec.get("min_share") if min_share is None else min_share)
    started, load = time.perf_counter(), os.getloadavg()[0]
    try:
        result = convert_onnx(spec["onnx"], work / f"{name}.edge", options, force=True,
                              progress=lambda line: print(f"  [{name}] {line}", file=sys.stderr, flush=True))
        report = result.int8
    except AccuracyGateError as exc:  # a failed INT8 gate is a result too: its report says how far it got
        if exc.report is None or not hasattr(exc.report, "int8_nodes"):
            raise
        report = exc.report
    seconds = time.perf_counter() - started
    rows = report.side_by_side()
    row = rows[-1]  # the deciding measure: the task metric, or the dense map's metric after the range errors
    return {"model": name, "int8_nodes": len(report.int8_nodes), "compute_nodes": report.compute_nodes,
            "share": report.int8_share, "metric": row[0], "fp32": row[1], "fp16": row[2], "int8": row[3],
            "excluded": [e.node for e in report.excluded], "passed": report.passed,
            "calibration": report.calibration_samples, "held_out": report.held_out, "seconds": seconds,
            "load": [round(load, 1), round(os.getloadavg()[0], 1)], "failure": report.failure()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="comma-separated model names")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--calib-method", choices=["entropy", "max"], default=None)
    parser.add_argument("--int8-min-share", type=float, default=None, help="instead of each model's own")
    args = parser.parse_args(argv)
    chosen = args.only.split(",") if args.only else list(MODELS)
    results, skipped = [], []
    with tempfile.TemporaryDirectory(prefix="orinkit-int8-") as folder:
        work = Path(folder)
        for name in chosen:
            spec = MODELS[name](work)
            if spec is None:
                skipped.append(name)
                continue
            results.append(convert(name, spec, work, args.calib_method, args.int8_min_share))
    print("| model | conv/matmul INT8 | FP32 | FP16 | INT8 | metric | excluded | calib / held-out | time | gate |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['model']} | {r['int8_nodes']}/{r['compute_nodes']} ({r['share']:.0%}) | {r['fp32']} | "
              f"{r['fp16']} | {r['int8']} | {r['metric']} | {len(r['excluded'])} | {r['calibration']} / "
              f"{r['held_out']} | {r['seconds']:.1f} s (load {r['load'][0]}-{r['load'][1]}) | "
              f"{'pass' if r['passed'] else 'FAIL'} |")
    for r in results:
        if r["failure"]:
            print(f"{r['model']}: {r['failure']}")
    for name in skipped:
        print(f"skipped {name}: its model is not installed here (see the module's docstring)")
    goals = [
        ("every model within its gate", all(r["passed"] for r in results)),
        (f">= {GOAL_SHARE:.0%} of conv/matmul nodes INT8 on the CNNs ({', '.join(sorted(CNNS & set(chosen)))})",
         all(r["share"] >= GOAL_SHARE for r in results if r["model"] in CNNS)),
        (f"<= {GOAL_SECONDS / 60:g} min per model", all(r["seconds"] <= GOAL_SECONDS for r in results)),
    ]
    for goal, met in goals:
        print(f"goal: {goal}: {'met' if met else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "skipped": skipped}, indent=2) + "\n")
    return 0 if all(met for _, met in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
