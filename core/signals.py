"""SIGTERM handled like Ctrl-C, so that every command cleans up (temporary folders, child processes) when a
service manager, a CI runner or ``kill`` stops it, instead of dying where it stands."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM arrives; a KeyboardInterrupt, so the same handlers catch it."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises :class:`Terminated`, which unwinds ``finally`` blocks and ``with`` exits."""

    def raise_terminated(signum, frame):
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, raise_terminated)
    except ValueError:  # not the main thread: signals cannot be handled here, leave them be
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
