"""What a stream reports: frames read, answered, dropped and failed per source, answers per second, and
capture→answer latency percentiles over a rolling window (so they describe now, not the run's first minute)."""

from __future__ import annotations

import collections
import threading
import time

from orinkit.core.stats import percentile

WINDOW_S = 10.0
WINDOW_MAX = 2000


class Rolling:
    """Samples of the last ``window_s`` seconds (at most ``limit``), and every sample for the run's totals."""

    def __init__(self, window_s: float = WINDOW_S, limit: int = WINDOW_MAX) -> None:
        self.window_s = window_s
        self._recent: collections.deque[tuple[float, float]] = collections.deque(maxlen=limit)
        self.all: list[float] = []

    def add(self, at: float, value: float) -> None:
        self._recent.append((at, value))
        self.all.append(value)

    def recent(self, now: float) -> list[float]:
        while self._recent and self._recent[0][0] < now - self.window_s:
            self._recent.popleft()
        return [value for _, value in self._recent]

    def count_since(self, since: float) -> int:
        return sum(1 for at, _ in self._recent if at >= since)


def percentiles_ms(samples_s: list[float]) -> dict[str, float | None]:
    ordered = sorted(samples_s)
    return {f"p{q}": (round(percentile(ordered, q) * 1000, 1) if ordered else None) for q in (50, 95, 99)}


class StreamStats:
    """Thread-safe counters of one pipeline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        self.latency: dict[str, Rolling] = {}
        self.answered: dict[str, int] = collections.Counter()
        self.failed: dict[str, int] = collections.Counter()
        self.everything = Rolling()

    def answer(self, source: str, answered_at: float, latency_s: float) -> None:
        with self._lock:
            self.latency.setdefault(source, Rolling()).add(answered_at, latency_s)
            self.everything.add(answered_at, latency_s)
            self.answered[source] += 1

    def failure(self, source: str) -> None:
        with self._lock:
            self.failed[source] += 1

    def snapshot(self, readers, now: float | None = None) -> dict:
        """Totals and the rolling window, overall and per source (``readers``: the pipeline's Reader objects)."""
        now = now or time.time()
        with self._lock:
            elapsed = max(1e-9, now - self.started)
            window = min(WINDOW_S, elapsed)
            sources = {}
            for reader in readers:
                rolling = self.latency.get(reader.name)
                sources[reader.name] = {
                    "state": reader.state, "read": reader.read, "answered": self.answered[reader.name],
                    "dropped": reader.dropped, "failed": self.failed[reader.name], "reconnects": reader.reconnects,
                    "fps": round((rolling.count_since(now - window) if rolling else 0) / window, 2),
                    "latency_ms": percentiles_ms(rolling.recent(now) if rolling else []),
                }
            total = sum(self.answered.values())
            return {
                "elapsed_s": round(elapsed, 2),
                "read": sum(r.read for r in readers), "answered": total,
                "dropped": sum(r.dropped for r in readers), "failed": sum(self.failed.values()),
                "fps": round(self.everything.count_since(now - window) / window, 2),
                "fps_overall": round(total / elapsed, 2),
                "latency_ms": percentiles_ms(self.everything.recent(now)),
                "latency_ms_overall": percentiles_ms(self.everything.all),
                "sources": sources,
            }
