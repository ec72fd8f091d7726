"""The accuracy gate: FP16 against the FP32 reference, and a search for the nodes that must stay FP32.

1. Run the FP32 model (reference) and its FP16 emulation (candidate) on the samples and judge the candidate:
   by the task metric when one is given, else by the numeric criterion (inf/NaN always fails). The default
   criterion, ``auto``, first looks for dense maps among the outputs (a Sigmoid's probability map, a Softmax's or
   ArgMax's class map: :mod:`orinkit.convert.fp16.dense_maps`) and judges those by their masks or classes.
2. If it fails, keep in FP32 the nodes whose FP32 activations leave the FP16 range (|x| > 65504).
3. If it still fails, rank the remaining nodes by their own contribution to the error (each converted alone,
   measured once, on the sample that erred most), then keep nodes in that order, doubling the count until the
   gate passes and bisecting back, and finally return to FP16 every kept node the verdict does not need.
4. All of it under a time budget: when it runs out the search ends with the best passing set found so far
   (every node in FP32 passes by construction) and says so.

The sessions live in a child process (:mod:`orinkit.convert.fp16.host`): built once, reused by every
evaluation, and a crash of onnxruntime becomes :class:`~orinkit.convert.errors.LibraryCrashError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orinkit.convert.errors import AccuracyGateError, ConvertError, LibraryCrashError, ModelRunError
from orinkit.convert.fp16.criteria import Criterion, OutputMetrics, badness, compare
from orinkit.convert.fp16.dense_maps import DenseMap, default_maps
from orinkit.convert.fp16.task_metrics import MetricResult, TaskMetric, parse_metric
from orinkit.convert.preflight import closest
from orinkit.convert.stages import paced
from orinkit.core.errors import ChildCrashedError, OrinkitError
from orinkit.core.isolation import Worker

FP16_MAX = 65504.0
HOST = "orinkit.convert.fp16.host"
# What each call into the child does, for the error when onnxruntime raises there.
DOING = {"load": "load the model", "reference": "run the FP32 model on the gate's samples",
         "emulate": "run the FP16 emulation on the gate's samples",
         "ranges": "run the FP32 model to measure its activations"}
# Share of the remaining budget the ranking may take before it ranks blocks of nodes instead of single nodes.
RANKING_SHARE = 0.4


@dataclass(frozen=True)
class GateOptions:
    criterion: Criterion = Criterion()
    metric: TaskMetric | None = None
    budget_s: float = 60.0
    keep_fp32: tuple[str, ...] = ()  # nodes the user (or a replayed build) keeps in FP32 whatever the verdict
    search: bool = True  # False: judge keep_fp32 as it is (a rebuild replays a recorded set)

    def __post_init__(self) -> None:
        if not self.budget_s > 0:
            raise ConvertError(f"--gate-budget must be above 0 seconds, got {self.budget_s}", hint="e.g. 60")


@dataclass(frozen=True)
class Verdict:
    metrics: tuple[OutputMetrics, ...]
    task: MetricResult | None
    passed: bool
    maps: tuple[MetricResult, ...] = ()  # the auto criterion's dense maps, each judged by its metric
    judged_by: tuple[tuple[str, str], ...] = ()  # (output, the metric that decides it instead of the numbers)

    def lines(self) -> list[str]:
        instead = dict(self.judged_by)
        return [m.describe(instead.get(m.name)) for m in self.metrics] + [r.describe() for r in self.maps] + (
            [self.task.describe()] if self.task else [])


@dataclass(frozen=True)
class GateReport:
    passed: bool
    decided_by: str
    first: Verdict  # every node in FP16 (but the forced ones)
    final: Verdict  # with keep_fp32 applied
    keep_fp32: tuple[str, ...]
    forced: tuple[str, ...]
    overflow_nodes: tuple[str, ...]
    searched_nodes: tuple[str, ...]
    nodes: int  # nodes that produce floating tensors: the ones FP16 can convert
    evaluations: int
    seconds: float
    samples: int
    budget_exhausted: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    maps: tuple[DenseMap, ...] = ()  # outputs the auto criterion judged by their task, and why
    metric: str | None = None  # the task metric that judged (given, or chosen by the auto criterion: boxes)

    @property
    def fp16_fraction(self) -> float:
        return 1.0 - len(self.keep_fp32) / self.nodes if self.nodes else 1.0

    def as_dict(self) -> dict:
        def verdict(v: Verdict) -> dict:
            return {"passed": v.passed, "task": None if v.task is None else vars(v.task),
                    "maps": [vars(r) for r in v.maps],
                    "outputs": [{k: (str(x) if isinstance(x, float) and x in (float("inf"), float("-inf")) else x)
                                 for k, x in vars(m).items()} for m in v.metrics]}

        return {"passed": self.passed, "decided_by": self.decided_by, "first": verdict(self.first),
                "final": verdict(self.final), "keep_fp32": list(self.keep_fp32), "forced": list(self.forced),
                "overflow_nodes": list(self.overflow_nodes), "searched_nodes": list(self.searched_nodes),
                "nodes": self.nodes, "fp16_fraction": round(self.fp16_fraction, 4),
                "evaluations": self.evaluations, "seconds": round(self.seconds, 2), "samples": self.samples,
                "budget_exhausted": self.budget_exhausted, "notes": list(self.notes),
                "maps": [vars(m) for m in self.maps], "metric": self.metric}


def judge(names: Sequence[str], reference, candidate, criterion: Criterion, metric: TaskMetric | None = None,
          maps: Sequence[DenseMap] = ()) -> Verdict:
    """The gate's verdict on ``candidate`` outputs (per sample, in ``names`` order) against ``reference``: the
    task metric decides when there is one, else each of ``maps`` decides its output and the criterion the others;
    inf/NaN where FP32 is finite always fails."""
    metrics = tuple(compare(names, reference, candidate, criterion))
    finite = all(m.nonfinite == 0 for m in metrics)
    if metric is None and not maps:
        return Verdict(metrics, None, finite and all(m.passed for m in metrics))
    by_name = ([dict(zip(names, outputs)) for outputs in reference],
               [dict(zip(names, outputs)) for outputs in candidate])
    if metric is not None:
        result = metric.evaluate(*by_name)
        return Verdict(metrics, result, finite and result.passed)
    results = tuple(parse_metric(m.spec).evaluate(*by_name) for m in maps)
    judged = {m.output: m.spec for m in maps}
    passed = all(r.passed for r in results) and all(m.passed for m in metrics if m.name not in judged)
    return Verdict(metrics, None, finite and passed, results, tuple(judged.items()))


class Fp16Gate:
    # What a subclass changes to search another precision the same way (orinkit.convert.int8.gate): the child's
    # module, the words in the progress, and what the child's calls do.
    host = HOST
    what = "FP16"
    fallback = "in FP32"
    doing = DOING

    def __init__(self, model_path: str | Path, samples: Sequence[dict], options: GateOptions = GateOptions(), *,
                 progress: Callable[[str], None] = lambda message: None) -> None:
        self.model_path = Path(model_path)
        self.samples = list(samples)
        self.options = options
        self.progress = progress
        self.evaluations = 0
        self._cache: dict[frozenset, Verdict] = {}
        self.notes: list[str] = []
        self.names: list[str] = []
        self.maps: tuple[DenseMap, ...] = ()
        self.metric: TaskMetric | None = options.metric  # bound to the model once it is loaded
        self.head = None  # the detection head the auto criterion found, if any

    @property
    def source_path(self) -> Path:
        """The FP32 model the task metric reads (a detector's head): the gate's own model here."""
        return self.model_path

    @property
    def decided_by(self) -> str:
        """What judges FP16, and for what the auto criterion chose unasked, why."""
        metric, criterion = self.metric, self.options.criterion
        if metric and self.head is not None:
            from orinkit.convert.detection import describe

            return (f"task metric {metric.spec} (agreement >= {metric.min_agreement:g}), chosen by the auto "
                    f"criterion for {describe(self.head)}")
        if metric:
            return f"task metric {metric.spec} (agreement >= {metric.min_agreement:g})"
        if criterion.kind != "auto":
            return criterion.describe()
        if not self.maps:
            return f"{criterion.describe()}: the auto criterion found no probability or class map among the outputs"
        parts = [f"{_explain(m.spec)} on {m.output}, chosen by the auto criterion for {m.why}" for m in self.maps]
        judged = {m.output for m in self.maps}
        rest = [n for n in self.names if n not in judged]
        if rest:
            parts.append(f"{criterion.describe()} on {', '.join(rest)}")
        return "; ".join(parts)

    def run(self) -> GateReport:
        started = time.monotonic()
        try:
            with Worker(f"onnxruntime (running the {self.what} gate)") as worker, \
                    paced(self.progress, f"{self.what} gate: evaluating") as beat:
                self.worker, self.beat, self.started = worker, beat, started
                return self._run()
        except ChildCrashedError as exc:
            raise LibraryCrashError(
                f"{exc.message}, after {self.evaluations} evaluations",
                hint="the model makes onnxruntime crash on this machine: convert with --no-fp16, or try another "
                     "onnxruntime version",
            ) from exc

    # -- evaluation -----------------------------------------------------------------------------------------

    def _call(self, function: str, *args):
        """``function`` of the child's host module; onnxruntime raising there (not crashing) becomes one typed line:
        the child returns the exception itself, which would otherwise end the tool with a traceback."""
        try:
            return self.worker.call(f"{self.host}:{function}", *args)
        except OrinkitError:
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
            raise ModelRunError(
                f"onnxruntime could not {self.doing[function]} ({why})",
                hint="give inputs the model accepts (--data file.npz, or --input-range NAME:LOW,HIGH: e.g. indices "
                     "within the model's tables), or convert with --no-fp16, which runs no gate",
            ) from exc

    def _judge(self, candidate, indices=None, *, task: bool = True) -> Verdict:
        reference = self.reference if indices is None else [self.reference[i] for i in indices]
        return judge(self.names, reference, candidate, self.options.criterion,
                     self.metric if task else None, self.maps if task else ())

    def evaluate(self, keep: frozenset[str]) -> Verdict:
        keep = frozenset(keep)
        if keep not in self._cache:
            self.evaluations += 1
            candidate = self._call("emulate", sorted(keep))
            self._cache[keep] = self._judge(candidate)
        return self._cache[keep]

    def _alone(self, converted: Sequence[str], index: int) -> float:
        """Badness on sample ``index`` with only ``converted`` in FP16."""
        self.evaluations += 1
        candidate = self._call("emulate", (), list(converted), [index])
        return badness(self._judge(candidate, [index], task=False).metrics)

    def _remaining(self) -> float:
        return self.options.budget_s - (time.monotonic() - self.started)

    def _out_of_budget(self) -> bool:
        if self._remaining() > 0:
            return False
        if not self.exhausted:
            self.exhausted = True
            self.beat.say(f"  the gate's budget of {self.options.budget_s:g} s is spent (--gate-budget): "
                          "ending the search with the best passing set found")
        return True

    # -- the search -----------------------------------------------------------------------------------------

    def _run(self) -> GateReport:
        self.exhausted = False
        info = self._call("load", str(self.model_path), self.samples)
        self.names, self.units = info["outputs"], info["units"]
        forced = self._forced()
        self._choose_metric()
        self.reference = self._call("reference")
        if self.options.criterion.kind == "auto" and self.metric is None:
            maps, notes = default_maps(info["maps"], self.names, self.reference)
            self.maps = tuple(maps)
            self.notes.extend(notes)
            for note in notes:
                self.beat.say(f"  note: {note}")
            for chosen in self.maps:
                self.beat.say(f"  {chosen.output} is {chosen.why}: judged by --metric {chosen.spec}")
        if not self._judge(self.reference).passed:
            raise AccuracyGateError(
                f"the {self.decided_by} rejects the FP32 outputs compared with themselves",
                hint="the limits cannot be met by any model: loosen them (e.g. --min-cosine 0.999)",
            )
        self.beat.status(f"{self.what} gate: every node in {self.what}")
        started = time.monotonic()
        first = self.evaluate(forced)
        per_sample = (time.monotonic() - started) / len(self.samples)
        if first.passed or not self.options.search:
            return self._report(first, forced, forced, (), ())
        self.beat.say(f"  {self.what} fails the gate: " + "; ".join(line for line in first.lines() if "FAIL" in line))

        keep = set(forced)
        self.beat.status(f"{self.what} gate: measuring activation ranges")
        ranges = self._call("ranges")
        overflow = tuple(n for n in self.units if ranges.get(n, 0.0) > FP16_MAX and n not in keep)
        if overflow:
            self.beat.say(f"  {len(overflow)} node(s) leave the FP16 range (|x| > 65504): {_names(overflow)}")
            keep.update(overflow)
            if self.evaluate(frozenset(keep)).passed:
                return self._report(first, frozenset(keep), forced, overflow, ())

        candidates = [n for n in self.units if n not in keep]
        order = self._rank(candidates, ranges, per_sample)
        best = self._smallest_prefix(frozenset(keep), order)
        searched = self._prune(frozenset(keep), best)
        return self._report(first, frozenset(keep) | frozenset(searched), forced, overflow, tuple(searched))

    def _choose_metric(self) -> None:
        """Bind the task metric to the model; unasked, the auto criterion judges a detector by its boxes."""
        if self.metric is not None:
            self.metric = self.metric.bound(self.source_path)
            return
        if self.options.criterion.kind != "auto":
            return
        from orinkit.convert.detection import describe, recognize

        self.head = recognize(self.source_path)
        if self.head is not None:
            self.metric = parse_metric("boxes").bound(self.source_path)
            self.beat.say(f"  the model ends in {describe(self.head)}: judged by --metric boxes")

    def _forced(self) -> frozenset[str]:
        forced = self.options.keep_fp32
        unknown = [n for n in forced if n not in self.units]
        if unknown:
            raise ConvertError(f"--keep-fp32 names {_names(unknown)}, which are not nodes that compute in floating "
                               "point in this model", hint=f"did you mean {closest(unknown[0], self.units)}? Node "
                                                           f"names look like {_names(self.units[:3])}")
        return frozenset(forced)

    def _worst_sample(self, keep: frozenset[str]) -> int:
        candidate = self._call("emulate", sorted(keep))
        self.evaluations += 1
        scores = [badness(self._judge([c], [i], task=False).metrics) for i, c in enumerate(candidate)]
        return max(range(len(scores)), key=scores.__getitem__)

    def _rank(self, candidates: list[str], ranges: dict[str, float], per_sample: float) -> list[str]:
        """``candidates`` by their own contribution to the error, largest first (blocks when nodes cost too much)."""
        if not candidates:
            return []
        worst = self._worst_sample(frozenset(self.units) - frozenset(candidates))
        affordable = max(1, int(RANKING_SHARE * max(self._remaining(), 0.0) / max(per_sample, 1e-6)))
        size = -(-len(candidates) // affordable)  # ceil: nodes per block
        blocks = [candidates[i:i + size] for i in range(0, len(candidates), size)]
        what = "nodes" if size == 1 else f"blocks of {size} nodes"
        if size > 1:
            self.notes.append(f"ranked {len(candidates)} nodes in {len(blocks)} blocks to fit the time budget")
        self.beat.say(f"  ranking {len(blocks)} {what} by their own contribution to the error")
        scores: dict[int, float] = {}
        for index, block in enumerate(blocks):
            if self._out_of_budget():
                break
            self.beat.status(f"{self.what} gate: ranking {index + 1}/{len(blocks)} {what}")
            scores[index] = self._alone(block, worst)
        # Unranked blocks (budget spent) go last, larger activations first: they lose the most to rounding.
        ranked = sorted(range(len(blocks)), key=lambda i: (i not in scores, -scores.get(i, 0.0),
                                                             -max(ranges.get(n, 0.0) for n in blocks[i])))
        top = [f"{blocks[i][0] if size == 1 else blocks[i][0] + '…'} ({scores[i]:.3g})" for i in ranked[:3]
               if i in scores]
        if top:
            self.beat.say(f"  largest contributions: {', '.join(top)}")
        return [node for i in ranked for node in blocks[i]]

    def _smallest_prefix(self, keep: frozenset[str], order: list[str]) -> list[str]:
        """The shortest prefix of ``order`` that makes the gate pass with ``keep``: doubling, then bisecting."""
        failing, passing = 0, len(order)  # keeping all of ``order`` is the FP32 model itself
        count = 1
        while count < len(order) and not self._out_of_budget():
            self.beat.status(f"{self.what} gate: trying {count} more node(s) {self.fallback}")
            if self.evaluate(keep | frozenset(order[:count])).passed:
                passing = count
                break
            failing, count = count, count * 2
        while passing - failing > 1 and not self._out_of_budget():
            middle = (failing + passing) // 2
            self.beat.status(f"{self.what} gate: narrowing down to {middle} node(s) {self.fallback}")
            if self.evaluate(keep | frozenset(order[:middle])).passed:
                passing = middle
            else:
                failing = middle
        return order[:passing]

    def _prune(self, keep: frozenset[str], chosen: list[str]) -> list[str]:
        """Return to FP16 each chosen node, least harmful first, that the gate passes without."""
        chosen = list(chosen)
        if len(chosen) > 1:
            for node in reversed(list(chosen)):
                if self._out_of_budget():
                    break
                self.beat.status(f"{self.what} gate: trying {node} in {self.what} again")
                trial = [n for n in chosen if n != node]
                if self.evaluate(keep | frozenset(trial)).passed:
                    chosen = trial
        return [n for n in self.units if n in chosen]

    def _report(self, first: Verdict, keep: frozenset[str], forced, overflow, searched) -> GateReport:
        # Every node in FP32 is the reference itself: judged without another run.
        final = self._judge(self.reference) if keep >= frozenset(self.units) else self.evaluate(keep)
        if self.exhausted:
            self.notes.append(f"the search ended at its {self.options.budget_s:g} s budget (--gate-budget): the "
                              f"{len(keep)} node(s) kept in FP32 may be more than needed")
        return GateReport(
            passed=final.passed, decided_by=self.decided_by, first=first, final=final,
            keep_fp32=tuple(n for n in self.units if n in keep), forced=tuple(n for n in self.units if n in forced),
            overflow_nodes=tuple(overflow), searched_nodes=tuple(searched), nodes=len(self.units),
            evaluations=self.evaluations, seconds=time.monotonic() - self.started, samples=len(self.samples),
            budget_exhausted=self.exhausted, notes=tuple(self.notes), maps=self.maps,
            metric=None if self.metric is None else self.metric.spec,
        )


def _explain(spec: str) -> str:
    """A dense map's --metric spec in words, for the report."""
    kind, _, rest = spec.partition("@")[0].partition(":")
    if kind == "mask":
        from orinkit.convert.fp16.dense_maps import DEFAULT_THRESHOLDS

        levels = rest or ", ".join(f"{t:g}" for t in DEFAULT_THRESHOLDS)
        return f"mask metric (IoU of the maps thresholded at > {levels}, at least 0.99 on every sample)"
    return "argmax metric (share of pixels whose top class agrees, at least 0.99 on every sample)"


def _names(names: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def run_gate(model_path, samples, options: GateOptions = GateOptions(), *, progress=lambda message: None
             ) -> GateReport:
    return Fp16Gate(model_path, samples, options, progress=progress).run()
