"""Latency statistics and the benchmark report, shaped like trtexec's performance summary (no GPU needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orinkit.core.stats import latency_stats

__all__ = ["BenchmarkReport", "UNSTABLE_CV", "latency_stats"]

# trtexec warns above this coefficient of variation of GPU compute time.
UNSTABLE_CV = 0.01


@dataclass(frozen=True)
class BenchmarkReport:
    iterations: int
    throughput_qps: float
    latency_ms: Mapping[str, float]  # end-to-end infer() wall time: copies in, compute, copies out
    gpu_compute_ms: Mapping[str, float]  # between CUDA events around execute_async_v3
    cv_gpu_compute: float
    total_wall_s: float

    @classmethod
    def from_samples(cls, latency_ms: Sequence[float], gpu_compute_ms: Sequence[float],
                     total_wall_s: float) -> BenchmarkReport:
        gpu = latency_stats(gpu_compute_ms)
        return cls(iterations=len(latency_ms), throughput_qps=len(latency_ms) / total_wall_s if total_wall_s else 0.0,
                   latency_ms=latency_stats(latency_ms), gpu_compute_ms=gpu, cv_gpu_compute=gpu["cv"],
                   total_wall_s=total_wall_s)

    @property
    def unstable(self) -> bool:
        return self.cv_gpu_compute > UNSTABLE_CV

    def summary(self) -> str:
        lines = [
            "=== Performance summary ===",
            f"Throughput: {self.throughput_qps:.4g} qps",
            f"Latency: {_spread(self.latency_ms)}",
            f"GPU Compute Time: {_spread(self.gpu_compute_ms)}",
            f"Total Host Walltime: {self.total_wall_s:.4g} s",
            f"Total GPU Compute Time: {self.gpu_compute_ms['mean'] * self.iterations / 1000:.4g} s",
            f"Iterations: {self.iterations}",
        ]
        if self.unstable:
            lines += [
                f"[W] * GPU compute time is unstable, with coefficient of variance = {self.cv_gpu_compute * 100:.3g}%.",
                "[W]   Lock the clocks (sudo jetson_clocks on a Jetson; nvidia-smi --lock-gpu-clocks elsewhere) "
                "to make it stable.",
            ]
        return "\n".join(lines)


def _spread(stats: Mapping[str, float]) -> str:
    return (f"min = {stats['min']:.5g} ms, max = {stats['max']:.5g} ms, mean = {stats['mean']:.5g} ms, "
            f"median = {stats['median']:.5g} ms, percentile(90%) = {stats['p90']:.5g} ms, "
            f"percentile(95%) = {stats['p95']:.5g} ms, percentile(99%) = {stats['p99']:.5g} ms")
