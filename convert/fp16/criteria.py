"""How close the FP16 candidate is to the FP32 reference, per output: the numeric criteria of the gate.

The ``range`` criterion judges each output on its own scale: the largest error relative to the largest reference
value (``max |fp16 - fp32| / max |fp32|``, at most 0.05) and the cosine similarity (at least 0.999). A
classifier's logits, a detector's pixel coordinates and a softmax's probabilities are judged alike, and rounding
noise of a model whose real FP16 agrees with FP32 (cosine >= 0.9999) stays far inside the defaults. ``elementwise``
is numpy.allclose's ``atol + rtol * |fp32|`` per element, for outputs whose every digit matters. Either way inf/NaN
where the reference is finite fails.

The default, ``auto``, is the range criterion for every output but dense maps: a probability map (a Sigmoid over
a spatial map) or a class map (a Softmax over its channel axis, ArgMax's labels) is judged by its answers, the
masks or the per-pixel classes (:mod:`orinkit.convert.fp16.dense_maps`): its largest error sits on the pixels
where the map crosses its threshold and says nothing of how many answers change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.convert.errors import ConvertError

CRITERIA = ("auto", "range", "elementwise")


@dataclass(frozen=True)
class Criterion:
    kind: str = "auto"
    max_range_error: float = 0.05  # range and auto: max |fp16 - fp32| / max |fp32|, per output
    min_cosine: float = 0.999  # every kind
    atol: float | None = None  # elementwise only
    rtol: float | None = None  # elementwise only

    def __post_init__(self) -> None:
        if self.kind not in CRITERIA:
            raise ConvertError(f"unknown criterion '{self.kind}'", hint=f"use one of {', '.join(CRITERIA)}")
        if self.kind != "elementwise" and (self.atol is not None or self.rtol is not None):
            raise ConvertError("--atol/--rtol apply to the elementwise criterion only",
                               hint="add --criterion elementwise, or use --max-range-error with the default one")
        if self.kind == "elementwise":
            # Defaults of numpy-style tolerances when only one was given.
            object.__setattr__(self, "atol", 1e-2 if self.atol is None else self.atol)
            object.__setattr__(self, "rtol", 1e-2 if self.rtol is None else self.rtol)
        for name in ("max_range_error", "atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ConvertError(f"{name.replace('_', '-')} must be a number >= 0, got {value}",
                                   hint="e.g. 0.01")
        if not -1.0 <= self.min_cosine <= 1.0:
            raise ConvertError(f"--min-cosine must lie in [-1, 1], got {self.min_cosine}", hint="e.g. 0.999")

    def describe(self) -> str:
        if self.kind in ("auto", "range"):
            return f"range criterion (max error <= {self.max_range_error:g} of the output's range, " \
                   f"cosine >= {self.min_cosine:g})"
        return f"elementwise criterion (|error| <= {self.atol:g} + {self.rtol:g}·|fp32|, " \
               f"cosine >= {self.min_cosine:g})"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "max_range_error": self.max_range_error, "min_cosine": self.min_cosine,
                "atol": self.atol, "rtol": self.rtol}

    @classmethod
    def from_dict(cls, data: dict) -> Criterion:
        return cls(kind=data.get("kind", "range"), max_range_error=data.get("max_range_error", 0.05),
                   min_cosine=data.get("min_cosine", 0.999), atol=data.get("atol"), rtol=data.get("rtol"))


@dataclass(frozen=True)
class OutputMetrics:
    name: str
    max_abs: float
    range_error: float  # max_abs / max |reference|
    cosine: float
    violations: int  # elementwise criterion: elements outside atol + rtol·|reference| (0 for range)
    size: int
    nonfinite: int  # inf/NaN in the candidate where the reference is finite
    passed: bool
    badness: float  # how far from passing: <= 1 passes the numeric limits, inf for inf/NaN

    def describe(self, judged_by: str | None = None) -> str:
        """One line; ``judged_by`` names the task metric that decides this output instead (inf/NaN still fails)."""
        state = "ok" if self.passed else "FAIL"
        if judged_by is not None and not self.nonfinite:
            state = f"not deciding: {judged_by} decides"
        if self.nonfinite:
            return f"{self.name}: {self.nonfinite} of {self.size} values inf/NaN where FP32 is finite [{state}]"
        outside = f", {self.violations}/{self.size} outside atol/rtol" if self.violations else ""
        return (f"{self.name}: max abs error {self.max_abs:.3g} ({self.range_error:.2e} of its range), "
                f"cosine {self.cosine:.7f}{outside} [{state}]")


def _flat(samples: Sequence[Sequence[np.ndarray]], index: int) -> np.ndarray:
    return np.concatenate([np.asarray(s[index], np.float64).ravel() for s in samples])


def compare(names: Sequence[str], reference: Sequence[Sequence[np.ndarray]],
            candidate: Sequence[Sequence[np.ndarray]], criterion: Criterion) -> list[OutputMetrics]:
    """Metrics per output over all samples (``reference[s][o]``: sample s, output o)."""
    metrics = []
    for index, name in enumerate(names):
        ref, got = _flat(reference, index), _flat(candidate, index)
        finite = np.isfinite(ref)
        both = finite & np.isfinite(got)
        nonfinite = int(np.sum(finite & ~np.isfinite(got)))
        ref_f, got_f = ref[both], got[both]
        diff = np.abs(got_f - ref_f)
        max_abs = float(diff.max()) if diff.size else 0.0
        scale = float(np.abs(ref_f).max()) if ref_f.size else 0.0
        range_error = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
        norm = np.linalg.norm(ref_f) * np.linalg.norm(got_f)
        cosine = float(np.dot(ref_f, got_f) / norm) if norm > 0 else float(np.array_equal(ref_f, got_f))
        cosine_badness = (1 - cosine) / max(1 - criterion.min_cosine, 1e-12)
        if criterion.kind == "elementwise":
            allowed = criterion.atol + criterion.rtol * np.abs(ref_f)
            violations = int(np.sum(diff > allowed))
            element_badness = float(np.max(diff / np.maximum(allowed, 1e-30))) if diff.size else 0.0
        else:
            violations = 0
            element_badness = range_error / max(criterion.max_range_error, 1e-30)
        badness = math.inf if nonfinite else max(element_badness, cosine_badness)
        passed = not nonfinite and violations == 0 and cosine >= criterion.min_cosine and (
            criterion.kind == "elementwise" or range_error <= criterion.max_range_error)
        metrics.append(OutputMetrics(name, math.inf if nonfinite else max_abs, range_error, cosine, violations,
                                     int(ref.size), nonfinite, passed, badness))
    return metrics


def badness(metrics: Sequence[OutputMetrics]) -> float:
    """One number per evaluation for ranking: the worst output's distance from its limits."""
    return max((m.badness for m in metrics), default=0.0)
