"""edge-tune's greedy walk against the exhaustive grid, on two models this machine's tritonserver runs.

    python benchmarks/tune.py [--duration 1] [--latency-budget-ms 60] [--only batching|instances] [--plot tune.png]

- ``batching``: a wide two-layer MLP (2048 -> 8192 -> 2048, 128 MB of FP32 weights) run by onnxruntime in the
  Python backend. One sample reads every weight from memory for little arithmetic, so a batch of 16 costs about
  2.6x one sample (16 ms against 6 ms on the 2-core x86 CPU): the dynamic batcher pays, as it does for a large
  dense layer on a GPU. (The digits MLP this benchmark used before gained less from batching than the run-to-run
  noise: its ~3,000 requests/s were bounded by the load generator, not the server.)
- ``instances``: a small convolutional net on 3x96x96 images (onnxruntime, one thread per instance). Each request
  is real work, so a batch costs almost what its requests cost alone; a second instance uses the second core.

For each model: the grid (every configuration) and the greedy walk under the same p99 budget, each on a server of
its own, one after the other; then the pick is applied (config.pbtxt rewritten, loaded) and measured again.
Goals: the pick's throughput >= 0.95x the grid's best, in <= 1/3 of the grid's time; the applied config measured
within 10 % of the tuner's figure. Run it on an otherwise idle machine: it measures throughput.

--plot PATH keeps the plots edge-tune draws (needs matplotlib): the greedy walk's at PATH and the grid's beside it
(``tune-grid.png``); with both models, each model's name goes before the suffix (``tune-batching.png``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from orinkit.repo.add import add_model
from orinkit.repo.options import ModelOptions
from orinkit.tune import TuneOptions, tune

SPACE = {"instances": (1, 2, 3), "delays_us": (0, 500, 2000), "levels": (1, 2, 4, 8, 16, 32)}


class WideMlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(2048, 8192), torch.nn.ReLU(), torch.nn.Linear(8192, 2048))

    def forward(self, x):
        return self.net(x)


class SmallConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        layers, channels = [], 3
        for width in (32, 64, 64, 128):
            layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
            channels = width
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Linear(128 * 6 * 6, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


MODELS = {"batching": (WideMlp, (1, 2048), 16), "instances": (SmallConv, (1, 3, 96, 96), 16)}


def build(kind: str, folder: Path) -> Path:
    import warnings

    module, shape, max_batch = MODELS[kind]
    model = module().eval()
    folder.mkdir(parents=True, exist_ok=True)
    onnx_path = folder / f"{kind}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(*shape),), str(onnx_path), input_names=["input"],
                          output_names=["output"], dynamic_axes={"input": {0: "b"}, "output": {0: "b"}}, dynamo=False)
    repository = folder / "models"
    add_model(repository, onnx_path, name=kind, runtime="python-onnxruntime",
              options=ModelOptions(max_batch_size=max_batch, parameters={"intra_op_threads": "1"}))
    return repository


def run(kind: str, args, work: Path) -> dict:
    repository = build(kind, work / kind)
    pristine = work / f"{kind}-pristine"
    shutil.copytree(repository, pristine)
    common = dict(SPACE, latency_budget_ms=args.latency_budget_ms, duration_s=args.duration)
    print(f"\n== {kind}: grid", flush=True)
    grid = tune(TuneOptions(kind, repository, exhaustive=True, **common), progress=_quiet)
    grid_s = grid["seconds"]  # the server's start and the sweep
    print(f"   grid: {len(grid['measurements'])} configurations in {grid_s:.0f} s; best {_pick(grid)}", flush=True)
    shutil.rmtree(repository)
    shutil.copytree(pristine, repository)
    print(f"== {kind}: greedy walk, then --apply", flush=True)
    walk = tune(TuneOptions(kind, repository, apply=True, **common), progress=_quiet)
    walk_s = walk["seconds"]  # the same, before --apply's write and measurement
    print(f"   greedy: {len(walk['measurements'])} configurations in {walk_s:.0f} s; pick {_pick(walk)}", flush=True)
    throughput_ratio = walk["pick"]["throughput"] / grid["pick"]["throughput"]  # each measured again, longer
    time_ratio = walk_s / grid_s
    applied = walk["applied"]["ratio_to_sweep"]
    if args.plot:
        from orinkit.tune.report import plot

        path = args.plot if args.only else args.plot.with_name(f"{args.plot.stem}-{kind}{args.plot.suffix}")
        for report, where in ((walk, path), (grid, path.with_name(f"{path.stem}-grid{path.suffix}"))):
            where.parent.mkdir(parents=True, exist_ok=True)
            print(f"   wrote {plot(report, where)}", flush=True)
    ones = grid_one_instance_ratio(grid)
    print(f"   what the dimensions are worth here (grid): best / best with 1 instance and no batching = {ones:.2f}x")
    return {"model": kind, "throughput_ratio": throughput_ratio, "time_ratio": time_ratio, "applied": applied,
            "grid_best": grid["pick"]["label"], "pick": walk["pick"]["label"]}


def grid_one_instance_ratio(report: dict) -> float:
    plain = [m for m in report["measurements"] if m["config"]["instances"] == 1 and m["config"]["max_batch_size"] <= 1]
    base = max((m["best"] or {}).get("throughput", 0.0) for m in plain) if plain else 0.0
    return report["pick"]["throughput"] / base if base else float("nan")


def _pick(report: dict) -> str:
    pick = report["pick"]
    level = pick["confirmed"] or pick["best"]
    return (f"{pick['label']}: {pick['throughput']:.1f} infer/s at concurrency {level['concurrency']}, "
            f"p99 {level['p99_ms']:.1f} ms")


def _quiet(message: str) -> None:
    if message.startswith("pick:") or message.startswith("applied"):
        print("   " + message, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per concurrency level")
    parser.add_argument("--latency-budget-ms", type=float, default=60.0)
    parser.add_argument("--only", choices=list(MODELS), default=None)
    parser.add_argument("--plot", type=Path, default=None,
                        help="keep edge-tune's plots: the greedy walk's here, the grid's beside it")
    args = parser.parse_args()
    print(f"edge-tune: greedy walk vs exhaustive grid (p99 budget {args.latency_budget_ms:g} ms, {args.duration:g} s "
          f"per level; instances {SPACE['instances']}, max batch 1..16, delays {SPACE['delays_us']} us)")
    results = []
    with tempfile.TemporaryDirectory(prefix="tune-bench-") as work:
        for kind in [args.only] if args.only else list(MODELS):
            results.append(run(kind, args, Path(work)))
    print("\nmodel       grid best                        greedy pick                      throughput  time   applied")
    ok = True
    for r in results:
        goals = r["throughput_ratio"] >= 0.95 and r["time_ratio"] <= 1 / 3 and abs(r["applied"] - 1) <= 0.10
        ok &= goals
        print(f"{r['model']:11} {r['grid_best']:32} {r['pick']:32} {r['throughput_ratio']:9.2f}x "
              f"{r['time_ratio']:5.2f}x {r['applied']:7.2f}x  {'met' if goals else 'NOT MET'}")
    print("goals: throughput >= 0.95x the grid's best, time <= 0.33x the grid's, applied within 10 % "
          f"(0.90x-1.10x): {'met' if ok else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
