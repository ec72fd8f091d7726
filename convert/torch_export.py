"""torch → ONNX, named and checked: the exported graph must give torch's own outputs on onnxruntime."""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orinkit.convert.errors import TorchExportError
from orinkit.core.optional import current_folder_importable, require

DEFAULT_OPSET = 17
EXPORTERS = ("torchscript", "dynamo")


@dataclass(frozen=True)
class ExportReport:
    path: Path
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    max_abs_diff: dict[str, float]  # per output, ONNX on onnxruntime vs torch
    exporter: str = "torchscript"  # or "dynamo", when the TorchScript exporter could not trace the model


def load_factory(spec: str):
    """``package.module:factory`` → the nn.Module the factory returns (called without arguments).

    The module is imported as ``python -m`` would import it: from the current folder too (while it is imported
    and the factory runs), then from sys.path."""
    require("torch")
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise TorchExportError(f"--torch '{spec}' is not package.module:factory",
                               hint="name a module and a callable in it, e.g. mypkg.models:build")
    with current_folder_importable():
        try:
            factory = getattr(importlib.import_module(module_name), attribute)
        except (ImportError, AttributeError) as exc:
            raise TorchExportError(f"cannot load {spec}: {exc}",
                                   hint="run from the folder that holds the package (or put that folder on "
                                        "PYTHONPATH), and check the factory's name") from exc
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
    rtol: float = 1e-4,
    atol: float = 1e-4,
    exporter: str | None = None,
) -> ExportReport:
    """Export ``module`` called on ``samples`` (torch tensors, one per input) to ``path``, then check it.

    ``dynamic_batch`` marks axis 0 of every input and output dynamic. The exported graph is run on onnxruntime
    with the same samples and must match torch: max |difference| <= ``atol`` + ``rtol`` · max |torch output|,
    per output (relative to the output's range: outputs in pixels or in the thousands differ by more in absolute
    terms between two correct FP32 runtimes than logits do). ``exporter`` ("torchscript" or "dynamo") uses that
    exporter only; by default the TorchScript one, and the dynamo one when that one cannot trace the model.
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
    if exporter not in (None, *EXPORTERS):
        raise TorchExportError(f"unknown exporter '{exporter}'", hint=f"use one of {', '.join(EXPORTERS)}")
    exporter = _export(torch, module, samples, path, list(input_names), list(output_names), axes, opset, exporter)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {n: s.detach().cpu().numpy() for n, s in zip(input_names, samples)}
    got = session.run(list(output_names), feeds)
    diffs = {}
    for name, want, have in zip(output_names, expected, got):
        want = want.detach().cpu().numpy()
        diffs[name] = float(np.max(np.abs(want - have))) if want.size else 0.0
        scale = float(np.max(np.abs(want))) if want.size else 0.0
        if want.shape != have.shape or not diffs[name] <= atol + rtol * scale:
            raise TorchExportError(
                f"the exported ONNX disagrees with torch on output '{name}' (max abs diff {diffs[name]:.3g}, "
                f"shapes {list(want.shape)} vs {list(have.shape)})",
                hint="an op was exported differently; try another opset (--opset) or simplify the forward()",
            )
    return ExportReport(path, tuple(input_names), tuple(output_names), diffs, exporter)


def _export(torch, module, samples, path: Path, input_names, output_names, axes, opset: int,
            only: str | None = None) -> str:
    """Export with torch's TorchScript exporter (no onnxscript needed; the graphs TensorRT 8.5 knows best), and
    with the dynamo exporter when that one cannot trace the model (or with ``only`` that one); returns which one
    made the file."""
    first = None
    if only in (None, "torchscript"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, tuple(samples), str(path), input_names=input_names,
                                  output_names=output_names, dynamic_axes=axes, opset_version=opset, dynamo=False)
            return "torchscript"
        except Exception as exc:
            first = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            if only is not None:
                raise TorchExportError(f"torch.onnx.export (TorchScript) failed: {first}",
                                       hint="simplify the forward()") from None
    try:
        import onnxscript  # noqa: F401  (the dynamo exporter's dependency)
    except ImportError:
        what = f"torch.onnx.export failed: {first}" if first else "the dynamo exporter needs onnxscript"
        raise TorchExportError(what, hint="install onnxscript (pip install 'orinkit[torch]') so that torch's dynamo "
                                          "exporter can try, or simplify the forward()") from None
    dynamic = None
    if axes:
        batch = torch.export.Dim("batch")
        dynamic = [{0: batch} for _ in samples]
    try:
        with warnings.catch_warnings(), _quiet():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, tuple(samples), input_names=input_names,
                                        output_names=output_names, dynamic_shapes=dynamic,
                                        opset_version=max(opset, 18), dynamo=True, verbose=False)
            program.save(str(path))
    except Exception as exc:
        second = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        if first is None:
            raise TorchExportError(f"torch.onnx.export (dynamo) failed: {second}",
                                   hint="simplify the forward()") from None
        raise TorchExportError(f"torch.onnx.export failed with both exporters: TorchScript: {first}; dynamo: "
                               f"{second}", hint="the model uses something neither exporter can trace; simplify "
                               "the forward() or export it yourself and pass the .onnx file") from None
    return "dynamo"


@contextlib.contextmanager
def _quiet():
    """The dynamo exporter prints its progress on stdout; the tool's own output (and --json) must stay clean."""
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield
