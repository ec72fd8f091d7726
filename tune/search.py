"""How configurations are chosen for measuring: a greedy walk (after Model Analyzer's quick search) or the grid.

The greedy walk starts at the smallest configuration and, one dimension at a time (instance kind, instance count,
batch size, queue delay), steps to the next value while the best throughput within the budgets rises by at least
``min_gain``, looking one value past a step that does not pay; then it walks every dimension again from where it
stands (batching changes how many instances pay off), down as well as up, until a whole pass moves nowhere. Each
configuration is measured once."""

from __future__ import annotations

import time
from collections.abc import Callable

from orinkit.tune.measure import Budgets, Measurement
from orinkit.tune.space import Candidate, SearchSpace

Measure = Callable[[Candidate], Measurement]
Progress = Callable[[str], None]
DIMENSIONS = ("kind", "instances", "batch", "delay")
# A step must beat where the walk stands by this much: 1 s levels on a loaded 2-core machine differ by a few per
# cent run to run, and a walk that follows 3 % gains measured half the grid chasing noise (19 of 39).
MIN_GAIN = 0.05
MAX_PASSES = 3
LOOKAHEAD = 1  # steps tried past one that does not pay, before a dimension's walk ends


def value(measurement: Measurement, budgets: Budgets) -> float | None:
    best = measurement.best(budgets)
    return None if best is None else best.throughput


class _Recorder:
    """Measures each configuration once, in order, and says how far the search has come."""

    def __init__(self, measure: Measure, budgets: Budgets, progress: Progress, mode: str,
                 total: int | None) -> None:
        self.measure, self.budgets, self.progress, self.mode, self.total = measure, budgets, progress, mode, total
        self.done: dict[Candidate, Measurement] = {}
        self.started = time.monotonic()

    def __call__(self, candidate: Candidate) -> float | None:
        if candidate not in self.done:
            number = len(self.done) + 1
            of = f"/{self.total}" if self.total else ""
            self.progress(f"[{number}{of}] {candidate.label()}: measuring{self._left()}")
            measurement = self.measure(candidate)
            self.done[candidate] = measurement
            self.progress(f"[{number}{of}] {candidate.label()}: {describe(measurement, self.budgets)}")
        return value(self.done[candidate], self.budgets)

    def _left(self) -> str:
        if not self.done:
            return ""
        mean = (time.monotonic() - self.started) / len(self.done)
        if self.total:
            left = mean * (self.total - len(self.done))
            return f" (about {left:.0f} s left)"
        # The walk's length is not known ahead: at least one step per dimension of the pass remains.
        return f" (~{mean:.0f} s per configuration)"


def describe(measurement: Measurement, budgets: Budgets) -> str:
    if measurement.error:
        return f"not loaded: {measurement.error}"
    best = measurement.best(budgets)
    memory = "" if measurement.memory_mb is None else f", {measurement.memory_mb:.0f} MB"
    if best is not None:
        return (f"{best.throughput:.1f} infer/s at concurrency {best.concurrency}, p99 {best.p99_ms:.1f} ms"
                f"{memory}")
    top = measurement.top()
    if top is None:
        first = next((level.first_error for level in measurement.levels if level.first_error), "no answer")
        return f"every request failed: {first}"
    return (f"over budget (best {top.throughput:.1f} infer/s at concurrency {top.concurrency}, p99 "
            f"{top.p99_ms:.1f} ms{memory})")


def _better(new: float | None, old: float | None, min_gain: float) -> bool:
    return new is not None and (old is None or new > old * (1 + min_gain))


def greedy(space: SearchSpace, measure: Measure, budgets: Budgets, *, min_gain: float = MIN_GAIN,
           progress: Progress = lambda message: None) -> list[Measurement]:
    record = _Recorder(measure, budgets, progress, "greedy", None)
    current = space.start()
    record(current)
    for _ in range(MAX_PASSES):
        moved = False
        for dimension in DIMENSIONS:
            for direction in (1, -1):
                stepped = False
                while True:
                    step = _step(space, record, current, dimension, direction, min_gain)
                    if step is None:
                        break
                    current, stepped, moved = step, True, True
                if stepped:
                    break  # it went up: no need to look down from where it arrived
        if not moved:
            break
    return list(record.done.values())


def _step(space: SearchSpace, record: _Recorder, current: Candidate, dimension: str, direction: int,
          min_gain: float) -> Candidate | None:
    """The next value of ``dimension`` if it pays, else, going up, the one after it (a batch of 2 with no wait can
    gain nothing where 4 gains a quarter), else None. Going down looks one step only: a smaller value that does
    not pay leaves nothing below it worth a measurement."""
    step = space.neighbours(current, dimension, direction)
    for _ in range(1 + (LOOKAHEAD if direction > 0 else 0)):
        if step is None:
            return None
        if _better(record(step), record(current), min_gain):
            return step
        step = space.neighbours(step, dimension, direction)
    return None


def exhaustive(space: SearchSpace, measure: Measure, budgets: Budgets, *,
               progress: Progress = lambda message: None) -> list[Measurement]:
    grid = space.grid()
    record = _Recorder(measure, budgets, progress, "grid", len(grid))
    for candidate in grid:
        record(candidate)
    return list(record.done.values())


def pick(measurements: list[Measurement], budgets: Budgets) -> Measurement | None:
    """The configuration with the highest throughput within the budgets; among near-equals (within 1 %), the one
    that costs least (fewer instances, smaller batch, shorter delay)."""
    feasible = [(value(m, budgets), m) for m in measurements if value(m, budgets) is not None]
    if not feasible:
        return None
    top = max(v for v, _ in feasible)
    near = [m for v, m in feasible if v >= top * 0.99]
    return min(near, key=lambda m: (m.candidate.instances, m.candidate.max_batch_size, m.candidate.delay_us))


def closest(measurements: list[Measurement], budgets: Budgets) -> tuple[Measurement, str] | None:
    """The configuration that came nearest the budgets, and by how much it missed, for a refusal."""
    scored = []
    for m in measurements:
        if m.error:
            continue
        misses = []
        over = 0.0
        if budgets.memory_mb is not None and m.memory_mb is not None and m.memory_mb > budgets.memory_mb:
            over += m.memory_mb / budgets.memory_mb - 1
            misses.append(f"memory {m.memory_mb:.0f} MB > {budgets.memory_mb:g} MB")
        answered = [level for level in m.levels if level.requests and not level.errors]
        if not answered:
            continue
        fastest = min(answered, key=lambda level: level.p99_ms)
        if budgets.latency_ms is not None and fastest.p99_ms > budgets.latency_ms:
            over += fastest.p99_ms / budgets.latency_ms - 1
            misses.append(f"p99 {fastest.p99_ms:.1f} ms > {budgets.latency_ms:g} ms at concurrency "
                          f"{fastest.concurrency}")
        scored.append((over, m, "; ".join(misses) or "within budget"))
    if not scored:
        return None
    _, measurement, misses = min(scored, key=lambda item: item[0])
    return measurement, misses
