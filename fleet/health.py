"""What a device says about its health in each report: gate latency and Triton's request counters.

Keys of :attr:`DeviceReport.health` (floats):

* ``<model>:p99_ms``: p99 of N golden requests to the serving version (models with a gate);
* ``<model>:requests`` / ``<model>:failures``: successful / failed requests since the previous report, from
  Triton's statistics (every version of the model; a version loaded in between counts from zero);
* ``p99_ms``, ``requests``, ``failures``: the same over every managed model (largest p99, summed counts);
* ``window_s``: seconds the counts cover; ``mem_available_mb``: MemAvailable now.

Rollouts compare these between devices on the new version and devices still on the old one. Python 3.10.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from orinkit.fleet.gate import GATE_REQUESTS, Gate, run_gate


class HealthProbe:
    """Measures one server; keeps the previous statistics snapshot so that each report holds deltas."""

    def __init__(self, server: str, *, requests: int = GATE_REQUESTS, meminfo_root: Path = Path("/"),
                 timeout_s: float = 30.0) -> None:
        self.server, self.requests, self.meminfo_root, self.timeout_s = server, requests, meminfo_root, timeout_s
        self._before: dict = {}
        self._at: float | None = None

    def measure(self, serving: Mapping[str, tuple[int, Gate | None]]) -> dict[str, float]:
        """``serving``: model → (its serving version, that version's gate or None)."""
        from orinkit.client.statistics import delta, total
        from orinkit.jetson.memory import read_memory
        from orinkit.repo.errors import RepoError
        from orinkit.repo.server_api import RepositoryAPI

        health: dict[str, float] = {}
        p99s: list[float] = []
        for model, (version, gate) in sorted(serving.items()):
            if gate is None:
                continue
            result = run_gate(self.server, model, version, gate, requests=self.requests, timeout_s=self.timeout_s)
            if result.p99_ms is not None:
                health[f"{model}:p99_ms"] = round(result.p99_ms, 3)
                p99s.append(result.p99_ms)
        try:
            with RepositoryAPI(self.server, timeout_s=self.timeout_s) as api:
                now = api.statistics()
        except RepoError:
            now = None  # the server does not answer: no counts this time, the next report covers the gap
        moment = time.monotonic()
        if now is not None:
            changes = delta(self._before, now)
            requests = failures = 0
            for model in serving:
                counts = total(changes, model)
                health[f"{model}:requests"] = float(counts.success_count)
                health[f"{model}:failures"] = float(counts.failure_count)
                requests += counts.success_count
                failures += counts.failure_count
            health.update(requests=float(requests), failures=float(failures))
            if self._at is not None:
                health["window_s"] = round(moment - self._at, 3)
            self._before, self._at = now, moment
        if p99s:
            health["p99_ms"] = round(max(p99s), 3)
        memory = read_memory(self.meminfo_root)
        if memory is not None and memory.available_kb is not None:
            health["mem_available_mb"] = round(memory.available_kb / 1024.0, 1)
        return health
