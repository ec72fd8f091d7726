"""The result of a sweep: a table for the terminal, a PNG plot, and the JSON report they are made from."""

from __future__ import annotations

import json
import os
from pathlib import Path

from orinkit.core.files import atomic_write_bytes, atomic_write_text

LEGEND_ROWS = 12  # the plot names this many configurations (the fastest) and the pick


def table(report: dict) -> str:
    """One row per configuration measured, best throughput first; the pick marked with ``*``, configurations
    over a budget with ``-``."""
    rows = sorted(report["measurements"], key=lambda m: -(m["best"] or {}).get("throughput", -1.0))
    pick = report.get("pick", {}) or {}
    lines = [f"{'':2}{'configuration':34} {'conc':>4} {'infer/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'MB':>7}"]
    for m in rows:
        level = m["best"] or _top(m)
        mark = "*" if m["label"] == pick.get("label") else (" " if m["feasible"] else "-")
        memory = "-" if m["memory_mb"] is None else f"{m['memory_mb']:.0f}"
        if m["error"]:
            lines.append(f"{mark:2}{m['label']:34} not loaded: {m['error'][:60]}")
        elif level is None:
            lines.append(f"{mark:2}{m['label']:34} every request failed")
        else:
            lines.append(f"{mark:2}{m['label']:34} {level['concurrency']:>4} {level['throughput']:9.1f} "
                         f"{_ms(level['p50_ms']):>8} {_ms(level['p99_ms']):>8} {memory:>7}")
    return "\n".join(lines)


def _ms(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _top(measurement: dict) -> dict | None:
    ok = [level for level in measurement["levels"] if level["requests"] and not level["errors"]]
    return max(ok, key=lambda level: level["throughput"], default=None)


def write_json(report: dict, path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    atomic_write_text(path, json.dumps(report, indent=2) + "\n")
    return path


def plot(report: dict, path: str | os.PathLike[str]) -> Path:
    """Throughput against p99 latency: each configuration's levels as one line (rising concurrency), the latency
    budget as a vertical line, the pick as a star."""
    import io

    from orinkit.core.optional import require

    matplotlib = require("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 5.5), dpi=110)
    pick = (report.get("pick") or {}).get("label")
    ranked = sorted(report["measurements"], key=lambda m: -((_top(m) or {}).get("throughput", 0.0)))
    named = {m["label"] for m in ranked[:LEGEND_ROWS]} | {pick}
    for m in ranked:
        points = [(level["p99_ms"], level["throughput"]) for level in m["levels"]
                  if level["requests"] and not level["errors"]]
        if not points:
            continue
        latency, throughput = zip(*points)
        axes.plot(latency, throughput, marker=".", linewidth=2.2 if m["label"] == pick else 0.9,
                  linestyle="-" if m["feasible"] else ":", label=m["label"] if m["label"] in named else None)
    chosen = report.get("pick")
    if chosen:
        axes.plot([chosen["best"]["p99_ms"]], [chosen["best"]["throughput"]], marker="*", markersize=16,
                  color="crimson", linestyle="none", label=f"pick: {chosen['label']}")
    budget = report["budgets"].get("latency_ms")
    if budget is not None:
        axes.axvline(budget, color="grey", linestyle="--", linewidth=1, label=f"p99 budget {budget:g} ms")
    axes.set_xlabel("p99 latency (ms)")
    axes.set_ylabel("throughput (inferences/s)")
    axes.set_title(f"edge-tune {report['model']}: {len(report['measurements'])} configurations "
                   f"({report['search']})")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, title="dotted: over a budget",
                title_fontsize=7)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    path = Path(path)
    atomic_write_bytes(path, buffer.getvalue())
    return path
