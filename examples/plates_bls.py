"""A license-plate-style pipeline: a detector, orinkit's decode + NMS and a reader, chained by a BLS model that stops
when nothing is found.

``plate_detector`` is a dense YOLOv8-style head (one candidate box and "plate" score per column of the frame,
[1, 5, 128]); ``plate_nms`` is orinkit.detect's post-processing step (decode, class-aware NMS: one box per plate,
boxes [N, 4], N may be 0); ``plate_reader`` scores 8 vertical slices of each box (a stand-in for character
scores). The BLS model ``plates`` runs the reader only when NMS kept a box: a frame without a plate costs the
detector and NMS, not the reader. The server's statistics prove it.

    python examples/plates_bls.py [--work DIR]
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import tritonclient.grpc as grpcclient
from _runner import run_example

from orinkit.client import Client
from orinkit.detect.heads import Head
from orinkit.detect.postprocess import NmsOptions
from orinkit.detect.preprocess import Preprocess
from orinkit.detect.repository import postprocess_spec
from orinkit.repo.add import add_model
from orinkit.repo.bls import add_bls
from orinkit.repo.options import ModelOptions
from orinkit.repo.python_model import add_python_model
from orinkit.repo.signature import TensorSpec
from orinkit.server.local import start_on_free_ports


class PlateDetector(torch.nn.Module):
    """A dense YOLOv8-style head over the frame's columns ([1, 4 + 1 class, 128]): each column inside a run of
    columns holding a bright pixel proposes that run's box (cx, cy, w, h) with a score peaking at the run's centre;
    other columns score 0. Many candidates per plate, as a real head gives: NMS keeps one. Its second output is the
    frame's geometry for mapping boxes back (scale 1, no padding: the detector takes the frame at its own size)."""

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bright = image.mean(0) > 0.5  # [H, W]
        width = bright.shape[1]
        columns = torch.nn.functional.pad(bright.any(0).to(torch.int32), (1, 1))
        edges = columns[1:] - columns[:-1]  # +1 where a run starts, -1 one past its end
        starts, ends = (edges == 1).nonzero().flatten(), (edges == -1).nonzero().flatten()
        raw = torch.zeros(1, 5, width)
        for i in range(starts.shape[0]):
            start, end = int(starts[i]), int(ends[i])
            rows = bright[:, start:end].any(1).nonzero().flatten()
            top, bottom = float(rows.min()), float(rows.max() + 1)
            centre, half = (start + end) / 2, (end - start) / 2
            raw[0, 0, start:end], raw[0, 1, start:end] = centre, (top + bottom) / 2
            raw[0, 2, start:end], raw[0, 3, start:end] = float(end - start), bottom - top
            offsets = (torch.arange(start, end).to(torch.float32) + 0.5 - centre).abs() / half
            raw[0, 4, start:end] = 0.9 - 0.4 * offsets
        geometry = torch.tensor([[1.0, 1.0, 0.0, 0.0, float(image.shape[2]), float(image.shape[1])]])
        return raw, geometry


class PlateReader(torch.nn.Module):
    """Per box, the mean brightness of 8 vertical slices of its crop ("character scores")."""

    def forward(self, image: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        gray = image.mean(0)
        scores = torch.zeros(boxes.shape[0], 8)
        for i in range(boxes.shape[0]):
            x0, y0, x1, y1 = int(boxes[i, 0]), int(boxes[i, 1]), int(boxes[i, 2]), int(boxes[i, 3])
            crop = gray[y0:y1, x0:x1][None, None]
            scores[i] = torch.nn.functional.adaptive_avg_pool2d(crop, (1, 8)).flatten()
        return scores


def save_models(work: Path) -> tuple[Path, Path]:
    detector, reader = work / "plate_detector.pt", work / "plate_reader.pt"
    # Triton's PyTorch backend loads TorchScript, whatever torch's FutureWarning about torch.jit says.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*torch.jit")
        torch.jit.save(torch.jit.script(PlateDetector()), str(detector))  # scripted: the loops depend on the data
        torch.jit.save(torch.jit.script(PlateReader()), str(reader))
    return detector, reader


def build_repository(repo: Path, detector: Path, reader: Path) -> None:
    # TorchScript files do not name their tensors: declare them, named <name>__<index> as the PyTorch backend
    # binds them. max_batch_size 0: the shapes are the full shapes, the number of boxes varies per image.
    whole = ModelOptions(max_batch_size=0)
    image = TensorSpec.parse("image__0:FP32:3x64x128")
    raw, geometry = TensorSpec.parse("output__0:FP32:1x5x128"), TensorSpec.parse("output__1:FP32:1x6")
    placed = add_model(repo, detector, options=whole, inputs=[image], outputs=[raw, geometry])
    add_model(repo, reader, options=whole, inputs=[image, TensorSpec.parse("boxes__1:FP32:-1x4")],
              outputs=[TensorSpec.parse("output__0:FP32:-1x8")])
    # orinkit.detect's decode + NMS as a step of its own, placed without batching: it answers only the boxes it
    # kept, so an empty answer can end the chain.
    head = Head(kind="yolov8", input_name="image__0", input_size=(64, 128), outputs=("output__0",), num_classes=1,
                names=("plate",))
    nms = postprocess_spec(head, Preprocess((64, 128)), NmsOptions(conf=0.25, iou=0.7, max_det=16),
                           {"output__0": raw}, max_batch_size=0, found_only=True)
    add_python_model(repo, nms, name="plate_nms", options=whole)
    print(f"placed plate_detector and plate_reader as {placed.runtime.value}, plate_nms (orinkit.detect)")
    add_bls(repo, {
        "name": "plates",
        "steps": [
            {"model": "plate_detector", "inputs": {"image__0": "IMAGE"},
             "outputs": {"output__0": "RAW", "output__1": "GEOMETRY"}},
            {"model": "plate_nms", "inputs": {"output__0": "RAW", "TRANSFORM": "GEOMETRY"},
             "outputs": {"BOXES": "BOXES"}, "stop_if_empty": "BOXES"},  # no plate: the reader never runs
            {"model": "plate_reader", "inputs": {"image__0": "IMAGE", "boxes__1": "BOXES"},
             "outputs": {"output__0": "SCORES"}},
        ],
        "outputs": ["BOXES", "SCORES"],
    })


def frame(plates: list[tuple[int, int, int, int]]) -> np.ndarray:
    """A dark 3x64x128 frame with a bright rectangle per plate, each with darker "characters" inside."""
    image = np.full((3, 64, 128), 0.1, dtype=np.float32)
    for x0, y0, x1, y1 in plates:
        image[:, y0:y1, x0:x1] = 0.9
        image[:, y0 + 3:y1 - 3, x0 + 2:x1 - 2:4] = 0.6  # still above the detector's threshold
    return image


def reader_calls(stats: grpcclient.InferenceServerClient) -> int:
    return stats.get_inference_statistics("plate_reader").model_stats[0].inference_stats.success.count


def timed(plates: Client, image: np.ndarray, runs: int = 20) -> tuple[dict, float]:
    result = plates(image)
    latencies = []
    for _ in range(runs):
        started = time.perf_counter()
        plates(image)
        latencies.append((time.perf_counter() - started) * 1000)
    return result, statistics.median(latencies)


def run(work: Path) -> dict:
    repo = work / "models"
    build_repository(repo, *save_models(work))
    two_plates, dark = frame([(8, 20, 52, 40), (70, 10, 120, 30)]), frame([])
    server = start_on_free_ports(repo, work / "tritonserver.log")
    try:
        url = server.command.grpc_url
        with Client(url, "plates") as plates, grpcclient.InferenceServerClient(url) as stats:
            before = reader_calls(stats)
            found, found_ms = timed(plates, two_plates)
            after_plates = reader_calls(stats)
            empty, empty_ms = timed(plates, dark)
            after_dark = reader_calls(stats)
    finally:
        server.stop()

    print(f"two plates: {len(found['BOXES'])} boxes {found['BOXES'].astype(int).tolist()}, reader output "
          f"{list(found['SCORES'].shape)}; median {found_ms:.1f} ms; reader calls +{after_plates - before}")
    for box, scores in zip(found["BOXES"].astype(int).tolist(), found["SCORES"]):
        print(f"  box {box}: slice scores {' '.join(f'{s:.2f}' for s in scores)}")
    print(f"dark frame: {len(empty['BOXES'])} boxes, reader output {list(empty['SCORES'].shape)}; median "
          f"{empty_ms:.1f} ms; reader calls +{after_dark - after_plates} (the chain stopped once NMS kept nothing)")
    return {"plate_boxes": sorted(found["BOXES"].tolist()), "plate_scores_shape": tuple(found["SCORES"].shape),
            "dark_boxes": len(empty["BOXES"]), "dark_scores_shape": tuple(empty["SCORES"].shape),
            "reader_calls_plates": after_plates - before, "reader_calls_dark": after_dark - after_plates,
            "plates_ms": found_ms, "dark_ms": empty_ms}


def main(argv: list[str] | None = None, facts: dict | None = None) -> int:
    return run_example(__doc__, run, lambda m: m["reader_calls_dark"] == 0 and m["dark_boxes"] == 0,
                       argv, facts, prefix="plates")


if __name__ == "__main__":
    sys.exit(main())
