"""Latency statistics and the benchmark report, shaped like trtexec's performance summary (no GPU needed)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# trtexec warns above this coefficient of variation of GPU compute time.
UNSTABLE_CV = 0.01


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of sorted samples, interpolated linearly (numpy's default method)."""
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_stats(samples_ms: Sequence[float]) -> dict[str, float]:
    """count, min, max, mean, median, p90, p95, p99, std (population) and cv (std / mean) of the samples."""
    if not samples_ms:
        raise ValueError("latency_stats needs at least one sample")
    ordered = sorted(float(s) for s in samples_ms)
    count = len(ordered)
    mean = math.fsum(ordered) / count
    std = math.sqrt(math.fsum((s - mean) ** 2 for s in ordered) / count)
    stats = {"count": float(count), "min": ordered[0], "max": ordered[-1], "mean": mean,
             "median": percentile(ordered, 50)}
    for q in (90, 95, 99):
        stats[f"p{q}"] = percentile(ordered, q)
    stats["std"] = std
    stats["cv"] = std / mean if mean > 0 else 0.0
    return stats


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
