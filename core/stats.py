"""Latency statistics shared by every timing orinkit reports (engine benchmarks, edge-bench, the benchmarks)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(ordered: Sequence[float], q: float, *, nearest: bool = False) -> float:
    """The ``q``-th percentile of sorted samples, interpolated linearly (numpy's default method), or with
    ``nearest`` the nearest-rank sample (with 20 samples the p99 is the slowest one, not a blend)."""
    if not ordered:
        raise ValueError("percentile of no samples")
    if nearest:
        return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100.0 * len(ordered)) - 1))])
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return float(ordered[low] + (ordered[high] - ordered[low]) * (position - low))


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
