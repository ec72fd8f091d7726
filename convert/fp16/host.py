"""What the gate's child process runs: the model's sessions, built once, and the evaluations asked of them.

These functions are called through :class:`orinkit.core.isolation.Worker`, never in the tool's own process, so
that a crash of onnxruntime ends the child, not the tool. The state lives in this module of the child.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

import numpy as np

from orinkit.convert.fp16.dense_maps import producers
from orinkit.convert.fp16.emulate import Emulator, activation_ranges
from orinkit.convert.fp16.graphs import onnx_module
from orinkit.core.failpoints import reach

_state: dict = {}


def load(model_path: str, samples: Sequence[dict]) -> dict:
    """Build the sessions for the model at ``model_path``; returns its output names, convertible nodes, and the
    ops that give each output (for the auto criterion's dense maps)."""
    model = onnx_module().load(model_path)
    emulator = Emulator(model)
    _state.update(model=model, emulator=emulator, samples=list(samples))
    return {"outputs": emulator.names, "units": emulator.units, "maps": producers(model)}


def _chosen(indices: Sequence[int] | None) -> list[dict]:
    samples = _state["samples"]
    return samples if indices is None else [samples[i] for i in indices]


def reference(indices: Sequence[int] | None = None) -> list[list[np.ndarray]]:
    return _state["emulator"].reference(_chosen(indices))


def emulate(keep_fp32: Sequence[str] = (), converted: Sequence[str] | None = None,
            indices: Sequence[int] | None = None) -> list[list[np.ndarray]]:
    reach("fp16-gate-crash", signal=signal.SIGSEGV)  # test hook: onnxruntime crashing during the search
    return _state["emulator"].emulate(_chosen(indices), keep_fp32, converted=converted)


def ranges() -> dict[str, float]:
    return activation_ranges(_state["model"], _state["samples"])
