"""Small torch models exported to real ONNX files for the tests (legacy exporter: no onnxscript needed)."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch


class TinyClassifier(torch.nn.Module):
    """3xHxW image → 10 logits; ``seed`` gives different weights for different model versions."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.conv = torch.nn.Conv2d(3, 4, 3, stride=2)
        self.fc = torch.nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


class Affine(torch.nn.Module):
    """y = x * scale + 1 over [B, 4]: outputs tell versions apart."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0


def export(module: torch.nn.Module, sample: torch.Tensor, path: Path, *, input_name: str = "input",
           output_name: str = "output", dynamic_batch: bool = True) -> Path:
    module.eval()
    axes = {input_name: {0: "batch"}, output_name: {0: "batch"}} if dynamic_batch else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (sample,), str(path), input_names=[input_name], output_names=[output_name],
                          dynamic_axes=axes, dynamo=False)
    return path


class TwoInTwoOut(torch.nn.Module):
    """Two inputs, two outputs: a fused feature and a per-sample score."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.image = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.vector = torch.nn.Linear(6, 8)

    def forward(self, image, vector):
        features = torch.relu(self.image(image)).mean(dim=(2, 3)) + self.vector(vector)
        return features, features.sum(dim=1, keepdim=True)


class Overflows(torch.nn.Module):
    """A large scale before a reduction: the squared activations reach ~1e6, past FP16's 65504."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x) * 400.0
        return (h * h).mean(dim=1, keepdim=True) / 1e4 + torch.relu(self.fc(x))


class LosesPrecision(torch.nn.Module):
    """(x + 1000) - 1000: no overflow, but FP16's step of 0.5 near 1000 wipes out x's detail."""

    def forward(self, x):
        return (x + 1000.0) - 1000.0 + x * 0.5


def transformer_block():
    """The block that crashed the first round's FP16 validation: nn.TransformerEncoderLayer(64, 4, 128, GELU), fed
    1x16x64. torch 2.14's TorchScript exporter cannot trace it (its attention passes a traced bool)."""
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(64, 4, 128, activation="gelu").eval()


class VoiceActivity(torch.nn.Module):
    """A voice-activity detector shaped like the ones people export: float audio [B, 512] beside the sample rate as
    a 0-d int64 tensor, used to rescale the audio (models trained at 16 kHz); a speech probability [B, 1]."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.frontend = torch.nn.Conv1d(1, 16, 64, stride=16)
        self.encoder = torch.nn.Sequential(torch.nn.Conv1d(16, 32, 3, padding=1), torch.nn.ReLU(),
                                           torch.nn.Conv1d(32, 32, 3, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Linear(32, 1)

    def forward(self, audio, sr):
        x = audio * (sr.float() / 16000)
        features = torch.log1p(torch.abs(self.frontend(x.unsqueeze(1))))
        return torch.sigmoid(self.head(self.encoder(features).mean(dim=2)))


def speech_agrees(reference, candidate) -> float:
    """A task metric for :class:`VoiceActivity` (``--metric torch_models:speech_agrees``): the share of frames whose
    speech decision (probability > 0.5) FP16 keeps."""
    import numpy as np

    ref = np.concatenate([np.ravel(r["prob"]) for r in reference]) > 0.5
    got = np.concatenate([np.ravel(c["prob"]) for c in candidate]) > 0.5
    return float(np.mean(ref == got))


class DigitsMlp(torch.nn.Module):
    """A digits-sized classifier (8x8 pixels in, 10 logits out): per-request overhead dominates its compute, so a
    server's batching pays (edge-tune's tests and benchmark)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)
