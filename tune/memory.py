"""What a configuration costs in memory, sampled while it serves.

Here: the proportional set size (PSS) of the server's whole process group, read from ``/proc`` — the Python
backend runs one stub process per instance, and PSS counts the pages they share with the server once, where
summing RSS would count them per process. On an Orin the GPU shares the board's memory, so the board's used
memory (MemTotal - MemAvailable) is what a budget must hold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from orinkit.core.processes import live_group_members

MemoryReader = Callable[[], "float | None"]  # megabytes (MiB), or None when it cannot be read


def _pss_kb(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        try:  # kernels before 4.14 have no smaps_rollup: RSS then, which counts shared pages per process
            text = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("VmRSS:")), None)
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith("Pss:")), None)


def group_memory(pgid: int) -> MemoryReader:
    """The PSS of every live process in group ``pgid`` (the server leads its own), in MiB."""

    def read() -> float | None:
        sizes = [size for size in (_pss_kb(pid) for pid in live_group_members(pgid)) if size is not None]
        return sum(sizes) / 1024 if sizes else None

    return read


def board_memory(root: Path = Path("/")) -> MemoryReader:
    """The board's used memory (what CPU and GPU share on a Jetson), in MiB."""
    from orinkit.jetson.memory import read_memory

    def read() -> float | None:
        memory = read_memory(root)
        if memory is None or memory.available_kb is None:
            return None
        return (memory.total_kb - memory.available_kb) / 1024

    return read


class PeakSampler:
    """The largest reading of ``reader`` while the ``with`` block runs (a reading every ``interval`` seconds,
    one at the start and one at the end)."""

    def __init__(self, reader: MemoryReader | None, interval: float = 0.25) -> None:
        self.reader, self.interval = reader, interval
        self.peak: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orinkit-tune-memory", daemon=True)

    def _sample(self) -> None:
        value = self.reader() if self.reader else None
        if value is not None and (self.peak is None or value > self.peak):
            self.peak = value

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> PeakSampler:
        if self.reader is not None:
            self._sample()
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        if self.reader is not None:
            self._stop.set()
            self._thread.join()
            self._sample()
