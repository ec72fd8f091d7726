"""Stage-by-stage wall time of edge-convert on torchvision's resnet18 and on LaneATT (random weights, nothing
downloaded).

    python benchmarks/convert.py [--model resnet18|lane] [--batch 4] [--samples 8] [--repeat 3]

Each stage's median over the repeats and its share of the whole run, measured in one process. On a machine
without TensorRT the engine stages are absent and the report says so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torchvision

from orinkit.convert.pipeline import ConvertOptions, convert_torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4, help="max batch of the dynamic profile")
    parser.add_argument("--samples", type=int, default=8, help="inputs for the accuracy gate")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", choices=["resnet18", "lane"], default="resnet18")
    args = parser.parse_args()

    if args.model == "lane":
        from orinkit.lanes.model import build_lane_model

        model = build_lane_model("resnet18", random_weights=True)
        name, shape, output = "image", (3, 360, 640), "proposals"
    else:
        model, name, shape, output = torchvision.models.resnet18(weights=None).eval(), "input", (3, 224, 224), "logits"
    options = ConvertOptions(samples=args.samples, min_shapes={name: (1, *shape)}, opt_shapes={name: (1, *shape)},
                             max_shapes={name: (args.batch, *shape)})
    runs: dict[str, list[float]] = {}
    totals = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as work:
            started = time.perf_counter()
            result = convert_torch(model, [torch.rand(1, *shape)], Path(work) / "model.edge", options,
                                   input_names=[name], output_names=[output], dynamic_batch=True)
            totals.append(time.perf_counter() - started)
        for stage in result.stages:
            runs.setdefault(stage.name, []).append(stage.seconds)
    total = statistics.median(totals)
    print(f"edge-convert on {args.model} (random weights), median of {args.repeat} runs")
    print(f"{'stage':58} {'seconds':>8} {'share':>7}")
    for name, seconds in runs.items():
        median = statistics.median(seconds)
        print(f"{name:58} {median:8.2f} {median / total:7.1%}")
    print(f"{'total (wall, including writing the output)':58} {total:8.2f} {1:7.1%}")
    if not result.engine_built:
        print("no TensorRT here: the engine build and the engine's own accuracy check run on the device")
    print(f"gate: {result.gate.final.metrics[0].describe()} (decided by the {result.gate.decided_by}); "
          f"kept in FP32: {list(result.keep_fp32) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
