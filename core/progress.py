"""Progress for long work, readable on a terminal and in a log, so a slow search never looks like a hang.

On a terminal the running work is one live line, rewritten in place every second with the time spent, and cleared
before the next real message. Where the output is a log (a file, a pipe, journald), the same status is repeated
as a line of its own only every :data:`LOG_INTERVAL_S` seconds: a line every 3 s filled logs with 60 copies of
"ModelOpt calibrating" for one step.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

Progress = Callable[[str], None]
# In a log: long enough not to bury the results, short enough that a hang still shows within half a minute.
LOG_INTERVAL_S = 30.0
LIVE_INTERVAL_S = 1.0
_CLEAR = "\r\x1b[K"  # back to the line's start, erase to its end


def live_terminal() -> TextIO | None:
    """stderr when it is an interactive terminal that understands the erase sequence, else None (a log)."""
    stream = sys.stderr
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):
        interactive = False
    return stream if interactive and os.environ.get("TERM", "") != "dumb" else None


class Heartbeat:
    """Forwards messages to ``progress`` and, while the ``with`` block runs, shows the current status (with the
    time spent): as a live line on ``live`` (default: stderr when it is a terminal), else as a ``progress`` line
    whenever ``interval`` seconds (default :data:`LOG_INTERVAL_S`) passed without a message."""

    _AUTO = object()

    def __init__(self, progress: Progress, *, interval: float | None = None, status: str = "working",
                 live: TextIO | None | object = _AUTO) -> None:
        self.progress = progress
        self.live = live_terminal() if live is Heartbeat._AUTO else live
        self.interval = interval if interval is not None else (LIVE_INTERVAL_S if self.live else LOG_INTERVAL_S)
        self._status = status
        self._shown = False  # a live line is on the screen
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
        with self._lock:
            self._clear()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def say(self, message: str) -> None:
        with self._lock:
            self._clear()
            self._last = time.monotonic()
            self.progress(message)

    def status(self, status: str) -> None:
        """What to show if nothing else is said for a while."""
        with self._lock:
            self._status = status

    def _clear(self) -> None:
        if self._shown:
            self.live.write(_CLEAR)
            self.live.flush()
            self._shown = False

    def _beat(self) -> None:
        while not self._stop.wait(min(1.0, self.interval / 2)):
            with self._lock:
                now = time.monotonic()
                if now - self._last < self.interval:
                    continue
                text = f"  ... {self._status} ({now - self._started:.0f} s)"
                if self.live is not None:
                    # Kept to the terminal's width: a wrapped live line cannot be erased in place.
                    width = shutil.get_terminal_size((100, 20)).columns - 1
                    self.live.write(_CLEAR + text[:width])
                    self.live.flush()
                    self._shown = True
                else:
                    self._last = now
                    self.progress(text)
