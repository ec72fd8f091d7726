"""Start a child process that dies with this one, even when this one is SIGKILLed and runs no cleanup.

On Linux the child asks the kernel for a signal when its parent dies (PR_SET_PDEATHSIG). The kernel sends it when
the *thread* that forked exits, not the process: a server started from a short-lived thread would be stopped when
that thread ends. So children are forked from the main thread, which lives as long as the process, or else from one
daemon thread kept for the purpose.

The request is made by util-linux's ``setpriv --pdeathsig``, which then execs the command (same pid), not by a
``preexec_fn``: a preexec_fn makes subprocess fork() instead of vfork(), and fork() runs gRPC's fork handlers. In a
process with busy gRPC channels (a client streaming video while it starts a server) 51 of 300 children died that
way before their exec (SIGABRT, "Epoll1Poller ... epoll_wait error: Bad file descriptor") and the parent's calls
stalled past their deadline; with setpriv, none. Where setpriv is missing, the preexec_fn is the fallback.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

_PR_SET_PDEATHSIG = 1
_requests: queue.SimpleQueue | None = None
_lock = threading.Lock()


def _prctl():
    # Looked up before forking: in the child, between fork and exec, only the call itself should run.
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _find_setpriv() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:  # util-linux 2.33 added --pdeathsig (Debian 10, Ubuntu 20.04, JetPack 5 and 6 have it)
        text = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "--pdeathsig" in text else None


_SETPRIV = _find_setpriv()


def _die_with(parent: int, sig: signal.Signals):
    def arrange() -> None:
        _PRCTL(_PR_SET_PDEATHSIG, int(sig))
        if os.getppid() != parent:  # the parent died before the request took effect: nobody will signal us
            os.kill(os.getpid(), sig)

    return arrange


def _serve(requests: queue.SimpleQueue) -> None:
    while True:
        future, argv, kwargs = requests.get()
        try:
            future.set_result(subprocess.Popen(argv, **kwargs))
        except BaseException as exc:  # handed to the caller, who raises it
            future.set_exception(exc)


def _spawner() -> queue.SimpleQueue:
    global _requests
    with _lock:
        if _requests is None:
            _requests = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(_requests,), name="orinkit-spawner", daemon=True).start()
        return _requests


def popen_tied(argv: Sequence[str], *, death_signal: signal.Signals = signal.SIGTERM,
               **kwargs: Any) -> subprocess.Popen:
    """:class:`subprocess.Popen` whose child receives ``death_signal`` when this process dies (Linux; elsewhere a
    plain Popen)."""
    if _SETPRIV is not None and "preexec_fn" not in kwargs:
        argv = [_SETPRIV, "--pdeathsig", signal.Signals(death_signal).name, "--", *argv]
    elif _PRCTL is not None:
        kwargs["preexec_fn"] = _die_with(os.getpid(), death_signal)
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(list(argv), **kwargs)
    future: concurrent.futures.Future = concurrent.futures.Future()
    _spawner().put((future, list(argv), kwargs))
    return future.result()
