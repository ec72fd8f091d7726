"""Run tritonserver as a child process group: start, wait for readiness, stop everything it started.

The server runs in a session of its own, so its Python-backend stubs (its children) share its process group
and stopping the group stops them too, whatever the terminal does with our own signals. It gets SIGTERM when the
process that started it dies (orinkit.server.spawn), so a SIGKILLed ``edge-serve run`` leaves no server holding
the ports; a port that is held anyway is reported with the process holding it.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import threading
import time
from typing import IO

from orinkit.core.processes import live_group_members
from orinkit.server.command import ServerCommand
from orinkit.server.errors import (
    InvalidServerOptionError,
    PortInUseError,
    ServerExitedError,
    ServerStartError,
    TritonNotFoundError,
)
from orinkit.server.health import is_ready
from orinkit.server.ports import port_holder, port_is_free
from orinkit.server.spawn import popen_tied

_PORT_IN_USE = re.compile(r"(?:Socket|address) '?([\w.:\[\]-]+:(\d+))'? (?:is )?already in use", re.I)
_STOP_GRACE_S = 10.0
SERVER_UMASK = 0o077
# Triton's error lines: "E1122 01:52:02.065261 7090 file.cc:724] \"message\"".
_ERROR_LINE = re.compile(r'^E\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]\s+"?(.*?)"?\s*$')
# Error lines a server without a GPU always prints; they never explain a failure.
_NOISE = ("CudaDriverHelper", "NVML", "DCGM", "chttp2_server")
# Triton logs multi-line messages (tracebacks) with escaped newlines; the first line is the reason.
_ESCAPED_NEWLINE = "\\n"


class _LogPump(threading.Thread):
    """Copies the server's output to a sink line by line and keeps the last lines for error messages."""

    def __init__(self, stream: IO[bytes], sink: IO[str] | None, keep: int = 400) -> None:
        super().__init__(name="tritonserver-log", daemon=True)
        self._stream = stream
        self._sink = sink
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)

    def run(self) -> None:
        for raw in iter(self._stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            self.lines.append(line)
            if self._sink is not None:
                try:
                    self._sink.write(line)
                    self._sink.flush()
                except (OSError, ValueError):
                    self._sink = None
        self._stream.close()


def port_in_use(message: str, port: int, option: str | None = None) -> PortInUseError:
    """The error for a taken port, naming the process that holds it where /proc shows it (a tritonserver left
    running by a killed parent, or one a systemd unit runs) and how to stop that one."""
    other = f"pass --{option} with a free port" if option else "choose another port"
    holder = port_holder(port)
    if holder is None:
        return PortInUseError(message, port=port, hint=f"stop what listens there or {other}")
    what = "tritonserver" if holder.is_tritonserver else "process"
    if holder.unit:
        return PortInUseError(f"{message} by {what} {holder.pid} of the systemd unit {holder.unit}", port=port,
                              hint=f"stop it with: sudo systemctl stop {holder.unit}; or {other}")
    left = " (left running: the process that started it is gone)" if holder.orphaned else ""
    return PortInUseError(f"{message} by {what} {holder.pid}{left}: {holder.describe()}", port=port,
                          hint=f"stop it with: kill {holder.pid}; or {other}")


class TritonProcess:
    """A tritonserver started from a :class:`ServerCommand`.

    ``log`` receives the server's output: a text stream (sys.stderr), or a file path it appends to and closes
    when the server stops; the last lines are always kept for :meth:`log_tail`. Use as a context manager, or call
    :meth:`start` and :meth:`stop`.
    """

    def __init__(self, command: ServerCommand, *, log: IO[str] | str | os.PathLike[str] | None = None) -> None:
        self.command = command
        self._owned_log = isinstance(log, (str, os.PathLike))
        self._log = open(log, "a", encoding="utf-8") if self._owned_log else log
        self._popen: subprocess.Popen[bytes] | None = None
        self._pump: _LogPump | None = None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen else None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll() if self._popen else None

    def log_tail(self, lines: int = 40) -> str:
        if self._pump is None:
            return ""
        return "".join(list(self._pump.lines)[-lines:])

    def preflight(self) -> None:
        """Refuse what would fail the start (no repository, no binary, a port in use) before anything is done."""
        self._preflight()

    def _preflight(self) -> None:
        options = self.command.options
        options.check_repository()
        binary = self.command.install.binary
        if not (binary.is_file() and os.access(binary, os.X_OK)):
            raise TritonNotFoundError(
                f"tritonserver binary '{binary}' is missing or not executable",
                hint="reinstall the server, or point --triton-home at a complete release",
            )
        for name, port in (
            ("http-port", options.http_port),
            ("grpc-port", options.grpc_port),
            ("metrics-port", options.metrics_port),
        ):
            try:
                free = port_is_free(options.address, port)
            except OSError as exc:
                raise InvalidServerOptionError(
                    f"cannot listen on address '{options.address}': {exc.strerror or exc}",
                    hint="pass --address with an address of this machine (127.0.0.1, 0.0.0.0)",
                ) from exc
            if not free:
                raise port_in_use(f"port {port} ({name}) on {options.address} is already in use", port, name)

    def start(self, *, ready_timeout_s: float = 120.0) -> TritonProcess:
        """Start the server and return once /v2/health/ready answers; raise with the log's reason otherwise."""
        if self._popen is not None:
            raise ServerStartError("this server was already started", hint="make a new TritonProcess")
        try:
            self._preflight()
            self._popen = popen_tied(
                self.command.argv,
                env=self.command.environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # The Python backend's shared-memory regions hold requests and responses; with the usual 022 they
                # are readable by every local user.
                umask=SERVER_UMASK,
            )
            self._pump = _LogPump(self._popen.stdout, self._log)
            self._pump.start()
            self._wait_ready(ready_timeout_s)
            self.make_regions_private()
        except BaseException:
            self.stop()
            raise
        return self

    def make_regions_private(self) -> int:
        """chmod 0600 the Python backend's shared-memory regions of this server (see orinkit.server.regions);
        call again after models are loaded, which makes new regions."""
        from orinkit.server.regions import make_private

        return make_private(live_group_members(self._popen.pid)) if self._popen else 0

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            code = self._popen.poll()
            if code is not None:
                self._pump.join(timeout=2.0)
                raise self._start_failure(f"tritonserver exited with code {code} while starting")
            if is_ready(self.command.http_url):
                return
            if time.monotonic() >= deadline:
                raise self._start_failure(
                    f"tritonserver was not ready after {timeout_s:g} s",
                    hint="look at the log for a model still loading or failing; raise the ready timeout if slow",
                )
            time.sleep(0.2)

    def _start_failure(self, message: str, *, hint: str | None = None) -> ServerStartError:
        tail = self.log_tail(80)
        match = _PORT_IN_USE.search(tail)
        if match:
            return port_in_use(f"{message}: {match.group(1)} is already in use", int(match.group(2)))
        errors = [m.group(1) for m in map(_ERROR_LINE.match, tail.splitlines()) if m]
        causes = [e for e in errors if not any(noise in e for noise in _NOISE)]
        # Every model that failed to load has its own "failed to load" line: name them all, not the first.
        failed = list(dict.fromkeys(e.split(_ESCAPED_NEWLINE)[0] for e in causes if e.startswith("failed to load")))
        if failed:
            message = f"{message}: {len(failed)} model(s) failed to load: " + "; ".join(failed)
        elif causes:
            message = f"{message}: {causes[0].split(_ESCAPED_NEWLINE)[0]}"
        return ServerStartError(
            message, log_tail=tail, hint=hint or "the server log above says which model or option failed"
        )

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the server to exit on its own; its exit code, or None if still running after ``timeout_s``."""
        try:
            return self._popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def raise_if_exited(self) -> None:
        code = self.returncode
        if code is not None:
            raise ServerExitedError(f"tritonserver exited with code {code}", log_tail=self.log_tail(80))

    def stop(self) -> int | None:
        """Stop the server and every process of its group: SIGTERM, then SIGKILL after the exit timeout."""
        if self._popen is None:
            self._close_log()
            return None
        pgid = self._popen.pid
        grace = self.command.options.exit_timeout_s + _STOP_GRACE_S
        self._signal_group(pgid, signal.SIGTERM)
        try:
            self._popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self._signal_group(pgid, signal.SIGKILL)
            self._popen.wait()
        # Stubs notice their parent is gone on their own; give them a moment, then make sure.
        deadline = time.monotonic() + _STOP_GRACE_S
        while live_group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if live_group_members(pgid):
            self._signal_group(pgid, signal.SIGKILL)
        if self._pump is not None:
            self._pump.join(timeout=5.0)
        self._close_log()
        return self._popen.returncode

    def _close_log(self) -> None:
        if self._owned_log and not self._log.closed:
            self._log.close()

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass

    def __enter__(self) -> TritonProcess:
        if self._popen is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
