"""The INT8 gate: ModelOpt's INT8 judged by the task on held-out samples, as the FP16 gate judges FP16.

1. ModelOpt calibrates once (in a child: it patches onnxruntime) and writes a Q/DQ graph with FP32 scales.
2. The FP16 gate's search (:class:`~orinkit.convert.fp16.gate.Fp16Gate`: rank each node's own error, keep nodes
   out in that order doubling then bisecting, return the unneeded ones, all within ``--gate-budget``) runs on that
   graph with a switch per quantized node: excluding a node makes it read its float inputs instead of the
   dequantized ones. The scales stay valid, so no candidate needs ModelOpt again.
3. ModelOpt runs once more with ``nodes_to_exclude`` and FP16 as the high precision (what TensorRT 10/11 build
   strongly typed), and that graph, the artifact, is judged once. Should ModelOpt's second placement miss the
   gate where the search met it, the searched graph with the excluded nodes' Q/DQ pairs removed is written
   instead (judged too), and a note says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orinkit.convert.errors import ConvertError
from orinkit.convert.fp16.gate import DOING, Fp16Gate, GateOptions, GateReport, Verdict
from orinkit.convert.int8.qdq import int8_compute, quantized_nodes
from orinkit.convert.preflight import closest

HOST = "orinkit.convert.int8.host"
Writer = Callable[[tuple[str, ...]], Path]  # excluded nodes → the Q/DQ graph written with them out of INT8


@dataclass(frozen=True)
class Excluded:
    node: str
    why: str


@dataclass
class Int8Report:
    passed: bool
    decided_by: str
    method: str
    calibration_samples: int
    calibration_sha256: str
    held_out: int
    fp32: Verdict  # the reference against itself: what "every answer agrees" reads as
    fp16: Verdict | None  # the FP16 gate's final verdict on the same samples (None with --no-fp16)
    int8: Verdict  # the artifact ModelOpt wrote with the exclusions
    search: GateReport
    excluded: tuple[Excluded, ...]
    int8_nodes: tuple[str, ...]  # Conv/MatMul/Gemm nodes that compute in INT8 in the artifact
    compute_nodes: int  # Conv/MatMul/Gemm nodes in the artifact
    quantized: int  # nodes of any kind that read a Q/DQ pair in the artifact
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def int8_share(self) -> float:
        return len(self.int8_nodes) / self.compute_nodes if self.compute_nodes else 0.0

    def side_by_side(self) -> list[tuple[str, str, str, str]]:
        """(measure, FP32, FP16, INT8) rows: the task metric's agreement, else each output's range error."""
        def cell(verdict: Verdict | None, pick) -> str:
            return "-" if verdict is None else pick(verdict)

        if self.int8.task is not None:
            return [(self.int8.task.name,) + tuple(cell(v, lambda x: f"{x.task.agreement:.4f}")
                                                  for v in (self.fp32, self.fp16, self.int8))]
        rows = []
        for index, output in enumerate(self.int8.metrics):
            rows.append((f"{output.name} range error",) + tuple(
                cell(v, lambda x, i=index: f"{x.metrics[i].range_error:.2e}") for v in (self.fp32, self.fp16,
                                                                                          self.int8)))
        for result_index, result in enumerate(self.int8.maps):
            rows.append((result.name,) + tuple(cell(v, lambda x, i=result_index: f"{x.maps[i].agreement:.4f}")
                                               for v in (self.fp32, self.fp16, self.int8)))
        return rows

    def lines(self) -> list[str]:
        lines = [f"{'measure':<28} {'FP32':>10} {'FP16':>10} {'INT8':>10}"]
        lines += [f"{row[0][:28]:<28} {row[1]:>10} {row[2]:>10} {row[3]:>10}" for row in self.side_by_side()]
        lines.append(f"INT8: {len(self.int8_nodes)} of {self.compute_nodes} Conv/MatMul/Gemm nodes "
                     f"({self.int8_share:.0%}), {self.quantized} nodes read Q/DQ; calibrated by {self.method} on "
                     f"{self.calibration_samples} samples, judged on {self.held_out} held-out samples")
        lines += [f"excluded from INT8 (FP16): {e.node}: {e.why}" for e in self.excluded]
        return lines

    def as_dict(self) -> dict:
        def verdict(v: Verdict | None):
            return None if v is None else {"passed": v.passed, "lines": v.lines(),
                                           "task": None if v.task is None else vars(v.task)}

        return {"passed": self.passed, "decided_by": self.decided_by, "method": self.method,
                "calibration_samples": self.calibration_samples, "calibration_sha256": self.calibration_sha256,
                "held_out": self.held_out, "fp32": verdict(self.fp32), "fp16": verdict(self.fp16),
                "int8": verdict(self.int8), "side_by_side": [list(r) for r in self.side_by_side()],
                "excluded": [vars(e) for e in self.excluded], "int8_nodes": list(self.int8_nodes),
                "compute_nodes": self.compute_nodes, "int8_share": round(self.int8_share, 4),
                "quantized": self.quantized, "search": self.search.as_dict(), "seconds": round(self.seconds, 2),
                "notes": list(self.notes)}


class Int8Gate(Fp16Gate):
    """The FP16 gate's search over the quantized nodes of a Q/DQ graph; "kept" there means excluded here.

    ``finish(excluded)`` writes the artifact (ModelOpt's second run) and returns its path; it is judged in the same
    child before the sessions go."""

    host = HOST
    what = "INT8"
    fallback = "out of INT8"
    doing = {**DOING, "load": "load the Q/DQ model", "emulate": "run the Q/DQ model on the gate's samples",
             "run_file": "run the final Q/DQ model on the gate's samples"}

    def __init__(self, qdq_path: Path, fp32_path: Path, samples, options: GateOptions, *,
                 finish: tuple[Writer, Writer], progress=lambda message: None) -> None:
        super().__init__(qdq_path, samples, options, progress=progress)
        self.fp32_path, self.finish = Path(fp32_path), finish
        self.contributions: dict[str, float] = {}
        self.artifact: tuple[Path, Verdict] | None = None

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

    def _alone(self, converted, index: int) -> float:
        score = super()._alone(converted, index)
        for node in converted:
            self.contributions[node] = score
        return score

    def _run(self) -> GateReport:
        report = super()._run()
        regenerate, judged_graph = self.finish
        self.beat.status("INT8 gate: ModelOpt writes the final graph")
        path = regenerate(report.keep_fp32)
        self.beat.status("INT8 gate: judging the final graph")
        self.evaluations += 1
        verdict = self._judge(self._call("run_file", str(path)))
        if not verdict.passed and report.passed:
            self.notes.append("ModelOpt's graph with the exclusions missed the gate where the searched one met it ("
                              + "; ".join(line for line in verdict.lines() if "FAIL" in line)
                              + "): the searched graph, with the excluded nodes' Q/DQ pairs removed, is written")
            self.beat.say(f"  note: {self.notes[-1]}")
            path = judged_graph(report.keep_fp32)
            self.evaluations += 1
            verdict = self._judge(self._call("run_file", str(path)))
        self.artifact = (path, verdict)
        return report

    def reasons(self, report: GateReport) -> tuple[Excluded, ...]:
        """Why each excluded node is excluded: asked for, or the gate fails with it in INT8 (the failing line of
        the evaluation without it, and its own error when the ranking measured it)."""
        reasons = []
        keep = frozenset(report.keep_fp32)
        ranked = sorted(self.contributions, key=lambda n: -self.contributions[n])
        for node in report.keep_fp32:
            if node in report.forced:
                reasons.append(Excluded(node, "asked for (--int8-exclude)"))
                continue
            parts = []
            without = self._cache.get(keep - {node})
            if without is not None and not without.passed:
                failing = [line for line in without.lines() if "FAIL" in line]
                parts.append("in INT8 it fails the gate: " + "; ".join(failing[:2]))
            if node in self.contributions:
                parts.append(f"own INT8 error {self.contributions[node]:.3g} on the worst sample, "
                             f"rank {ranked.index(node) + 1} of {len(ranked)}")
            if report.budget_exhausted:
                parts.append("the search ended at its --gate-budget, so it may not be needed")
            reasons.append(Excluded(node, "; ".join(parts) or "the search needed it out of INT8 to pass"))
        return tuple(reasons)


def run_int8_gate(qdq_path: Path, fp32_path: Path, samples, options: GateOptions, *, method: str,
                  calibration, finish: tuple[Writer, Writer], fp16: Verdict | None,
                  progress=lambda message: None) -> Int8Report:
    """The search on ``qdq_path`` (ModelOpt's calibrated graph), then ``finish`` writes the artifact, judged once."""
    import onnx

    started = time.monotonic()
    gate = Int8Gate(qdq_path, fp32_path, samples, options, finish=finish, progress=progress)
    search = gate.run()
    path, verdict = gate.artifact
    final = onnx.load(str(path), load_external_data=False)
    int8_nodes, compute = int8_compute(final)
    fp32 = gate._judge(gate.reference)
    return Int8Report(
        passed=search.passed and verdict.passed, decided_by=search.decided_by, method=method,
        calibration_samples=len(calibration.samples), calibration_sha256=calibration.sha256, held_out=len(samples),
        fp32=fp32, fp16=fp16, int8=verdict, search=search, excluded=gate.reasons(search),
        int8_nodes=tuple(int8_nodes), compute_nodes=len(compute), quantized=len(quantized_nodes(final)),
        seconds=time.monotonic() - started, notes=list(dict.fromkeys(list(search.notes) + gate.notes))
        + ([calibration.note] if calibration.note else []))
