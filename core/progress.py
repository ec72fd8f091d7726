"""Progress for long work: a line at least every few seconds, so a slow search never looks like a hang."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Progress = Callable[[str], None]


class Heartbeat:
    """Forwards messages to ``progress`` and, while the ``with`` block runs, repeats the current status (with
    the time spent) whenever ``interval`` seconds passed without a message."""

    def __init__(self, progress: Progress, *, interval: float = 5.0, status: str = "working") -> None:
        self.progress = progress
        self.interval = interval
        self._status = status
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._started = self._last = time.monotonic()
        self._thread = threading.Thread(target=self._beat, name="orinkit-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._started = self._last = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def say(self, message: str) -> None:
        with self._lock:
            self._last = time.monotonic()
            self.progress(message)

    def status(self, status: str) -> None:
        """What to repeat if nothing else is said for a while."""
        with self._lock:
            self._status = status

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.interval / 2)):
            with self._lock:
                now = time.monotonic()
                if now - self._last >= self.interval:
                    self._last = now
                    self.progress(f"  ... {self._status} ({now - self._started:.0f} s)")
