"""The INT8 gate: ModelOpt's INT8 judged by the task on held-out samples, as the FP16 gate judges FP16.

1. ModelOpt calibrates (in a child: it patches onnxruntime) and writes a Q/DQ graph; every quantized node in
   INT8 is judged first.
2. The calibration method is part of the search: when --calib-method is not given and every node in INT8 misses
   the gate, the other method is calibrated too and the better of the two is searched on (the time ModelOpt
   takes is calibration time, never counted in ``--gate-budget``), unless every node in INT8 keeps less than
   :data:`FAR_FROM_MARK` of the task metric's pass mark: the search decides there, on the first calibration.
   A detector's first guess (3.) is judged on the first calibration before that: where it passes, no second
   calibration is made.
3. A family's first guess of what stays out of INT8 is judged as a whole: a detector's
   (:mod:`orinkit.convert.int8.detector`), else a transformer-style net's (:mod:`orinkit.convert.int8.attention`,
   recognised by a Softmax between MatMuls); when it passes, its nodes go back to INT8 in halving groups.
4. Otherwise the search runs on that graph with a switch per quantized node: excluding a node makes it read its
   float inputs instead of the dequantized ones. The scales stay valid, so no candidate needs ModelOpt again.
   Quantized nodes that are no Conv/MatMul/Gemm cost the INT8 share nothing and leave INT8 with the first compute
   node; the compute nodes are ranked by their own error: where a task metric judges and the budget allows, by
   the answers each changes alone in INT8 on every held-out sample (:data:`ANSWER_RANK_SHARE`), else by 1 - cosine
   of the outputs on the worst sample; a detector's by how far they move the class scores, which its boxes metric
   cannot tell apart. At most as
   many leave INT8 in that order as ``--int8-min-share`` allows: that many is judged first (where it misses, the
   search stops: no exclusion set within the share passes), then the fewest are bisected and the unneeded nodes
   return to INT8 in halving groups, all within ``--gate-budget``.
5. ModelOpt runs once more with ``nodes_to_exclude`` and FP16 as the high precision (what TensorRT 10/11 build
   strongly typed), and that graph, the artifact, is judged once. Should ModelOpt's second placement miss the
   gate where the search met it, the searched graph with the excluded nodes' Q/DQ pairs removed is written
   instead (judged too), and a note says so. Should that miss as well (a pass by a hair), up to three larger
   exclusion sets the search judged passing are written in turn, the most INT8 first.
6. The result passes only when the written graph meets the gate (its verdict decides, not the search's emulation
   of it, which rounds otherwise) AND keeps at least ``--int8-min-share`` of its Conv/MatMul/Gemm nodes in INT8
   (:data:`~orinkit.convert.int8.report.DEFAULT_MIN_SHARE`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from orinkit.convert.errors import ConvertError, LibraryCrashError, QuantizationError
from orinkit.convert.fp16.criteria import badness
from orinkit.convert.fp16.gate import DOING, Fp16Gate, GateOptions, GateReport, Verdict
from orinkit.convert.int8 import attention
from orinkit.convert.int8.detector import guess_groups, score_drift
from orinkit.convert.int8.qdq import int8_compute, quantized_nodes
from orinkit.convert.int8.report import DEFAULT_MIN_SHARE, Excluded, Int8Report, MethodTrial, failing_lines
from orinkit.convert.preflight import closest

__all__ = ["Excluded", "Int8Gate", "Int8Report", "run_int8_gate"]

HOST = "orinkit.convert.int8.host"
# (method, excluded nodes) → the Q/DQ graph written with them out of INT8
Writer = Callable[[str, tuple[str, ...]], Path]
# Every node in INT8 changing more than this share of the answers the pass mark asks for is not a calibration that
# another method brings back: on a text recogniser both methods changed every decoded line, and the second ModelOpt
# run (45-115 s there) was time the search needed. The search decides there, on the first calibration.
FAR_FROM_MARK = 0.5
# One FP16 evaluation costing more than this share of --gate-budget switches the search to the FP32-widened graph
# (3x faster on onnxruntime's CPU kernels; orinkit.convert.int8.host): on a text recogniser one FP16 evaluation of
# 48 lines took 58 s of a 150 s budget under load.
WIDEN_SHARE = 1 / 8
# The pass mark of the boxes metric the auto criterion chooses for INT8 (FP16 keeps 0.99): the detectors issue's
# goal, F1 >= 0.95 against FP32 with the scores' ±0.05 tolerance. INT8 moves scores by ~0.1, which no calibration
# takes back entirely: on the YOLOv8n measured, 0.95 kept 63 of 64 convolutions INT8 after a 20 s search, 0.99
# needed four out of INT8 and a two-minute search.
INT8_BOX_AGREEMENT = 0.95
# Where a task metric judges (not a detector's boxes), each compute node alone in INT8 is judged on every held-out
# sample and ranked by the answers it changes (then its error, 1 - cosine), when that fits this share of the remaining
# budget. On PP-OCRv4 rec the worst sample's cosine ranked badly (its errors were ~1e-5 and other lines broke): at
# the share bound 41 of 48 lines stayed unchanged; ranked by the answers, 45-47 (26-27 of 51 nodes INT8).
ANSWER_RANK_SHARE = 0.8


class Int8Gate(Fp16Gate):
    """The FP16 gate's search over the quantized nodes of a Q/DQ graph; "kept" there means excluded here.

    ``methods`` are the calibration methods to try in order (``calibrate(method)`` writes the next one's graph);
    ``finish`` = (regenerate, judged_graph) writes the artifact, judged in the same child before the sessions go."""

    host = HOST
    what = "INT8"
    fallback = "out of INT8"
    doing = {**DOING, "load": "load the Q/DQ model", "emulate": "run the Q/DQ model on the gate's samples",
             "run_file": "run the final Q/DQ model on the gate's samples",
             "load_method": "load the other calibration's Q/DQ model", "use_method": "switch calibrations",
             "widen": "load the Q/DQ model widened to FP32"}

    def __init__(self, qdq_path: Path, fp32_path: Path, samples, options: GateOptions, *,
                 finish: tuple[Writer, Writer], methods: Sequence[str] = ("entropy",),
                 calibrate: Callable[[str], Path] | None = None, first_seconds: float = 0.0,
                 min_share: float = DEFAULT_MIN_SHARE, progress=lambda message: None) -> None:
        super().__init__(qdq_path, samples, options, progress=progress)
        self.min_share = min_share
        self.first_seconds = first_seconds  # what ModelOpt took to calibrate with methods[0]
        self.fp32_path, self.finish = Path(fp32_path), finish
        self.methods, self.calibrate = tuple(methods), calibrate
        self.method = self.methods[0]
        self.paths = {self.method: Path(qdq_path)}
        self.keys = {self.method: ""}  # the host's name for each loaded calibration
        self.caches = {self.method: self._cache}
        self.trials: list[MethodTrial] = []
        self.contributions: dict[str, float] = {}
        self.answers_changed: dict[str, float] = {}  # the ranking by the answers: the share each changes alone
        self.widened = False
        self.detector = None  # the detection head, whichever metric judges
        self.guess: tuple[str, ...] = ()
        self.evaluation_seconds: list[float] = []
        self.needs = ""
        self.artifact: tuple[Path, Verdict] | None = None

    @property
    def source_path(self) -> Path:
        # ModelOpt's Q/DQ graph drops the metadata (Ultralytics' class names, imgsz): the FP32 model has them.
        return self.fp32_path

    def _call(self, function: str, *args):
        if function == "load":  # the child needs the FP32 model beside the Q/DQ one
            args = (args[0], str(self.fp32_path), *args[1:])
        return super()._call(function, *args)

    def _forced(self) -> frozenset[str]:
        unknown = [n for n in self.options.keep_fp32 if n not in self.units]
        if unknown:
            raise ConvertError(f"--int8-exclude names {', '.join(unknown[:6])}, which ModelOpt did not quantize in "
                               "this model", hint=f"did you mean {closest(unknown[0], self.units)}? The quantized "
                                                  f"nodes here are {', '.join(self.units[:4])}, ...")
        return frozenset(self.options.keep_fp32)

    def _choose_metric(self) -> None:
        super()._choose_metric()
        from orinkit.convert.detection import recognize

        self.detector = self.head if self.head is not None else recognize(self.fp32_path)
        if self.head is not None and self.options.metric is None and self.metric is not None:
            self.metric = replace(self.metric, min_agreement=INT8_BOX_AGREEMENT)

    # -- evaluation -----------------------------------------------------------------------------------------

    def evaluate(self, keep: frozenset[str]) -> Verdict:
        cached = frozenset(keep) in self._cache
        started = time.monotonic()
        verdict = super().evaluate(keep)
        if not cached:
            self.evaluation_seconds.append(time.monotonic() - started)
        return verdict

    def _badness(self, candidate, indices: Sequence[int]) -> float:
        """A detector's largest score change, else 1 - cosine of the outputs (the badness where one is not finite)."""
        drift = None if self.detector is None else score_drift(
            self.detector, self.names, [self.reference[i] for i in indices], candidate)
        if drift is not None:
            return drift
        metrics = self._judge(candidate, list(indices), task=False).metrics
        if any(m.nonfinite for m in metrics):
            return badness(metrics)
        # The max error saturates in INT8 (most of a text recogniser's convolutions alone moved some probability by
        # ~1.0, so they tied); 1 - cosine keeps ranking them by how much of the output they move.
        return max((1.0 - m.cosine for m in metrics), default=0.0)

    def _alone(self, converted, index: int) -> float:
        self.evaluations += 1
        score = self._badness(self._call("emulate", (), list(converted), [index]), [index])
        for node in converted:
            self.contributions[node] = score
        return score

    def _worst_sample(self, keep: frozenset[str]) -> int:
        candidate = self._call("emulate", sorted(keep))
        self.evaluations += 1
        scores = [self._badness([c], [i]) for i, c in enumerate(candidate)]
        return max(range(len(scores)), key=scores.__getitem__)

    # -- the search -----------------------------------------------------------------------------------------

    def _run(self) -> GateReport:
        report = self._search()
        regenerate, judged_graph = self.finish
        self.beat.status("INT8 gate: ModelOpt writes the final graph")
        path = regenerate(self.method, report.keep_fp32)
        self.beat.status("INT8 gate: judging the final graph")
        self.evaluations += 1
        verdict = self._judge(self._call("run_file", str(path)))
        if not verdict.passed and report.passed:
            self.notes.append("ModelOpt's graph with the exclusions missed the gate where the searched one met it ("
                              + "; ".join(failing_lines(verdict))
                              + "): the searched graph, with the excluded nodes' Q/DQ pairs removed, is written")
            self.beat.say(f"  note: {self.notes[-1]}")
            path = judged_graph(self.method, report.keep_fp32)
            self.evaluations += 1
            verdict = self._judge(self._call("run_file", str(path)))
        if not verdict.passed and report.passed:
            report, path, verdict = self._with_margin(report, path, verdict)
        self.artifact = (path, verdict)
        return report

    def _with_margin(self, report: GateReport, path: Path, verdict: Verdict) -> tuple[GateReport, Path, Verdict]:
        """The written graph missed where the searched one passed by a hair (onnxruntime's FP16 rounding follows
        the graph's layout: a YOLOX passed the search at mAP50-95 0.992 and its written graph scored 0.990-). The
        passing sets the search judged that keep the searched nodes and more out of INT8 are written instead, the
        most INT8 first, three at most (a few seconds each: no ModelOpt run)."""
        _, judged_graph = self.finish
        int8_nodes = set(self._compute()[0])
        searched = frozenset(report.keep_fp32)
        safer = sorted((keep for keep, seen in self._cache.items() if seen.passed and keep > searched),
                       key=lambda keep: (len(keep & int8_nodes), -self._rank_key(self._cache[keep])[1], len(keep)))
        missed = "; ".join(failing_lines(verdict))
        for keep in safer[:3]:
            self.beat.status(f"INT8 gate: writing a passing set with more margin ({len(keep)} nodes out of INT8)")
            candidate = judged_graph(self.method, tuple(n for n in self.units if n in keep))
            self.evaluations += 1
            judged = self._judge(self._call("run_file", str(candidate)))
            if judged.passed:
                self.notes.append(f"the searched set's written graph missed the gate ({missed}): a larger set the "
                                  f"search judged passing ({len(keep)} nodes out of INT8) is written")
                self.beat.say(f"  note: {self.notes[-1]}")
                return (self._report(report.first, keep, frozenset(report.forced), (), tuple(keep)), candidate,
                        judged)
        return report, path, verdict

    def _search(self) -> GateReport:
        asked = self.options
        self.options = replace(asked, search=False)
        try:  # the FP16 gate's set-up: load, bind the metric, the reference, every quantized node in INT8 judged
            setup = super()._run()
        finally:
            self.options = asked
        first, forced = setup.first, frozenset(setup.forced)
        self.trials.append(MethodTrial(self.method, first.passed, self._measure(first), self.first_seconds))
        if not asked.search:
            return setup
        if first.passed:
            return self._report(first, forced, forced, (), ())
        if self.detector is not None and self.methods[1:]:
            # A detector's guess on the first calibration before ModelOpt calibrates again: where it passes, the
            # second calibration and its judging (~50 s on a YOLOv8n here) decide nothing.
            self.started = time.monotonic()
            guessed = self._try_guess(forced, last_try=False)
            if guessed is not None:
                return self._report(first, forced | frozenset(guessed), forced, (), tuple(guessed))
        first = self._try_methods(forced, first)
        if first.passed:
            return self._report(first, forced, forced, (), ())
        # The budget is the search's: loading the sessions, the reference and judging each calibration with every
        # node in INT8 came before it (on a YOLOv8n here they took longer than the default budget).
        self.started = time.monotonic()
        self.beat.say(f"  INT8 ({self.method} calibration) misses the gate with every node in INT8: "
                      + "; ".join(failing_lines(first)))
        self._widen()
        guessed = self._try_guess(forced)
        if guessed is not None:
            return self._report(first, forced | frozenset(guessed), forced, (), tuple(guessed))
        # A quantized node that is no Conv/MatMul/Gemm (an Add, a Mul, a reshape ModelOpt gave a Q/DQ pair for
        # TensorRT's fusions) costs the INT8 share nothing: those leave INT8 with the first compute node, unranked,
        # and return in halving groups where the gate does not need them. Only the compute nodes are ranked and
        # bisected over (45 of the 128 quantized nodes of the text recogniser measured).
        compute = set(self._compute()[1])
        free = frozenset(n for n in self.units if n not in forced and n not in compute)
        candidates = [n for n in self.units if n not in forced and n in compute]
        per_sample = (self.evaluation_seconds[0] if self.evaluation_seconds else 0.0) / max(len(self.samples), 1)
        order = self._rank(candidates, {}, per_sample)
        if self.exhausted:
            unranked = sum(n not in self.contributions for n in candidates)
            self._shortfall("ranking the nodes", 3 * _log2(len(candidates)), unranked * per_sample)
        before = self.exhausted
        cap = self._share_cap(forced, order)
        # All of them out is the float model, which passes: judged only where the share bounds the search.
        verdict = self.evaluate(forced | free | frozenset(order[:cap])) if cap < len(order) else None
        if verdict is not None and not verdict.passed:  # more must leave INT8 than the share allows
            self.notes.append(f"with the {cap} compute nodes that move the outputs most out of INT8 (all that "
                              f"--int8-min-share {self.min_share:g} allows) and the {len(free)} other quantized "
                              f"nodes, INT8 still misses the gate ({self._measure(verdict)}): the search stops "
                              "there")
            self.beat.say(f"  note: {self.notes[-1]}")
            chosen = tuple(n for n in self.units if n in free or n in order[:cap])
            return self._report(first, forced | frozenset(chosen), forced, (), chosen)
        best = self._smallest_prefix(forced | free, order[:cap], passing=True)
        if self.exhausted and not before:
            self._shortfall("looking for the fewest nodes out of INT8", _log2(len(best)) + len(best))
        before = self.exhausted
        back = list(reversed(best)) + [n for n in self.units if n in free]
        searched = self._return_groups(forced, [back], what="searched")
        if self.exhausted and not before:
            self._shortfall("returning nodes to INT8", len(searched))
        return self._report(first, forced | frozenset(searched), forced, (), tuple(searched))

    def _share_cap(self, forced: frozenset[str], order: Sequence[str]) -> int:
        """The longest prefix of ``order`` that leaves --int8-min-share of the compute nodes in INT8 (with
        ``forced`` out too): the search never judges more out of INT8, which could not pass anyway."""
        if self.min_share <= 0:
            return len(order)
        int8_nodes, compute = self._compute()
        counted = set(int8_nodes)
        allowed = len(counted) - math.ceil(self.min_share * len(compute) - 1e-9) - len(counted & forced)
        if allowed < 0:  # ModelOpt's own placement is below the share: the result fails on it whatever is searched
            return len(order)
        taken = 0
        for index, node in enumerate(order):
            taken += node in counted
            if taken > allowed:
                return index
        return len(order)

    def _compute(self) -> tuple[list[str], list[str]]:
        """(the Conv/MatMul/Gemm nodes ModelOpt put in INT8, every Conv/MatMul/Gemm node) of the searched graph."""
        import onnx

        return int8_compute(onnx.load(str(self.paths[self.method]), load_external_data=False))

    def _smallest_prefix(self, keep: frozenset[str], order: list[str], passing: bool = False) -> list[str]:
        """The FP16 gate's doubling then bisecting; ``passing``: all of ``order`` out is known to pass (judged
        already), so it bisects at once: log2(len(order)) evaluations instead of up to twice that."""
        if not passing:
            return super()._smallest_prefix(keep, order)
        failing, passing_at = 0, len(order)
        while passing_at - failing > 1 and not self._out_of_budget():
            middle = (failing + passing_at) // 2
            self.beat.status(f"{self.what} gate: narrowing down to {middle} node(s) {self.fallback}")
            if self.evaluate(keep | frozenset(order[:middle])).passed:
                passing_at = middle
            else:
                failing = middle
        return order[:passing_at]

    def _widen(self, force: bool = False) -> None:
        """Search on the FP32-widened graph where one FP16 evaluation costs more than WIDEN_SHARE of the budget
        (or ``force``: the ranking by the answers needs one per node); its verdicts are kept apart from the FP16
        ones."""
        each = self.evaluation_seconds[-1] if self.evaluation_seconds else 0.0
        if self.widened or (each <= WIDEN_SHARE * self.options.budget_s and not force):
            return
        self.widened = True
        self._call("widen", self.keys[self.method], str(self.paths[self.method]))
        self._cache = self.caches[self.method] = {}
        self.evaluation_seconds.clear()
        why = ("ranking the nodes by the answers takes one per node" if force else
               f"of the {self.options.budget_s:g} s budget")
        self.notes.append(f"one evaluation in FP16 took {each:.0f} s ({why}): the search judges the Q/DQ graph "
                          "widened to FP32 (the same scales, about 3x faster here); the final graph is judged in FP16")
        self.beat.say(f"  note: {self.notes[-1]}")

    def _rank(self, candidates: list[str], ranges: dict[str, float], per_sample: float) -> list[str]:
        if self.detector is None and self.metric is not None and candidates:
            ranked = self._rank_by_answers(candidates)
            if ranked is not None:
                return ranked
        return super()._rank(candidates, ranges, per_sample)

    def _rank_by_answers(self, candidates: list[str]) -> list[str] | None:
        """Each candidate alone in INT8, judged by the task metric on every held-out sample: most answers changed
        first, then the largest error (1 - cosine over those samples). None where that does not fit
        ANSWER_RANK_SHARE of the remaining budget (the worst-sample ranking serves; a note says what it would
        need)."""
        probe = next(iter(self._cache.values()), None)
        if probe is None or probe.task is None:  # a dense map's metric: the worst sample ranks
            return None
        each = self.evaluation_seconds[-1] if self.evaluation_seconds else 0.0
        if each * len(candidates) > ANSWER_RANK_SHARE * self._remaining():
            self._widen(force=True)
        everything = frozenset(self.units)
        scores: dict[str, tuple[float, float]] = {}
        self.beat.say(f"  ranking {len(candidates)} nodes by the task's answers on all {len(self.samples)} held-out "
                      "samples, each alone in INT8")
        for index, node in enumerate(candidates):
            if self._out_of_budget():
                break
            self.beat.status(f"INT8 gate: ranking {index + 1}/{len(candidates)} nodes by the answers")
            started = time.monotonic()
            verdict = self.evaluate(everything - {node})
            error = max((1.0 - m.cosine for m in verdict.metrics), default=0.0)
            scores[node] = (1.0 - verdict.task.agreement, error)
            needed = (time.monotonic() - started) * len(candidates)
            if index == 0 and needed > ANSWER_RANK_SHARE * (self._remaining() + needed / len(candidates)):
                elapsed = time.monotonic() - self.started
                self.notes.append(f"ranking the {len(candidates)} compute nodes by the answers on every held-out "
                                  f"sample would take about {needed:.0f} s: ranked on the worst sample instead "
                                  f"(--gate-budget {math.ceil((elapsed + needed / ANSWER_RANK_SHARE) / 10) * 10} "
                                  "ranks them by the answers)")
                self.beat.say(f"  note: {self.notes[-1]}")
                return None
        self.answers_changed = {n: score[0] for n, score in scores.items()}
        self.contributions.update({n: score[1] for n, score in scores.items()})
        if len(scores) < len(candidates):
            self._shortfall("ranking the nodes by the answers", len(candidates) - len(scores))
        ranked = sorted(candidates, key=lambda n: (n not in scores, tuple(-v for v in scores.get(n, (0.0, 0.0)))))
        top = [f"{n} ({scores[n][0]:.0%} of the answers)" for n in ranked[:3] if n in scores]
        if top:
            self.beat.say(f"  largest changes alone in INT8: {', '.join(top)}")
        return ranked

    def _use(self, method: str) -> None:
        self._call("use_method", self.keys[method])
        self.method = method
        self._cache = self.caches.setdefault(method, {})

    def _measure(self, verdict: Verdict) -> str:
        if verdict.task is not None:
            return f"{verdict.task.name} {verdict.task.agreement:.4f}"
        if verdict.maps:
            return ", ".join(f"{m.name} {m.agreement:.4f}" for m in verdict.maps)
        return f"error {badness(verdict.metrics):.3g}"

    @staticmethod
    def _rank_key(verdict: Verdict) -> tuple:
        if verdict.task is not None:
            value = verdict.task.agreement if verdict.task.rank is None else verdict.task.rank
        elif verdict.maps:
            value = min(m.agreement for m in verdict.maps)
        else:
            value = -badness(verdict.metrics)
        return (verdict.passed, value)

    def _try_methods(self, forced: frozenset[str], first: Verdict) -> Verdict:
        """Calibrate with each other method, judge every node INT8 with it, and keep the best one."""
        best_method, best = self.method, first
        if self.methods[1:] and first.task is not None and first.task.agreement < FAR_FROM_MARK * (
                self.metric.min_agreement if self.metric is not None else 1.0):
            self.notes.append(f"every node INT8 with {self.method} calibration keeps only {self._measure(first)}, far "
                              f"from the pass mark: the search decides on it ({', '.join(self.methods[1:])} "
                              "calibration not tried; --calib-method chooses one)")
            self.beat.say(f"  note: {self.notes[-1]}")
            return first
        for method in self.methods[1:]:
            if best.passed or self.calibrate is None:
                break
            self.beat.say(f"  every node INT8 with {self.method} calibration misses the gate: calibrating with "
                          f"{method} too")
            started = time.monotonic()
            try:
                path = self.calibrate(method)
            except (QuantizationError, LibraryCrashError) as exc:  # the first calibration serves on its own
                self.notes.append(f"{method} calibration failed ({exc.message}): {self.method} is searched on")
                self.beat.say(f"  note: {self.notes[-1]}")
                continue
            units = self._call("load_method", method, str(path))
            spent = time.monotonic() - started
            if units != self.units:
                self.notes.append(f"{method} calibration quantized other nodes than {self.method}: not compared")
                continue
            self.paths[method], self.keys[method] = path, method
            previous = self.method
            self._use(method)
            verdict = self.evaluate(forced)
            self.trials.append(MethodTrial(method, verdict.passed, self._measure(verdict), spent))
            self.beat.say(f"  every node INT8 with {method} calibration: {self._measure(verdict)} "
                          f"({'passes' if verdict.passed else 'misses'})")
            if self._rank_key(verdict) > self._rank_key(best):
                best_method, best = method, verdict
            self._use(previous)
        if best_method != self.method:
            self._use(best_method)
        return best

    def _try_guess(self, forced: frozenset[str], last_try: bool = True) -> list[str] | None:
        """A family's first guess (a detector's, else a transformer's), judged as a whole; when it passes, its nodes
        return to INT8 where they may. ``last_try`` False: another calibration follows a miss (no note yet)."""
        import onnx

        model = onnx.load(str(self.paths[self.method]), load_external_data=False)
        if self.detector is not None:
            family, what = "detector", ("the stem's convolutions, the head's last ones, its box branch and "
                                        "the quantized non-compute nodes")
            groups = guess_groups(model, self.units, self.detector)
        else:
            family, what = "attention", "attention's MatMuls and Softmax inputs, LayerNorm, the first and last layers"
            guessed = attention.first_guess(model, self.units)
            groups = [guessed[1:], guessed[:1]]  # the first compute node returns last
        groups = [g for g in ([n for n in group if n not in forced] for group in groups) if g]
        self.guess = tuple(n for group in groups[::-1][:1] + groups[:-1] for n in group)
        if not self.guess:
            return None
        self.beat.status(f"INT8 gate: the {family} first guess ({len(self.guess)} nodes out of INT8)")
        verdict = self.evaluate(forced | frozenset(self.guess))
        self.beat.say(f"  the {family} first guess ({len(self.guess)} nodes out of INT8: {what}): "
                      f"{self._measure(verdict)} ({'passes' if verdict.passed else 'misses'})")
        if not verdict.passed:
            if last_try:
                self.notes.append(f"the {family} first guess ({len(self.guess)} nodes out of INT8) missed the gate "
                                  f"({self._measure(verdict)}): the search started from every node in INT8")
            return None
        return self._return_groups(forced, groups)

    def _return_groups(self, base: frozenset[str], groups: list[list[str]], what: str = "first guess's") -> list[str]:
        """The nodes of ``groups`` (all out of INT8, passing) returned to INT8 a group at a time, a group that fails
        halved after every other group was tried (breadth first: the budget ends the finest steps, not whole
        groups never tried). Where most of a guess is not needed this takes a few evaluations instead of one per
        node. ``groups`` come least likely needed first (the head's last convolutions before the first one)."""
        kept = [n for group in groups for n in group]
        queue = [list(g) for g in groups]
        while queue and not self._out_of_budget():
            group = queue.pop(0)
            self.beat.status(f"INT8 gate: trying {len(group)} of the {what} nodes in INT8 again")
            trial = [n for n in kept if n not in group]
            if self.evaluate(base | frozenset(trial)).passed:
                kept = trial
            elif len(group) > 1:
                queue += [group[:len(group) // 2], group[len(group) // 2:]]
        if queue:
            self._shortfall(f"returning the {what} nodes to INT8", sum(len(g) for g in queue))
        return [n for n in self.units if n in kept]

    def _shortfall(self, doing: str, evaluations: int, extra_seconds: float = 0.0) -> None:
        """What the search would have needed when it ended at its budget while ``doing``."""
        if self.needs:
            return
        each = sum(self.evaluation_seconds) / len(self.evaluation_seconds) if self.evaluation_seconds else 0.0
        seconds = evaluations * each + extra_seconds
        budget = self.options.budget_s
        self.needs = (f"the search ended at its {budget:g} s budget while {doing}; it would need about "
                      f"{seconds:.0f} s more ({evaluations} evaluation(s) of ~{each:.1f} s"
                      + (f" and {extra_seconds:.0f} s of ranking" if extra_seconds else "")
                      + f"): --gate-budget {math.ceil((budget + seconds) / 10) * 10}")
        self.beat.say(f"  {self.needs}")

    def reasons(self, report: GateReport) -> tuple[Excluded, ...]:
        """Why each excluded node is excluded: asked for, or the gate fails with it in INT8 (the failing line of
        the evaluation without it, and its own error when the ranking measured it)."""
        reasons = []
        keep = frozenset(report.keep_fp32)
        ranked = sorted(self.contributions, key=lambda n: -self.contributions[n])
        measure = "score change" if self.detector is not None else "INT8 error (1 - cosine)"
        for node in report.keep_fp32:
            if node in report.forced:
                reasons.append(Excluded(node, "asked for (--int8-exclude)"))
                continue
            parts = ["the detector's first guess"] if node in self.guess and not self.contributions else []
            without = self._cache.get(keep - {node})
            if without is not None and not without.passed:
                parts.append("in INT8 it fails the gate: " + "; ".join(failing_lines(without)[:2]))
            if node in self.answers_changed:
                parts.append(f"alone in INT8 it changes {self.answers_changed[node]:.0%} of the answers ("
                             f"{measure} {self.contributions[node]:.3g} over the held-out samples), rank "
                             f"{ranked.index(node) + 1} of {len(ranked)}")
            elif node in self.contributions:
                parts.append(f"own {measure} {self.contributions[node]:.3g} on the worst sample, "
                             f"rank {ranked.index(node) + 1} of {len(ranked)}")
            if report.budget_exhausted:
                parts.append("the search ended at its --gate-budget, so it may not be needed")
            reasons.append(Excluded(node, "; ".join(parts) or "the search needed it out of INT8 to pass"))
        return tuple(reasons)


def _log2(count: int) -> int:
    return max(1, math.ceil(math.log2(count + 1)))


def run_int8_gate(qdq_path: Path, fp32_path: Path, samples, options: GateOptions, *, methods: Sequence[str],
                  calibration, finish: tuple[Writer, Writer], fp16: Verdict | None,
                  calibrate: Callable[[str], Path] | None = None, min_share: float = DEFAULT_MIN_SHARE,
                  first_seconds: float = 0.0, progress=lambda message: None) -> Int8Report:
    """The search on ``qdq_path`` (ModelOpt's graph calibrated by ``methods[0]``), then ``finish`` writes the
    artifact, judged once."""
    import onnx

    started = time.monotonic()
    gate = Int8Gate(qdq_path, fp32_path, samples, options, finish=finish, methods=methods, calibrate=calibrate,
                    first_seconds=first_seconds, min_share=min_share, progress=progress)
    search = gate.run()
    path, verdict = gate.artifact
    final = onnx.load(str(path), load_external_data=False)
    int8_nodes, compute = int8_compute(final)
    fp32 = gate._judge(gate.reference)
    notes = list(dict.fromkeys(list(search.notes) + gate.notes)) + ([calibration.note] if calibration.note else [])
    report = Int8Report(
        passed=False, decided_by=search.decided_by, method=gate.method,
        calibration_samples=len(calibration.samples), calibration_sha256=calibration.sha256, held_out=len(samples),
        fp32=fp32, fp16=fp16, int8=verdict, search=search, excluded=gate.reasons(search),
        int8_nodes=tuple(int8_nodes), compute_nodes=len(compute), quantized=len(quantized_nodes(final)),
        seconds=time.monotonic() - started, notes=notes, min_share=min_share, methods=tuple(gate.trials),
        guess=gate.guess, needs=gate.needs, metric_mark=None if gate.metric is None else gate.metric.min_agreement)
    report.passed = report.accuracy_met and report.share_met
    if verdict.passed and not search.passed:
        report.notes.append(f"the search's emulation missed the gate with these exclusions "
                            f"({'; '.join(failing_lines(search.final))}) where the written graph, judged as the "
                            "engine runs it, meets it: the written graph decides")
    if report.accuracy_met and report.int8_share < DEFAULT_MIN_SHARE and report.share_met:
        report.notes.append(f"{report.share_line()}: accepted because --int8-min-share {min_share:g} asks for it")
    return report
