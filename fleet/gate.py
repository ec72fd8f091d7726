"""A version's health gate: its golden input sent to exactly that version, the answer compared with the golden output.

``gate.npz`` (pushed with the version) holds arrays ``input:<NAME>`` and ``output:<NAME>``; the manifest's ``gate``
entry holds ``rtol`` and ``atol``. The gate is also the agent's latency probe: the same golden request sent N times
gives the p99 a rollout compares across devices. Runs on the device (Python 3.10).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from orinkit.core.stats import percentile

PASSED, FAILED, NONE = "passed", "failed", "none"
GATE_REQUESTS = 20


@dataclass(frozen=True)
class Gate:
    inputs: Mapping[str, np.ndarray]
    outputs: Mapping[str, np.ndarray]
    rtol: float = 1e-5
    atol: float = 1e-6

    @classmethod
    def load(cls, path: str | os.PathLike[str], spec: Mapping | None = None) -> Gate:
        spec = spec or {}
        with np.load(path, allow_pickle=False) as data:
            inputs = {k.partition(":")[2]: data[k] for k in data.files if k.startswith("input:")}
            outputs = {k.partition(":")[2]: data[k] for k in data.files if k.startswith("output:")}
        return cls(inputs, outputs, float(spec.get("rtol", 1e-5)), float(spec.get("atol", 1e-6)))


@dataclass(frozen=True)
class GateResult:
    status: str  # PASSED, FAILED or NONE (the version has no gate)
    reason: str = ""
    latencies_ms: tuple[float, ...] = field(default=(), repr=False)

    @property
    def p99_ms(self) -> float | None:
        return percentile(sorted(self.latencies_ms), 99.0, nearest=True) if self.latencies_ms else None


def compare(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray], rtol: float, atol: float) -> str:
    """Why ``actual`` is not ``expected`` within rtol/atol ("" when it is)."""
    for name, want in expected.items():
        if name not in actual:
            return f"output {name} is missing from the answer"
        got = np.asarray(actual[name])
        if got.shape != want.shape:
            return f"output {name} has shape {list(got.shape)}, the golden output {list(want.shape)}"
        if want.dtype.kind in "fc":
            close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        else:
            close = got == want
        if not np.all(close):
            bad = int(np.size(close) - np.count_nonzero(close))
            worst = ""
            if want.dtype.kind in "fciu":
                error = np.abs(got.astype(np.float64) - want.astype(np.float64))
                worst = f", largest difference {float(np.nanmax(error)):.4g}"
            return f"output {name} differs from the golden output in {bad} of {want.size} values{worst} " \
                   f"(rtol {rtol:g}, atol {atol:g})"
    return ""


def run_gate(url: str, model: str, version: int, gate: Gate | None, *, requests: int = GATE_REQUESTS,
             timeout_s: float = 30.0) -> GateResult:
    """Send the golden input to ``model`` version ``version`` ``requests`` times: the first answer is compared
    with the golden output, every round trip is timed. A version without a gate passes as NONE, untimed."""
    if gate is None:
        return GateResult(NONE)
    from orinkit.client import Client, ClientError, InvalidInputError, Retry

    # One attempt per request: a version that cannot answer fails its gate; it is not waited for.
    with Client(url, model, str(version), timeout_s=timeout_s, ready_timeout_s=timeout_s,
                retry=Retry(attempts=1)) as client:
        call = client.__call__
        latencies = []
        try:
            for index in range(max(1, requests)):
                started = time.perf_counter()
                try:
                    answer = call(**gate.inputs, outputs=list(gate.outputs))
                except InvalidInputError as exc:
                    if index or "ambiguous" not in exc.message:
                        raise
                    call = client.infer_batch  # the golden input reads both ways: it was stored as a batch
                    started = time.perf_counter()
                    answer = call(**gate.inputs, outputs=list(gate.outputs))
                latencies.append((time.perf_counter() - started) * 1000.0)
                if index == 0:
                    answers = answer if isinstance(answer, dict) else {next(iter(gate.outputs)): answer}
                    reason = compare(gate.outputs, answers, gate.rtol, gate.atol)
                    if reason:
                        return GateResult(FAILED, reason, tuple(latencies))
        except ClientError as exc:
            from orinkit.client.server_text import one_line

            return GateResult(FAILED, f"the golden request failed: {one_line(exc.message)}", tuple(latencies))
    return GateResult(PASSED, "", tuple(latencies))
