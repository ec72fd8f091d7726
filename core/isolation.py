"""Run calls into crash-prone native libraries (onnxruntime, onnxsim) in a child process.

A segfault or abort in such a library must not take the tool down: the child dies, the parent gets
:class:`ChildCrashedError` naming the signal and what the child wrote last, and decides what to do (repair,
fall back, or report one typed line). A :class:`Worker` keeps one child for many calls, so sessions built in it
are reused; calls are ``"package.module:function"`` strings with picklable arguments and results.

The child ignores SIGINT (the parent decides how to stop), dies with its parent (PR_SET_PDEATHSIG on Linux, and
end-of-file on its command pipe elsewhere), and writes its standard output and error to a file whose tail goes
into the crash report, so nothing it prints mixes with the tool's own output.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from typing import Any

from orinkit.core.errors import ChildCrashedError

_TAIL = 2000


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-returncode).name
        return f"signal {-returncode}"
    return f"exit status {returncode}"


class Worker:
    """One child process that runs calls for the parent until :meth:`close` (or the ``with`` block ends).

    ``what`` names the work for error messages ("onnxruntime running the FP16 emulation").
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._log = tempfile.TemporaryFile(prefix="orinkit-child-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "orinkit.core.isolation", str(to_child_r), str(from_child_w)],
                pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=self._log, close_fds=True,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._commands = os.fdopen(to_child_w, "wb")
        self._replies = os.fdopen(from_child_r, "rb")

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        """Run ``target(*args, **kwargs)`` in the child and return its result; its exception is raised here."""
        if self._process.poll() is not None:
            raise self._crashed()
        try:
            pickle.dump((target, args, kwargs), self._commands, protocol=pickle.HIGHEST_PROTOCOL)
            self._commands.flush()
            status, value = pickle.load(self._replies)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError):
            self._process.wait()
            raise self._crashed() from None
        if status == "error":
            raise value
        return value

    def _crashed(self) -> ChildCrashedError:
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - _TAIL))
        tail = self._log.read().decode("utf-8", "replace").strip()
        return ChildCrashedError(self.what, _signal_name(self._process.returncode), tail)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._commands.close()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        with contextlib.suppress(OSError):
            self._replies.close()
        self._log.close()


def run_isolated(what: str, target: str, *args: Any, **kwargs: Any) -> Any:
    """One call in a fresh child process (see :class:`Worker`)."""
    with Worker(what) as worker:
        return worker.call(target, *args, **kwargs)


def _resolve(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _serve(commands_fd: int, replies_fd: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    with os.fdopen(commands_fd, "rb") as commands, os.fdopen(replies_fd, "wb") as replies:
        while True:
            try:
                target, args, kwargs = pickle.load(commands)
            except EOFError:
                return
            try:
                reply = ("ok", _resolve(target)(*args, **kwargs))
            except Exception as exc:
                reply = ("error", _portable(exc))
            pickle.dump(reply, replies, protocol=pickle.HIGHEST_PROTOCOL)
            replies.flush()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
