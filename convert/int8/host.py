"""What the INT8 gate's child process runs: the FP32 reference session and one session of the switchable Q/DQ
graph (:func:`orinkit.convert.int8.qdq.switchable`), built once and reused by every evaluation of the search.

The Q/DQ graph runs with graph optimisations off (so onnxruntime computes the Q/DQ arithmetic as written) on
onnxruntime 1.32 or newer: older releases truncate toward zero in their FP16 QuantizeLinear kernel, an error several
times INT8's own.

Where one evaluation costs too much of the search's budget, the gate switches the search to the Q/DQ graph widened
to FP32 (:func:`widen`; :func:`~orinkit.convert.int8.qdq.to_fp32`: the same scales, FP16 values are exact in
FP32): onnxruntime's CPU kernels run FP16 about 3x slower than FP32 (1.2 against 0.4 s per line on a text
recogniser here). What FP16 alone does is the FP16 gate's verdict; the final graph, FP16 as TensorRT builds it, is
judged as written (:func:`run_file`). Small models stay FP16 throughout: on the digits net the two precisions
disagree on a few of 297 held-out digits, enough to move a verdict at the pass mark.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from orinkit.convert.fp16.dense_maps import producers
from orinkit.convert.fp16.graphs import onnx_module, session
from orinkit.convert.int8.modelopt_run import ONNXRUNTIME_JUDGE
from orinkit.convert.int8.qdq import SWITCH, switch_for, switchable, to_fp32
from orinkit.core.optional import require_version

_state: dict = {}


def load(qdq_path: str, fp32_path: str, samples: Sequence[dict]) -> dict:
    require_version(*ONNXRUNTIME_JUDGE)
    onnx = onnx_module()
    fp32 = onnx.load(fp32_path)
    graph, units = switchable(onnx.load(qdq_path))
    names = [o.name for o in fp32.graph.output]
    qdq = session(graph, optimize=False)
    _state.update(reference=session(fp32), qdq=qdq, sessions={"": qdq}, units=units, names=names,
                  samples=list(samples))
    return {"outputs": names, "units": units, "maps": producers(fp32)}


def load_method(key: str, qdq_path: str) -> list[str]:
    """Another calibration of the same model (its Q/DQ graph at ``qdq_path``) beside the first, for
    :func:`use_method`; returns its quantized nodes, which must be the first one's for the search to carry over."""
    graph, units = switchable(onnx_module().load(qdq_path))
    if units == _state["units"]:
        _state["sessions"][key] = session(graph, optimize=False)
    return units


def widen(key: str, qdq_path: str) -> None:
    """Evaluate the calibration under ``key`` with its Q/DQ graph widened to FP32 from now on."""
    graph, units = switchable(to_fp32(onnx_module().load(qdq_path)))
    if units != _state["units"]:
        raise ValueError("the widened graph quantizes other nodes")
    sess = session(graph, optimize=False)
    if _state["qdq"] is _state["sessions"][key]:
        _state["qdq"] = sess
    _state["sessions"][key] = sess


def use_method(key: str) -> None:
    """Evaluate with the calibration loaded under ``key`` from now on ("" is the first one)."""
    _state["qdq"] = _state["sessions"][key]


def _chosen(indices: Sequence[int] | None) -> list[dict]:
    samples = _state["samples"]
    return samples if indices is None else [samples[i] for i in indices]


def reference(indices: Sequence[int] | None = None) -> list[list[np.ndarray]]:
    return [_state["reference"].run(_state["names"], s) for s in _chosen(indices)]


def emulate(excluded: Sequence[str] = (), converted: Sequence[str] | None = None,
            indices: Sequence[int] | None = None) -> list[list[np.ndarray]]:
    """Outputs with every quantized node in INT8 but ``excluded`` (or, with ``converted``, only those)."""
    units = _state["units"]
    if converted is not None:
        chosen = set(converted)
        switch = np.array([name in chosen for name in units], dtype=bool)
    else:
        switch = switch_for(units, excluded)
    return [_state["qdq"].run(_state["names"], {**s, SWITCH: switch}) for s in _chosen(indices)]


def ranges() -> dict[str, float]:
    # INT8 has no overflow to look for (values saturate at the calibrated range): the search ranks every node.
    return {}


def run_file(path: str, indices: Sequence[int] | None = None) -> list[list[np.ndarray]]:
    """Outputs of the Q/DQ model at ``path`` (the final one ModelOpt wrote) on the gate's samples."""
    model = onnx_module().load(path)
    sess = session(model, optimize=False)
    return [sess.run(_state["names"], s) for s in _chosen(indices)]
