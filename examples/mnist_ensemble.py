"""Digits from image bytes: a small torch classifier behind an ensemble that decodes PNG/JPEG on the server.

Trains on scikit-learn's bundled 8x8 digits (nothing downloaded), exports to ONNX, lays out
``mnist`` = image step (GRAY, 8x8) -> the classifier -> top-3, serves it on a local tritonserver, measures the
ensemble's accuracy on the held-out digits sent as PNG images next to the in-process model's, then runs
edge-bench on one JPEG digit.

    python examples/mnist_ensemble.py [--work DIR]
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import numpy as np
import torch
from _runner import run_example
from PIL import Image
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from orinkit.client import Client
from orinkit.client.bench import bench
from orinkit.convert import export_torch
from orinkit.repo.add import add_model
from orinkit.repo.ensemble import add_ensemble
from orinkit.repo.steps import ImagePreprocess, TopK, add_step
from orinkit.server.local import start_on_free_ports

SEED = 0


class DigitNet(torch.nn.Module):
    """Two small convolutions and a linear head; takes pixels in the digits' own 0..16 range."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.head = torch.nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        return self.head(self.features(x / 16.0).flatten(1))


def train(x: np.ndarray, y: np.ndarray) -> DigitNet:
    torch.manual_seed(SEED)
    model = DigitNet()
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    images, labels = torch.from_numpy(x), torch.from_numpy(y)
    order = torch.Generator().manual_seed(SEED)
    # Batches of 64 8x8 images are too small to share out between threads: one thread is several times faster,
    # and far faster still when other processes (a server) want the cores too.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(15):  # ~1400 images: about a second
            for batch in torch.randperm(len(images), generator=order).split(64):
                optimiser.zero_grad()
                torch.nn.functional.cross_entropy(model(images[batch]), labels[batch]).backward()
                optimiser.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def encode(digit: np.ndarray, fmt: str) -> bytes:
    """An 8x8 digit (0..16) as a 32x32 8-bit image, the way a camera crop would arrive."""
    pixels = np.rint(digit * 255 / 16).astype(np.uint8)
    image = Image.fromarray(pixels, "L").resize((32, 32), Image.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def build_repository(repo: Path, onnx: Path) -> None:
    model = add_model(repo, onnx, name="digits")  # runtime auto: onnxruntime_onnx, or python-onnxruntime here
    print(f"placed digits as {model.runtime.value}")
    # scale 16/255 turns the 8-bit pixels back into the 0..16 the model was trained on; nearest resizing keeps
    # each 4x4 block's value exactly (bilinear would blend neighbouring pixels when shrinking 32 -> 8).
    add_step(repo, ImagePreprocess(width=8, height=8, color_order="GRAY", scale=16 / 255, dtype="FP32",
                                   interpolation="nearest"), name="digits_pre")
    add_step(repo, TopK(k=3, num_classes=10), name="digits_top")
    add_ensemble(repo, {
        "name": "mnist",
        "steps": [
            {"model": "digits_pre", "inputs": {"IMAGE": "image"}, "outputs": {"TENSOR": "pixels"}},
            {"model": "digits", "inputs": {"pixels": "pixels"}, "outputs": {"logits": "logits"}},
            {"model": "digits_top", "inputs": {"LOGITS": "logits"}, "outputs": {"SCORES": "scores",
                                                                                "CLASS_IDS": "class_ids"}},
        ],
        "outputs": ["scores", "class_ids"],
    })


def run(work: Path) -> dict:
    digits = load_digits()
    x = digits.images.astype(np.float32)[:, None]  # [N, 1, 8, 8], values 0..16
    x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.2, random_state=SEED,
                                                        stratify=digits.target)
    started = time.perf_counter()
    model = train(x_train, y_train)
    print(f"trained on {len(y_train)} digits in {time.perf_counter() - started:.1f} s")
    with torch.no_grad():
        local = float((model(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean())
    onnx = work / "digits.onnx"
    export_torch(model, [torch.from_numpy(x_test[:1])], onnx, input_names=["pixels"], output_names=["logits"],
                 dynamic_batch=True)
    repo = work / "models"
    build_repository(repo, onnx)

    server = start_on_free_ports(repo, work / "tritonserver.log")
    try:
        url = server.command.grpc_url
        images = np.array([[encode(d[0], "PNG")] for d in x_test], dtype=np.object_)  # [N, 1] encoded bytes
        with Client(url, "mnist") as classify:  # batches of 8, the ensemble's max_batch_size: one request each
            top1 = np.concatenate([classify(images[i:i + 8], outputs=["class_ids"])[:, 0]
                                   for i in range(0, len(images), 8)])
        served = float((top1 == y_test).mean())
        print(f"accuracy on {len(y_test)} held-out digits: ensemble (PNG bytes) {served:.3f}, "
              f"in-process torch {local:.3f}")
        report = bench(url, "mnist", levels=(1,), duration_s=None, requests=50, payload=encode(x_test[0, 0], "JPEG"))
    finally:
        server.stop()
    ours, plain = report["levels"][0]["orinkit"], report["levels"][0]["tritonclient"]
    print(f"edge-bench mnist, one JPEG digit, 50 requests at concurrency 1: orinkit Client "
          f"{ours['throughput']:.0f} req/s (p50 {ours['p50_ms']:.2f} ms, {ours['errors']} failed), plain "
          f"tritonclient {plain['throughput']:.0f} req/s (p50 {plain['p50_ms']:.2f} ms, {plain['errors']} failed)")
    return {"served_accuracy": served, "local_accuracy": local, "bench_throughput": ours["throughput"],
            "bench_failures": ours["errors"] + plain["errors"], "test_images": len(y_test)}


def main(argv: list[str] | None = None, facts: dict | None = None) -> int:
    def passed(m):
        return abs(m["served_accuracy"] - m["local_accuracy"]) <= 0.02 and m["bench_failures"] == 0

    return run_example(__doc__, run, passed, argv, facts, prefix="mnist")


if __name__ == "__main__":
    sys.exit(main())
