"""How close the FP16 candidate is to the FP32 reference, per output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tolerances:
    """An element passes when |candidate - reference| <= atol + rtol * |reference| (numpy.allclose); an output
    passes when every element does, its cosine similarity is at least ``min_cosine``, and it holds no inf/NaN
    where the reference has none."""

    atol: float = 1e-2
    rtol: float = 1e-2
    min_cosine: float = 0.999


@dataclass(frozen=True)
class OutputMetrics:
    name: str
    max_abs: float
    max_rel: float
    cosine: float
    violations: int  # elements outside atol + rtol * |reference|
    size: int
    nonfinite: int  # inf/NaN in the candidate where the reference is finite
    passed: bool

    def describe(self) -> str:
        state = "ok" if self.passed else "FAIL"
        extra = f", {self.nonfinite} inf/NaN" if self.nonfinite else ""
        return (f"{self.name}: max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}, cosine {self.cosine:.6f}, "
                f"{self.violations}/{self.size} outside tolerance{extra} [{state}]")


def compare(names: Sequence[str], reference: Sequence[Sequence[np.ndarray]],
            candidate: Sequence[Sequence[np.ndarray]], tolerances: Tolerances) -> list[OutputMetrics]:
    """Metrics per output over all samples (``reference[s][o]``: sample s, output o)."""
    metrics = []
    for index, name in enumerate(names):
        ref = np.concatenate([np.asarray(r[index], np.float64).ravel() for r in reference])
        got = np.concatenate([np.asarray(c[index], np.float64).ravel() for c in candidate])
        finite = np.isfinite(ref)
        both = finite & np.isfinite(got)
        nonfinite = int(np.sum(finite & ~np.isfinite(got)))
        ref_f, got_f = ref[both], got[both]
        diff = np.abs(got_f - ref_f)
        max_abs = float(diff.max()) if diff.size else 0.0
        max_rel = float((diff / np.maximum(np.abs(ref_f), 1e-12)).max()) if diff.size else 0.0
        norm = np.linalg.norm(ref_f) * np.linalg.norm(got_f)
        cosine = float(np.dot(ref_f, got_f) / norm) if norm > 0 else float(np.array_equal(ref_f, got_f))
        violations = int(np.sum(diff > tolerances.atol + tolerances.rtol * np.abs(ref_f))) + nonfinite
        passed = violations == 0 and nonfinite == 0 and cosine >= tolerances.min_cosine
        metrics.append(OutputMetrics(name, max_abs if not nonfinite else float("inf"), max_rel, cosine,
                                     violations, int(ref.size), nonfinite, passed))
    return metrics
