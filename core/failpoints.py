"""Named points where a test can stop the process for real, to prove that an interruption there is harmless.

Set ``ORINKIT_FAILPOINT=<name>`` (or ``<name>:<argument>``) and the process sends itself a signal on reaching
that point: SIGKILL by default (no cleanup, no ``finally``: a power cut or an OOM kill), SIGSEGV where a point
stands for a crash inside a native library. A point may look at the argument to decide whether it fires.
Unset, a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal as signals
from collections.abc import Callable

ENV = "ORINKIT_FAILPOINT"


def reach(name: str, *, signal: int = signals.SIGKILL, when: Callable[[str], bool] = lambda argument: True) -> None:
    value = os.environ.get(ENV)
    if not value:
        return
    point, _, argument = value.partition(":")
    if point == name and when(argument):
        if signal != signals.SIGKILL:
            signals.signal(signal, signals.SIG_DFL)  # Python's handlers (faulthandler) must not soften a crash
        os.kill(os.getpid(), signal)


def reach_later(name: str, delay_s: float) -> None:
    """Like :func:`reach`, ``delay_s`` seconds from now, from another thread: for an interruption in the middle
    of a blocking call (a model load the server is still working on)."""
    value = os.environ.get(ENV)
    if not value or value.partition(":")[0] != name:
        return
    import threading
    import time

    def fire() -> None:
        time.sleep(delay_s)
        reach(name)

    threading.Thread(target=fire, name=f"failpoint-{name}", daemon=True).start()
