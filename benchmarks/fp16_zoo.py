"""The FP16 gate on a zoo of models with weights at realistic scale, each through edge-convert's library call.

    python benchmarks/fp16_zoo.py [--models resnet18,laneatt] [--samples 8] [--gpu-reference] [--json out.json]
                                  [--plot nodes.png]

Per model: the convertible nodes, the share left in FP16 and the gate's seconds under the default criterion, the
criterion's values with every node in FP16 (range error, cosine), then the same conversion judged by the task
metric (top-1 agreement, LaneATT's lanes, the detector's detections) with its agreement. Weights are realistic
(He-initialised, batch-norm statistics recalibrated on sample inputs, output layers scaled to a trained model's
spread; tests/realistic_models.py): torch's default initialisation gives near-zero outputs that hide FP16 error.
The gate's inputs are 8 such samples (--data), and the residual MLP is the model real FP16 breaks (its sums pass
65504): the gate must catch it.

Dense maps (tests/dense_models.py): ``text_detector`` is a DBNet-style text detector trained here first (1500
steps on drawn pages, a few minutes on the CPU; its map sharp), exported by torch.onnx.export at 1x3x640x640;
``ppocr_det`` is PaddleOCR's PP-OCRv4 DBNet detector as the rapidocr-onnxruntime wheel ships it (``pip install
--no-deps rapidocr-onnxruntime``; skipped when absent). Both are judged on 8 drawn pages; for them the default
(auto) criterion picks the mask metric, and the row also gives the range criterion alone (``--criterion range``).

``voice_activity`` is a voice-activity detector exported as such models are: its sample rate is a 0-d int64 input
beside the float audio (16000 in each sample's --data); 8 frames of drawn 16 kHz audio, half speech-like, half
noise; its task metric is the speech decision (probability > 0.5) per frame.

``laneatt_lite`` and ``laneatt_r18_trained`` are the lane models orinkit ships, with their trained weights as they
are (no rescaling needed: they are real), judged on 8 drawn roads by their lanes.

Goals: >= 95 % of the nodes in FP16 on every model whose FP16 agrees with FP32; LaneATT's and the text detectors'
gates <= 60 s here; the residual MLP caught (FP16 fails at first, nodes kept in FP32 until it passes).

With --gpu-reference (a machine with CUDA and torch) each model also runs in real FP16 on the GPU, and its
agreement with FP32 (range error, cosine) is printed beside the emulation's.

--plot PATH draws the rows measured as a PNG (needs matplotlib): per model, its nodes in FP16 and those the gate
kept in FP32, under the default criterion and under the model's task metric.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import dense_models
import realistic_models as zoo
import torch_models


def text_detector():
    """The DBNet-style detector, trained here on drawn pages until its text map is sharp."""
    net, info = dense_models.train_page_net(steps=1500)
    print(f"{'':16} text_detector trained: {info}, held-out pages: {dense_models.quality(net)}", flush=True)
    return dense_models.TextDetector(net)


def ppocr_det() -> Path | None:
    """PP-OCRv4's DBNet text detector (ONNX) from the rapidocr-onnxruntime wheel, found without importing it (its
    package imports OpenCV); None when it is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "models" / "ch_PP-OCRv4_det_infer.onnx"
    return path if path.is_file() else None


def shipped_lanes(arch: str):
    """A lane model orinkit ships (trained on drawn roads): its own trained weights, no rescaling."""
    from orinkit.lanes.model import build_lane_model

    return lambda: build_lane_model(arch).eval()


def shipped_lanes_missing(name: str) -> bool:
    from orinkit.lanes.weights import has_shipped_weights

    return not has_shipped_weights(SHIPPED[name])


SHIPPED = {"laneatt_lite": "lite", "laneatt_r18_trained": "r18"}


def voice_activity():
    """A voice-activity detector with a 0-d int64 sample-rate input beside the audio (tests/torch_models.py),
    He-initialised, its speech logit scaled to a trained model's spread (std 3, centred) on drawn audio."""
    import torch

    model = torch_models.VoiceActivity().eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Conv1d, torch.nn.Linear)):
                module.weight.normal_(0.0, (2.0 / module.weight[0].numel()) ** 0.5, generator=generator)
                module.bias.normal_(0.0, 0.05, generator=generator)
    calibration = torch.from_numpy(audio_frames(16, seed=100)[:, 0])
    seen = []
    hook = model.head.register_forward_hook(lambda module, args, output: seen.append(output))
    with torch.no_grad():
        model(calibration, torch.tensor(16000))
        hook.remove()
        scale = 3.0 / seen[0].std().item()
        model.head.weight *= scale
        model.head.bias.copy_(-(seen[0] - model.head.bias).median() * scale)  # speech and noise either side of 0.5
    return model


def audio_frames(count: int, *, seed: int) -> np.ndarray:
    """``[count, 1, 512]`` frames of 16 kHz audio: every other one speech-like (harmonics of a 100-300 Hz pitch
    under a syllable's envelope), the others background noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(512) / 16000
    frames = rng.normal(0.0, 0.01, (count, 1, 512))
    for index in range(0, count, 2):
        pitch = rng.uniform(100, 300)
        voice = sum(rng.uniform(0.2, 1.0) / k * np.sin(2 * np.pi * k * pitch * t + rng.uniform(0, 6.3))
                    for k in range(1, 12))
        frames[index, 0] += rng.uniform(0.1, 0.5) * voice * np.hanning(512)
    return frames.astype(np.float32)


# Models with 0-d inputs beside their frames (named "audio"), and each one's value: one per sample in --data.
SCALAR_INPUTS = {"voice_activity": {"sr": np.int64(16000)}}

MODELS = {
    # name: (builder, input shape of one sample, metric)
    "resnet18": (zoo.resnet18, (1, 3, 224, 224), "topk"),
    "resnet50": (zoo.resnet50, (1, 3, 224, 224), "topk"),
    "mobilenet_v3": (zoo.mobilenet_v3, (1, 3, 224, 224), "topk"),
    "efficientnet_b0": (zoo.efficientnet_b0, (1, 3, 224, 224), "topk"),
    "transformer": (zoo.transformer_encoder, (64, 1, 256), "topk"),
    "vit_small": (zoo.vit_small, (1, 3, 224, 224), "topk"),
    "laneatt_r18": (zoo.laneatt, (1, 3, 360, 640), "lanes"),
    "laneatt_lite": (shipped_lanes("lite"), (1, 3, 360, 640), "lanes"),
    "laneatt_r18_trained": (shipped_lanes("r18"), (1, 3, 360, 640), "lanes"),
    "detection_head": (zoo.detection_head, (1, 3, 320, 320), "realistic_models:detections_agree"),
    "residual_mlp": (zoo.residual_mlp, (1, 256), "topk"),
    "voice_activity": (voice_activity, (1, 512), "torch_models:speech_agrees"),
    "text_detector": (text_detector, (1, 3, 640, 640), "mask"),
    "ppocr_det": (ppocr_det, (1, 3, 640, 640), "mask"),
}
DENSE = {"text_detector", "ppocr_det"}
LANES = {"laneatt_r18", "laneatt_lite", "laneatt_r18_trained"}


def samples_for(name: str, shape, count: int) -> np.ndarray:
    """``[count, *shape]`` realistic inputs, from seeds other than the ones the weights were calibrated on."""
    if name in LANES:
        return zoo.road_frames(count, seed=500)[:, None]
    if name == "voice_activity":
        return audio_frames(count, seed=500)
    if name in DENSE:
        frames = dense_models.pages(count, shape[2], seed=500)[:, None]
        return (frames - 0.5) / 0.5 if name == "ppocr_det" else frames  # PaddleOCR's mean and std: 0.5
    if len(shape) == 4:
        return zoo.smooth_images(count, shape[2], shape[3], seed=500)[:, None]
    rng = np.random.default_rng(500)
    scale = 3.0 if name == "residual_mlp" else 1.0  # the MLP's inputs are features of realistic spread
    return (rng.standard_normal((count, *shape)) * scale).astype(np.float32)


def gpu_agreement(model, frames: np.ndarray) -> dict:
    """Real FP16 on the GPU against FP32 on the GPU (TF32 off): range error and cosine per output."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("--gpu-reference needs a CUDA GPU and a CUDA build of torch; none is here")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = model.cuda().eval()
    outputs32, outputs16 = [], []
    with torch.no_grad():
        for frame in frames:
            x = torch.from_numpy(frame).cuda()
            out32 = model(x)
            out16 = model.half()(x.half())
            model.float()
            outputs32.append([o.double().cpu().numpy() for o in (out32 if isinstance(out32, tuple) else (out32,))])
            outputs16.append([o.double().cpu().numpy() for o in (out16 if isinstance(out16, tuple) else (out16,))])
    result = {}
    for index in range(len(outputs32[0])):
        ref = np.concatenate([o[index].ravel() for o in outputs32])
        got = np.concatenate([o[index].ravel() for o in outputs16])
        finite = np.isfinite(got).all()
        result[f"output{index}"] = {
            "range_error": float(np.abs(got - ref).max() / np.abs(ref).max()) if finite else float("inf"),
            "cosine": float(ref @ got / np.linalg.norm(ref) / np.linalg.norm(got)) if finite else float("nan"),
        }
    return result


def convert(path: Path, out: Path, data: Path, metric: str | None, samples: int, **options):
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    options = ConvertOptions(data=data, samples=samples, metric=metric, engine=False, **options)
    return convert_onnx(path, out, options, force=True)


def run_model(name: str, work: Path, samples: int, gpu: bool) -> dict:
    import torch

    from orinkit.convert.torch_export import export_torch

    builder, shape, metric = MODELS[name]
    started = time.perf_counter()
    model = builder()
    frames = samples_for(name, shape, samples)
    data = work / f"{name}.npz"
    extra = {}
    if isinstance(model, Path):  # a published ONNX: its own input name, its dynamic sides fixed at the zoo's size
        import onnx

        onnx_path, input_name = model, onnx.load(str(model), load_external_data=False).graph.input[0].name
        extra = {"shapes": {input_name: shape}}
        np.savez(data, **{input_name: frames})
    elif name in SCALAR_INPUTS:
        scalars = SCALAR_INPUTS[name]
        np.savez(data, audio=frames, **{n: np.full(len(frames), v) for n, v in scalars.items()})
        onnx_path = work / f"{name}.onnx"
        export_torch(model, [torch.from_numpy(frames[0]), *(torch.tensor(v) for v in scalars.values())], onnx_path,
                     input_names=["audio", *scalars], output_names=["prob"])
    else:
        np.savez(data, input=frames)
        outputs = ["logits", "boxes"] if name == "detection_head" else ["map"] if name in DENSE else ["output"]
        onnx_path = work / f"{name}.onnx"
        export_torch(model, [torch.from_numpy(frames[0])], onnx_path, input_names=["input"], output_names=outputs)
    prepared_s = time.perf_counter() - started
    by_criterion = convert(onnx_path, work / f"{name}.edge", data, None, samples, **extra)
    by_metric = convert(onnx_path, work / f"{name}.metric.edge", data, metric, samples, **extra)
    gate, task_gate = by_criterion.gate, by_metric.gate
    first = gate.first.metrics
    row = {
        "model": name, "nodes": gate.nodes, "build_and_export_s": round(prepared_s, 1),
        "fp16_fraction": round(gate.fp16_fraction, 4), "gate_s": round(gate.seconds, 1),
        "evaluations": gate.evaluations, "first_passed": gate.first.passed,
        "first_range_error": max(float("inf") if m.nonfinite else m.range_error for m in first),
        "first_cosine": min(float("nan") if m.nonfinite else m.cosine for m in first),
        "first_nonfinite": sum(m.nonfinite for m in first), "kept_fp32": list(gate.keep_fp32),
        "metric": metric, "metric_fp16_fraction": round(task_gate.fp16_fraction, 4),
        "metric_gate_s": round(task_gate.seconds, 1),
        "first_agreement": None if task_gate.first.task is None else task_gate.first.task.agreement,
        "final_agreement": None if task_gate.final.task is None else task_gate.final.task.agreement,
        "notes": list(gate.notes) + list(task_gate.notes), "decided_by": gate.decided_by,
    }
    if name in DENSE:  # what the default was before the auto criterion: the range criterion on the map
        from orinkit.convert.fp16.criteria import Criterion

        by_range = convert(onnx_path, work / f"{name}.range.edge", data, None, samples,
                           criterion=Criterion(kind="range"), **extra).gate
        row.update(range_fp16_fraction=round(by_range.fp16_fraction, 4), range_gate_s=round(by_range.seconds, 1))
    if gpu and isinstance(model, Path):
        row["notes"].append("--gpu-reference runs torch models only: this one is an ONNX file")
    elif gpu and name in SCALAR_INPUTS:
        row["notes"].append("--gpu-reference feeds one input: this model has more")
    elif gpu:
        row["gpu"] = gpu_agreement(model, frames)
    return row


def plot_nodes(rows: list[dict], path: Path) -> Path:
    """Per model two stacked bars of node counts: FP16 and kept in FP32, by the default criterion and by the
    task metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    figure, axes = plt.subplots(figsize=(9, 0.75 * len(rows) + 1.4), dpi=110)
    labels, positions = [], []
    for index, row in enumerate(reversed(rows)):
        for offset, (fraction, what) in enumerate(((row["fp16_fraction"], "default criterion"),
                                                   (row["metric_fp16_fraction"], row["metric"].split(":")[-1]))):
            y = index * 2.6 + (1 - offset) * 1.0
            fp16 = round(fraction * row["nodes"])
            axes.barh(y, fp16, color="tab:green", height=0.85)
            axes.barh(y, row["nodes"] - fp16, left=fp16, color="tab:red", height=0.85)
            axes.text(row["nodes"] + 2, y, f"{fp16}/{row['nodes']} ({fraction:.0%})", va="center", fontsize=8)
            labels.append(f"{row['model']}: {what}")
            positions.append(y)
    axes.set_yticks(positions, labels, fontsize=8)
    axes.set_xlabel("nodes")
    axes.set_xlim(0, max(row["nodes"] for row in rows) * 1.25)
    legend = [Patch(color="tab:green", label="FP16"), Patch(color="tab:red", label="kept in FP32 by the gate")]
    axes.legend(handles=legend, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False)
    axes.set_title("FP16 nodes per model (edge-convert's gate, FP16 emulated on onnxruntime)", fontsize=10, pad=22)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, bbox_inches="tight")
    plt.close(figure)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, from: " + ", ".join(MODELS))
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--gpu-reference", action="store_true", help="also run real FP16 on a CUDA GPU")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here too")
    parser.add_argument("--plot", type=Path, default=None, help="draw the nodes kept per model as a PNG here")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {', '.join(unknown)}")
    rows = []
    header = (f"{'model':16} {'nodes':>5} {'FP16':>6} {'gate s':>6} {'evals':>5} {'range err':>9} {'cosine':>10} "
              f"{'inf':>4} | {'metric':>10} {'agree':>6} {'FP16':>6} {'gate s':>6}")
    print(header, flush=True)
    with tempfile.TemporaryDirectory(prefix="orinkit-zoo-") as work:
        for name in names:
            if name == "ppocr_det" and ppocr_det() is None:
                print(f"{name:16} skipped: pip install --no-deps rapidocr-onnxruntime (its wheel ships the model)")
                continue
            if name in SHIPPED and shipped_lanes_missing(name):
                print(f"{name:16} skipped: no trained {SHIPPED[name]} weights ship in orinkit/lanes/weights/")
                continue
            row = run_model(name, Path(work), args.samples, args.gpu_reference)
            rows.append(row)
            agreement = "" if row["first_agreement"] is None else f"{row['first_agreement']:.4f}"
            print(f"{name:16} {row['nodes']:5d} {row['fp16_fraction']:6.1%} {row['gate_s']:6.1f} "
                  f"{row['evaluations']:5d} {row['first_range_error']:9.2e} {row['first_cosine']:10.7f} "
                  f"{row['first_nonfinite']:4d} | {row['metric'].split(':')[-1][:10]:>10} {agreement:>6} "
                  f"{row['metric_fp16_fraction']:6.1%} {row['metric_gate_s']:6.1f}", flush=True)
            if "gpu" in row:
                for output, values in row["gpu"].items():
                    print(f"{'':16} real FP16 on the GPU, {output}: range error {values['range_error']:.2e}, "
                          f"cosine {values['cosine']:.7f}")
            if "range_fp16_fraction" in row:
                print(f"{'':16} decided by the {row['decided_by']}")
                print(f"{'':16} the range criterion alone (--criterion range): {row['range_fp16_fraction']:.1%} in "
                      f"FP16, gate {row['range_gate_s']:.1f} s", flush=True)
            for note in row["notes"]:
                print(f"{'':16} note: {note}")
    agreeing = [r for r in rows if r["first_passed"] or r["first_nonfinite"] == 0]
    print()
    print("goals:")
    for row in rows:
        if row["model"] == "residual_mlp":
            caught = not row["first_passed"] and row["kept_fp32"]
            print(f"  residual_mlp (real FP16 overflows): caught, {len(row['kept_fp32'])} node(s) kept in FP32: "
                  f"{'yes' if caught else 'NO'}")
        elif row in agreeing:
            print(f"  {row['model']}: {row['fp16_fraction']:.1%} of nodes in FP16 (goal >= 95%): "
                  f"{'met' if row['fp16_fraction'] >= 0.95 else 'MISSED'}")
        if row["model"] in LANES or row["model"] in DENSE:
            verdict = "met" if row["gate_s"] <= 60 else "MISSED"
            print(f"  {row['model']} gate {row['gate_s']:.1f} s (goal <= 60 s): {verdict}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    if args.plot and rows:
        print(f"wrote {plot_nodes(rows, args.plot)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
