"""The accuracy gate: FP16 against the FP32 reference, and the search for the nodes that must stay FP32.

1. Run the FP32 model (reference) and its FP16 emulation (candidate) on the samples; compare per output.
2. If the gate fails, keep in FP32 the nodes whose FP32 activations leave the FP16 range (|x| > 65504).
3. If it still fails, bisect over the remaining FP32-producing nodes for a small set that makes it pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orinkit.convert.errors import AccuracyGateError
from orinkit.convert.fp16.emulate import activation_ranges, run, run_emulated
from orinkit.convert.fp16.graphs import float_producers
from orinkit.convert.fp16.metrics import OutputMetrics, Tolerances, compare

FP16_MAX = 65504.0


@dataclass(frozen=True)
class GateReport:
    passed: bool
    metrics: tuple[OutputMetrics, ...]  # with keep_fp32 applied
    first_metrics: tuple[OutputMetrics, ...]  # everything in FP16
    keep_fp32: tuple[str, ...]
    overflow_nodes: tuple[str, ...]
    bisected_nodes: tuple[str, ...]
    evaluations: int
    samples: int
    notes: tuple[str, ...] = field(default_factory=tuple)


class Fp16Gate:
    def __init__(self, model, samples: Sequence[dict], tolerances: Tolerances, *,
                 progress: Callable[[str], None] = lambda message: None, max_evaluations: int = 96) -> None:
        self.model = model
        self.samples = list(samples)
        self.tolerances = tolerances
        self.progress = progress
        self.max_evaluations = max_evaluations
        self.names = [o.name for o in model.graph.output]
        self.reference = run(model, self.samples)
        self._cache: dict[frozenset, list[OutputMetrics]] = {}

    def evaluate(self, keep: frozenset | set) -> list[OutputMetrics]:
        keep = frozenset(keep)
        if keep not in self._cache:
            candidate = run_emulated(self.model, self.samples, keep)
            self._cache[keep] = compare(self.names, self.reference, candidate, self.tolerances)
        return self._cache[keep]

    def passes(self, keep) -> bool:
        return all(m.passed for m in self.evaluate(keep))

    @property
    def evaluations(self) -> int:
        return len(self._cache)

    def run(self) -> GateReport:
        first = self.evaluate(frozenset())
        if all(m.passed for m in first):
            return self._report(True, first, (), (), ())
        failing = ", ".join(m.name for m in first if not m.passed)
        self.progress(f"FP16 misses the tolerances on {failing}; looking for nodes to keep in FP32")
        ranges = activation_ranges(self.model, self.samples)
        overflow = tuple(name for name, peak in ranges.items() if peak > FP16_MAX)
        if overflow:
            self.progress(f"{len(overflow)} node(s) leave the FP16 range (|x| > 65504): {', '.join(overflow)}")
        keep = frozenset(overflow)
        if self.passes(keep):
            return self._report(True, first, overflow, overflow, ())
        candidates = [n for n in float_producers(self.model) if n not in keep]
        if not self.passes(keep | set(candidates)):
            raise AccuracyGateError(
                "FP16 misses the tolerances even with every node kept in FP32 (the FP16 rounding of the inputs "
                "alone is too much)",
                report=self._report(False, first, overflow, overflow, ()),
                hint="loosen --atol/--rtol/--min-cosine, or convert without --fp16",
            )
        self.progress(f"bisecting over {len(candidates)} node(s)")
        bisected = tuple(self._minimize(candidates, set(keep)))
        kept = tuple(n for n in float_producers(self.model) if n in keep or n in bisected)
        return self._report(True, first, kept, overflow, bisected)

    def _minimize(self, candidates: list[str], fixed: set[str]) -> list[str]:
        """A small subset S of ``candidates`` with passes(fixed | S), given passes(fixed | candidates)."""
        if self.passes(fixed):
            return []
        if len(candidates) == 1 or self.evaluations >= self.max_evaluations:
            return list(candidates)
        half = len(candidates) // 2
        first, second = candidates[:half], candidates[half:]
        if self.passes(fixed | set(first)):
            return self._minimize(first, fixed)
        if self.passes(fixed | set(second)):
            return self._minimize(second, fixed)
        kept_first = self._minimize(first, fixed | set(second))
        return kept_first + self._minimize(second, fixed | set(kept_first))

    def _report(self, passed, first, keep, overflow, bisected) -> GateReport:
        metrics = self.evaluate(frozenset(keep)) if passed else first
        notes = ()
        if self.evaluations >= self.max_evaluations:
            notes = (f"the search stopped at {self.max_evaluations} evaluations; the FP32 set may be larger than "
                     "needed",)
        return GateReport(passed, tuple(metrics), tuple(first), tuple(keep), tuple(overflow), tuple(bisected),
                          self.evaluations, len(self.samples), notes)


def run_gate(model, samples, tolerances: Tolerances, *, progress=lambda message: None) -> GateReport:
    return Fp16Gate(model, samples, tolerances, progress=progress).run()
