"""What the INT8 stage reports: FP32/FP16/INT8 side by side, how many compute nodes run in INT8 (and whether that
is enough to call the result INT8), which calibration was chosen over which, and every excluded node with why."""

from __future__ import annotations

from dataclasses import dataclass, field

from orinkit.convert.fp16.gate import GateReport, Verdict

# Below half of its Conv/MatMul/Gemm nodes in INT8 a model is not an INT8 model: its INT8 and FP16 regions
# alternate, each boundary costs TensorRT a reformat, and the end-to-end gain INT8 brings on Orin (YOLOv8n 3.19 ms
# FP16 against 2.32 ms INT8 with every conv INT8) is gone while the accuracy lost stays: the FP16 engine is the
# better artifact. A search that excluded everything (0 of 51 nodes on a text recogniser, 0 of 83 on a YOLOX)
# was reported as passed before: now it is a failure with its reason, unless the user asks for it
# (--int8-min-share 0).
DEFAULT_MIN_SHARE = 0.5
SHOWN = 8  # excluded nodes listed in the log; report.json lists every one


def failing_lines(verdict: Verdict) -> list[str]:
    """What fails in ``verdict``: the task metric's line when one decides (the outputs' numeric lines then only
    inform), else every failing line."""
    if verdict.task is not None and not verdict.task.passed:
        return [verdict.task.describe()]
    return [line for line in verdict.lines() if "FAIL" in line]


@dataclass(frozen=True)
class Excluded:
    node: str
    why: str


@dataclass(frozen=True)
class MethodTrial:
    """One calibration method, every node in INT8, judged on the held-out samples."""

    method: str
    passed: bool
    measure: str  # the deciding measure's value, as the side-by-side table shows it
    calibration_seconds: float


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
    min_share: float = DEFAULT_MIN_SHARE
    methods: tuple[MethodTrial, ...] = ()  # the calibrations tried, in order
    guess: tuple[str, ...] = ()  # a family's first guess of what stays out of INT8 (judged before the search)
    needs: str = ""  # what a search that ended at its budget would have needed
    metric_mark: float | None = None  # the task metric's pass mark in the INT8 gate (the engine is judged by it)

    @property
    def int8_share(self) -> float:
        return len(self.int8_nodes) / self.compute_nodes if self.compute_nodes else 0.0

    @property
    def share_met(self) -> bool:
        return self.min_share <= 0 or (self.compute_nodes > 0 and self.int8_share >= self.min_share)

    @property
    def accuracy_met(self) -> bool:
        # The written graph, judged in FP16 as the engine runs it, decides: the search's verdicts are an emulation
        # (widened to FP32 where FP16 is slow) that rounds otherwise (PP-OCRv4 rec: 43 of 48 lines searched, 45 of
        # 48 written, for the same exclusions). A note says so where they disagree.
        return self.int8.passed

    def share_line(self) -> str:
        return (f"{len(self.int8_nodes)} of {self.compute_nodes} compute nodes INT8 (Conv/MatMul/Gemm, "
                f"{self.int8_share:.0%}; the minimum is {self.min_share:.0%}, --int8-min-share)")

    def failure(self) -> str:
        """Why the INT8 result is not one ("" when it passed)."""
        if not self.accuracy_met:
            failing = "; ".join(failing_lines(self.int8))
            return f"INT8 misses the {self.decided_by} on the held-out samples: {failing}"
        if not self.share_met:
            why = (f"INT8 leaves only {len(self.int8_nodes)} of {self.compute_nodes} compute nodes (Conv/MatMul/Gemm) "
                   f"in INT8 ({self.int8_share:.0%}), below the minimum of {self.min_share:.0%}: an engine that "
                   "mostly runs FP16 gains little or nothing over the FP16 one")
            if self.excluded:
                why += f"; {len(self.excluded)} node(s) had to stay out of INT8 to meet the {self.decided_by}"
            return why + (f"; {self.needs}" if self.needs else "")
        return ""

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
        if self.int8.task is not None and self.int8.task.detail:
            lines.append(f"INT8 {self.int8.task.name}: {self.int8.task.detail}")
        lines.append(f"INT8: {self.share_line()}, {self.quantized} nodes read Q/DQ")
        tried = "; ".join(f"{t.method}: {t.measure} ({'passes' if t.passed else 'misses'}, calibrated in "
                          f"{t.calibration_seconds:.0f} s)" for t in self.methods)
        lines.append(f"calibrated by {self.method} on {self.calibration_samples} samples, judged on {self.held_out} "
                     f"held-out samples" + (f"; every node INT8 with {tried}" if len(self.methods) > 1 else ""))
        shown = [f"excluded from INT8 (FP16): {e.node}: {e.why}" for e in self.excluded[:SHOWN]]
        if len(self.excluded) > SHOWN:
            shown.append(f"... and {len(self.excluded) - SHOWN} more excluded node(s) (report.json lists all)")
        return lines + shown

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
                "min_share": self.min_share, "share_met": self.share_met, "failure": self.failure(),
                "methods": [vars(t) for t in self.methods], "guess": list(self.guess), "needs": self.needs,
                "quantized": self.quantized, "search": self.search.as_dict(), "seconds": round(self.seconds, 2),
                "notes": list(self.notes)}
