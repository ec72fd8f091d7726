"""The digits classifier the INT8 tests quantize: examples/mnist_ensemble.py's DigitNet, trained on the first 1200
of scikit-learn's bundled digits (about a second), exported to ONNX at batch 1; the calibration set and the
held-out samples come from the digits it was not trained on."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def digits_model(folder: Path) -> dict:
    import torch
    from sklearn.datasets import load_digits

    from orinkit.convert import export_torch

    sys.path.insert(0, str(EXAMPLES))
    try:
        import mnist_ensemble
    finally:
        sys.path.remove(str(EXAMPLES))
    data = load_digits()
    x = data.images.astype(np.float32)[:, None]
    model = mnist_ensemble.train(x[:1200], data.target[:1200])
    path = folder / "digits.onnx"
    export_torch(model, [torch.from_numpy(x[:1])], path, input_names=["pixels"], output_names=["logits"])
    calib, held = folder / "calib.npz", folder / "held.npz"
    np.savez(calib, pixels=x[1200:1500])
    np.savez(held, pixels=x[1500:])
    return {"onnx": path, "calib": calib, "data": held, "images": x, "labels": data.target}


def to_digit_range(image, shape):
    """--calib-preprocess for the digits model: a grey picture → [1, 1, 8, 8] in the digits' own 0..16 range."""
    grey = image.convert("L").resize((shape[3], shape[2]))
    return (np.asarray(grey, np.float32) * 16.0 / 255.0)[None, None]



def convert_digits(digits: dict, folder: Path):
    """One default INT8 conversion where TensorRT is absent (calibration 300 digits, gate on 297 others, judged by
    top-1): ``(result, progress lines)``."""
    from orinkit.convert.pipeline import ConvertOptions, convert_onnx

    lines = []
    result = convert_onnx(digits["onnx"], folder / "digits.edge", ConvertOptions(
        int8=True, calib=digits["calib"], data=digits["data"], metric="topk", engine=False), progress=lines.append)
    return result, lines
