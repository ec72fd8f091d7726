"""torch → ONNX, named and checked: the exported graph must give torch's own outputs on onnxruntime."""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.convert.errors import TorchExportError
from orinkit.core.optional import require

DEFAULT_OPSET = 17


@dataclass(frozen=True)
class ExportReport:
    path: Path
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    max_abs_diff: dict[str, float]  # per output, ONNX on onnxruntime vs torch


def load_factory(spec: str):
    """``package.module:factory`` → the nn.Module the factory returns (called without arguments)."""
    require("torch")
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise TorchExportError(f"--torch '{spec}' is not package.module:factory",
                               hint="name a module and a callable in it, e.g. mypkg.models:build")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise TorchExportError(f"cannot load {spec}: {exc}",
                               hint="make the module importable (PYTHONPATH) and check the factory's name") from exc
    try:
        return factory()
    except Exception as exc:
        raise TorchExportError(f"{spec}() failed: {type(exc).__name__}: {exc}", hint="fix the factory") from exc


def export_torch(
    module,
    samples: Sequence,
    path: str | os.PathLike[str],
    *,
    input_names: Sequence[str],
    output_names: Sequence[str] | None = None,
    dynamic_batch: bool = False,
    opset: int = DEFAULT_OPSET,
    rtol: float = 1e-3,
    atol: float = 1e-4,
) -> ExportReport:
    """Export ``module`` called on ``samples`` (torch tensors, one per input) to ``path``, then check it.

    ``dynamic_batch`` marks axis 0 of every input and output dynamic. The exported graph is run on onnxruntime
    with the same samples and must match torch within ``rtol``/``atol``.
    """
    torch = require("torch")
    ort = require("onnxruntime")
    path = Path(path)
    if len(input_names) != len(samples):
        raise TorchExportError(f"{len(samples)} sample inputs but {len(input_names)} input names",
                               hint="give one name per input")
    module = module.eval()
    with torch.no_grad():
        expected = module(*samples)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    if output_names is None:
        output_names = ["output"] if len(expected) == 1 else [f"output{i}" for i in range(len(expected))]
    if len(output_names) != len(expected):
        raise TorchExportError(f"the model returns {len(expected)} outputs but {len(output_names)} names were given",
                               hint="give one name per output")
    axes = {name: {0: "batch"} for name in (*input_names, *output_names)} if dynamic_batch else None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, tuple(samples), str(path), input_names=list(input_names),
                              output_names=list(output_names), dynamic_axes=axes, opset_version=opset,
                              dynamo=False)
    except Exception as exc:
        raise TorchExportError(f"torch.onnx.export failed: {type(exc).__name__}: {exc}",
                               hint="the model uses something the exporter cannot trace; see the message") from exc
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {n: s.detach().cpu().numpy() for n, s in zip(input_names, samples)}
    got = session.run(list(output_names), feeds)
    diffs = {}
    for name, want, have in zip(output_names, expected, got):
        want = want.detach().cpu().numpy()
        diffs[name] = float(np.max(np.abs(want - have))) if want.size else 0.0
        if want.shape != have.shape or not np.allclose(have, want, rtol=rtol, atol=atol):
            raise TorchExportError(
                f"the exported ONNX disagrees with torch on output '{name}' (max abs diff {diffs[name]:.3g}, "
                f"shapes {list(want.shape)} vs {list(have.shape)})",
                hint="an op was exported differently; try another opset (--opset) or simplify the forward()",
            )
    return ExportReport(path, tuple(input_names), tuple(output_names), diffs)
