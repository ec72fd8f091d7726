"""A repository built with orinkit's own library, holding every kind of model, for check and server tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from conftest import DATA
from torch_models import Affine, TinyClassifier, export

from orinkit.formats import EngineManifest, ProfileShape, TensorSpec, write_manifest
from orinkit.repo.add import add_model
from orinkit.repo.ensemble import add_ensemble
from orinkit.repo.options import ModelOptions
from orinkit.repo.steps import ImagePreprocess, TopK, add_step

CLASSIFY = {
    "name": "classify",
    "steps": [
        {"model": "pre", "inputs": {"IMAGE": "image"}, "outputs": {"TENSOR": "pixels", "ORIGINAL_SIZE": "size"}},
        {"model": "net", "inputs": {"input": "pixels"}, "outputs": {"logits": "logits"}},
        {"model": "top", "inputs": {"LOGITS": "logits"}, "outputs": {"SCORES": "scores", "CLASS_IDS": "ids"}},
    ],
    "outputs": ["scores", "ids", "size"],
}


def stand_in_plan(folder: Path) -> Path:
    """Placeholder plan bytes (no TensorRT here) with a real manifest, as edge-convert writes it."""
    plan = folder / "lane.plan"
    plan.write_bytes(b"stand-in plan bytes: no TensorRT on this machine")
    write_manifest(plan, EngineManifest(
        inputs=(TensorSpec("input", "FP16", (-1, 3, 360, 640)),),
        outputs=(TensorSpec("proposals", "FP32", (-1, 2784, 77)),),
        profiles=({"input": ProfileShape((1, 3, 360, 640), (1, 3, 360, 640), (4, 3, 360, 640))},),
        precision="fp16",
    ))
    return plan


def build_servable(repository: Path, work: Path, *, batching: ModelOptions | None = None) -> Path:
    """Models the local server loads: an ONNX classifier (onnxruntime in the Python backend), image
    pre-processing, top-k, the ensemble over them, and the hand-written Python model."""
    onnx_path = export(TinyClassifier(), torch.randn(1, 3, 32, 32), work / "net.onnx", output_name="logits")
    add_model(repository, onnx_path, runtime="python-onnxruntime", options=ModelOptions(dynamic_batching=True))
    add_step(repository, ImagePreprocess(width=32, height=32), name="pre", options=batching)
    add_step(repository, TopK(k=3, num_classes=10), name="top")
    add_ensemble(repository, CLASSIFY)
    shutil.copytree(DATA / "repository" / "add_sub", repository / "add_sub")
    return repository


def build_everything(repository: Path, work: Path) -> Path:
    """The servable models plus configs for what only the Orin's server loads (plan, ORT, TorchScript)."""
    build_servable(repository, work)
    add_model(repository, work / "net.onnx", name="det", runtime="onnxruntime_onnx")
    add_model(repository, stand_in_plan(work))
    script = work / "affine.pt"
    torch.jit.save(torch.jit.script(Affine(3.0)), str(script))
    add_model(repository, script, runtime="pytorch_libtorch", inputs=[TensorSpec("input__0", "FP32", (4,))],
              options=ModelOptions(max_batch_size=4))
    return repository
