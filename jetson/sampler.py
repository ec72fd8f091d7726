"""Measure power while a block of code runs (a benchmark) by running tegrastats beside it.

>>> with TegrastatsSampler(interval_ms=100) as power:  # doctest: +SKIP
...     run_benchmark(requests=1000)
>>> power.summary().energy_per_inference_j(1000)  # doctest: +SKIP

tegrastats runs in its own process group, so stopping it also stops anything it started; a reader thread parses
its lines as they come. Energy is the mean module input power over the samples times the block's wall time: a
tegrastats sample is an instantaneous reading, so the mean stands for the whole interval.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orinkit.core.processes import live_group_members
from orinkit.jetson.errors import NotAJetsonError, SamplerError, TegrastatsError
from orinkit.jetson.tegrastats import Sample, parse_line


@dataclass(frozen=True)
class PowerSummary:
    samples: int
    skipped: int
    wall_time_s: float
    rails_mw: dict[str, float] = field(default_factory=dict)  # mean current reading per rail
    input_power_mw: float | None = None  # mean module input (VDD_IN, or the AGX Orin module rails)

    @property
    def energy_j(self) -> float | None:
        if self.input_power_mw is None:
            return None
        return self.input_power_mw / 1000.0 * self.wall_time_s

    def energy_per_inference_j(self, count: int) -> float | None:
        if count <= 0:
            raise SamplerError(f"count must be positive, not {count}", hint="pass the number of inferences run")
        energy = self.energy_j
        return None if energy is None else energy / count


def summarize(samples: Sequence[Sample], wall_time_s: float, skipped: int = 0) -> PowerSummary:
    totals: dict[str, list[int]] = {}
    for sample in samples:
        for rail in sample.rails:
            totals.setdefault(rail.name, []).append(rail.current_mw)
    inputs = [s.input_power_mw for s in samples if s.input_power_mw is not None]
    return PowerSummary(
        samples=len(samples),
        skipped=skipped,
        wall_time_s=wall_time_s,
        rails_mw={name: sum(values) / len(values) for name, values in totals.items()},
        input_power_mw=sum(inputs) / len(inputs) if inputs else None,
    )


class TegrastatsSampler:
    """Run ``command`` (tegrastats by default) for the duration of a ``with`` block and collect its samples.

    ``stop_timeout_s`` is how long tegrastats gets to exit after SIGTERM before its group is killed. With
    ``on_sample`` each sample is handed on as it arrives instead of kept (a monitor runs for days: a list of every
    sample would grow for good).
    """

    def __init__(self, interval_ms: int = 100, command: Sequence[str] | None = None, *,
                 stop_timeout_s: float = 3.0, on_sample: Callable[[Sample], None] | None = None) -> None:
        self.command = tuple(command) if command else ("tegrastats", "--interval", str(interval_ms))
        self.stop_timeout_s = stop_timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._samples: list[Sample] = []
        self._skipped = 0
        self._started: float | None = None
        self._stopped: float | None = None
        self._stderr = None
        self._on_sample = on_sample
        self.last_sample_at: float | None = None  # time.monotonic() of the last usable line

    @property
    def pgid(self) -> int | None:
        """The process group tegrastats runs in (its own pid: it leads a new session)."""
        return self._process.pid if self._process else None

    @property
    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    @property
    def skipped(self) -> int:
        with self._lock:
            return self._skipped

    def _find_program(self) -> None:
        program = self.command[0]
        found = shutil.which(program) if os.sep not in program else (program if os.access(program, os.X_OK) else None)
        if found is None:
            where = "" if os.sep in program else " on PATH"
            raise NotAJetsonError(f"not a Jetson: {program} was not found{where}",
                                  hint="tegrastats comes with JetPack (L4T) on a Jetson; power cannot be "
                                       "measured elsewhere")

    def start(self) -> TegrastatsSampler:
        if self._process is not None:
            raise SamplerError("the tegrastats sampler is already running")
        self._find_program()
        # A file, not a pipe: nobody reads stderr while tegrastats runs, and a full pipe would block it.
        self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        try:
            self._process = subprocess.Popen(
                list(self.command), stdout=subprocess.PIPE, stderr=self._stderr, text=True, errors="replace",
                bufsize=1, start_new_session=True,
            )
        except OSError as exc:
            raise NotAJetsonError(f"not a Jetson: cannot run {self.command[0]}: {exc}") from exc
        self._started = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="tegrastats-reader", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            if not line.strip():
                continue
            try:
                sample = parse_line(line)
            except TegrastatsError:
                with self._lock:
                    self._skipped += 1
                continue
            self.last_sample_at = time.monotonic()
            if self._on_sample is not None:
                self._on_sample(sample)
                continue
            with self._lock:
                self._samples.append(sample)

    def stop(self) -> None:
        process = self._process
        if process is None or self._stopped is not None:
            return
        self._stopped = time.monotonic()
        if process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                process.wait()
        if live_group_members(process.pid):  # whatever tegrastats started goes with it
            self._signal_group(signal.SIGKILL)
        if self._reader is not None:
            self._reader.join(timeout=self.stop_timeout_s)
        if process.stdout is not None:
            process.stdout.close()

    def _signal_group(self, signum: int) -> None:
        try:
            os.killpg(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    @property
    def stderr(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read()

    @property
    def wall_time_s(self) -> float:
        if self._started is None:
            return 0.0
        end = self._stopped if self._stopped is not None else time.monotonic()
        return end - self._started

    def summary(self) -> PowerSummary:
        """Power over the block. Raises :class:`SamplerError` when tegrastats gave no sample at all (it died at
        once, or the block was shorter than one interval)."""
        samples = self.samples
        if not samples:
            detail = f": {self.stderr.strip().splitlines()[-1]}" if self.stderr.strip() else ""
            raise SamplerError(f"tegrastats gave no usable sample in {self.wall_time_s:.2f} s{detail}",
                               hint="run the measured block for longer than the sampling interval")
        return summarize(samples, self.wall_time_s, self.skipped)

    def __enter__(self) -> TegrastatsSampler:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
