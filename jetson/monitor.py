"""Sample the board continuously and keep the last minutes, for live charts.

>>> with BoardMonitor(interval_s=1.0, history_s=300) as board:  # doctest: +SKIP
...     poll = board.snapshot()                      # everything kept
...     poll = board.snapshot(since=poll["latest"]["t"])  # only what came since

On a Jetson the readings come from tegrastats (power per rail, temperatures, GPU and CPU load, memory), run by the
sampler's process handling. Elsewhere, or once tegrastats has died or stalled, they come from /proc and /sys
(:mod:`orinkit.jetson.hwmon`); ``snapshot()["note"]`` then says why. History is a deque of
``history_s / interval_s`` samples, so memory stays bounded however long the monitor runs.
"""

from __future__ import annotations

import math
import shutil
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from orinkit.jetson import hwmon
from orinkit.jetson.errors import MonitorError, NotAJetsonError
from orinkit.jetson.memory import read_memory
from orinkit.jetson.sampler import TegrastatsSampler
from orinkit.jetson.tegrastats import Sample, module_input_mw


@dataclass(frozen=True)
class Reading:
    """One point of every chart. None (and an absent rail or sensor) means it could not be read."""

    t: float  # unix time when it was read (tegrastats' own timestamp is local time without a zone)
    rails_mw: dict[str, float] = field(default_factory=dict)
    total_mw: float | None = None
    temps_c: dict[str, float] = field(default_factory=dict)
    cpu_load_pct: float | None = None
    gpu_load_pct: float | None = None
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None

    def to_dict(self) -> dict:
        power = dict(self.rails_mw) if self.total_mw is None else {"total": self.total_mw, **self.rails_mw}
        return {"t": self.t, "power_mw": power, "temps_c": dict(self.temps_c), "cpu_load_pct": self.cpu_load_pct,
                "gpu_load_pct": self.gpu_load_pct, "mem_used_mb": self.mem_used_mb,
                "mem_total_mb": self.mem_total_mb}


def _now() -> float:
    return round(time.time(), 3)


def reading_from_sample(sample: Sample, t: float) -> Reading:
    loads = [c.load_percent for c in sample.cpus if c.online and c.load_percent is not None]
    return Reading(
        t=t,
        rails_mw={r.name: r.current_mw for r in sample.rails},
        total_mw=sample.input_power_mw,
        temps_c={s.name: s.celsius for s in sample.temperatures},
        cpu_load_pct=round(sum(loads) / len(loads), 1) if loads else None,  # the mean over the online cores
        gpu_load_pct=sample.gr3d.load_percent if sample.gr3d else None,  # Thor's tegrastats gives no GPU load
        mem_used_mb=sample.ram_used_mb,
        mem_total_mb=sample.ram_total_mb,
    )


def read_proc(root: Path, before: hwmon.CpuTimes | None, after: hwmon.CpuTimes | None) -> Reading:
    rails = hwmon.read_power(root)
    memory = read_memory(root)
    used_kb = memory.total_kb - memory.available_kb if memory and memory.available_kb is not None else None
    return Reading(
        t=_now(),
        rails_mw=rails,
        total_mw=_tenth(module_input_mw(rails)),
        temps_c=hwmon.read_temperatures(root),
        cpu_load_pct=hwmon.cpu_load_pct(before, after),
        gpu_load_pct=hwmon.read_gpu_load(root),
        mem_used_mb=round(used_kb / 1024, 1) if used_kb is not None else None,
        mem_total_mb=round(memory.total_kb / 1024, 1) if memory else None,
    )


class _StreamingSampler(TegrastatsSampler):
    """The sampler (own session; SIGTERM, then SIGKILL of the whole group; samples handed on, not kept) that also
    says when tegrastats is no use any more."""

    def failure(self, stall_s: float) -> str | None:
        """Why tegrastats is no use any more (it exited, or sent nothing usable for ``stall_s``), else None."""
        # Its exit, or the end of its output. Not the end of output alone: a child it left behind may hold the pipe.
        if self._process.poll() is not None or (self._reader is not None and not self._reader.is_alive()):
            self.stop()
            return f"tegrastats {_ended(self._process.returncode)}" + self._last_words()
        since = self.last_sample_at if self.last_sample_at is not None else self._started
        if time.monotonic() - since > stall_s:
            self.stop()
            return f"tegrastats sent no usable line for {stall_s:g} s ({self.skipped} unparsable)" + self._last_words()
        return None

    def _last_words(self) -> str:
        said = self.stderr.strip().splitlines()
        return f": {said[-1]}" if said else ""


def _tenth(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _ended(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class BoardMonitor:
    """Sample every ``interval_s`` and keep ``history_s`` of samples. ``tegrastats`` is the program to look for on
    PATH (None: never use it); ``stall_s`` is how long tegrastats may go without a usable line before the monitor
    gives up on it (default: 10 intervals, at least 5 s)."""

    def __init__(self, interval_s: float = 1.0, history_s: float = 300, root: Path = Path("/"), *,
                 tegrastats: str | None = "tegrastats", stall_s: float | None = None) -> None:
        if not interval_s > 0 or not history_s >= interval_s:
            raise MonitorError(f"cannot keep {history_s} s of samples every {interval_s} s",
                               hint="use interval_s > 0 and history_s >= interval_s")
        self.interval_s = float(interval_s)
        self.history_s = float(history_s)
        self.root = Path(root)
        self.stall_s = stall_s if stall_s is not None else max(10 * self.interval_s, 5.0)
        self._program = tegrastats
        self._history: deque[Reading] = deque(maxlen=math.ceil(self.history_s / self.interval_s - 1e-9))
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler: _StreamingSampler | None = None
        self._source = "proc"
        self._note: str | None = None

    def start(self) -> BoardMonitor:
        if self._thread is not None:
            raise MonitorError("the board monitor was already started", hint="use a new BoardMonitor")
        found = shutil.which(self._program) if self._program else None
        if found:
            sampler = _StreamingSampler(command=(found, "--interval", str(max(1, round(self.interval_s * 1000)))),
                                        on_sample=self._add_sample)
            try:
                self._sampler = sampler.start()
                self._source = "tegrastats"
            except NotAJetsonError as exc:  # found but could not be run: the board is still worth watching
                self._note = f"{exc}; reading /proc and /sys instead"
        self._thread = threading.Thread(target=self._run, name="board-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling; tegrastats and its process group are gone, and no thread is left, when this returns."""
        if self._thread is None:  # never started
            return
        self._stop.set()
        self._thread.join()
        if self._sampler is not None:
            self._sampler.stop()

    def __enter__(self) -> BoardMonitor:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _add_sample(self, sample: Sample) -> None:
        self._append(reading_from_sample(sample, _now()))

    def _append(self, reading: Reading) -> None:
        with self._lock:
            self._history.append(reading)

    def _run(self) -> None:
        try:
            if self._sampler is not None:
                reason = self._watch_tegrastats()
                if reason is None:  # stopped
                    return
                with self._lock:
                    self._source, self._note = "proc", f"{reason}; reading /proc and /sys instead"
            self._poll_proc()
        except Exception as exc:  # a thread's exception reaches nobody: leave it where the page will show it
            with self._lock:
                self._note = f"the monitor stopped: {exc!r}"

    def _ticks(self):
        """Every interval until stopped, on a fixed schedule so reading time does not add up as drift."""
        deadline = time.monotonic()
        while True:
            # After a stall (a suspend, a starved thread) skip the missed ticks rather than sample them in a burst.
            deadline = max(deadline + self.interval_s, time.monotonic())
            if self._stop.wait(max(0.0, deadline - time.monotonic())):
                return
            yield

    def _watch_tegrastats(self) -> str | None:
        for _ in self._ticks():
            reason = self._sampler.failure(self.stall_s)
            if reason is not None:
                return reason
        return None

    def _poll_proc(self) -> None:
        before = hwmon.read_cpu_times(self.root)  # the first load needs a snapshot one interval earlier
        for _ in self._ticks():
            after = hwmon.read_cpu_times(self.root)
            self._append(read_proc(self.root, before, after))
            before = after

    def snapshot(self, since: float | None = None) -> dict:
        """JSON-ready state; ``samples`` holds only those with ``t > since`` when ``since`` is given."""
        with self._lock:
            history = list(self._history)
            source, note = self._source, self._note
        rails = _names(r.rails_mw for r in history)
        return {
            "source": source,
            "note": note,
            "interval_s": self.interval_s,
            "history_s": self.history_s,
            "running": self._thread is not None and self._thread.is_alive(),
            "rails": (["total"] if any(r.total_mw is not None for r in history) else []) + rails,
            "sensors": _names(r.temps_c for r in history),
            "latest": history[-1].to_dict() if history else None,
            "samples": [r.to_dict() for r in history if since is None or r.t > since],
        }

    @property
    def rails(self) -> list[str]:
        """Power rails seen in the kept history, ``total`` first when the module's input power is known."""
        return self.snapshot(since=math.inf)["rails"]

    @property
    def sensors(self) -> list[str]:
        return self.snapshot(since=math.inf)["sensors"]


def _names(mappings) -> list[str]:
    """Keys in the order first seen: a chart's series keep their colours as samples come and go."""
    seen: dict[str, None] = {}
    for mapping in mappings:
        seen.update(dict.fromkeys(mapping))
    return list(seen)
