"""Where a call's time goes when the server restarts under it: timestamps from the client's side (each attempt,
each readiness probe's answer, each change of its gRPC channel's connectivity, each shared-memory registration)
and from the server's log (when it stopped taking requests, when its gRPC service started again), split into
phases per call that rode through the restart. Used by benchmarks/faults.py; nothing here is part of orinkit.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

# Triton's log lines start "I1125 00:41:55.380561 5748 server.cc:305] ..." in UTC.
_LOG_LINE = re.compile(r"^[IWE](\d{4}) (\d\d:\d\d:\d\d\.\d+) \d+ \S+\] (.*)$")


class Trace:
    """Events of one client, as (monotonic seconds, kind, detail); list.append is atomic, so gRPC's callback
    thread and the caller's may both add."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, object]] = []

    def add(self, kind: str, detail: object = None) -> None:
        self.events.append((time.monotonic(), kind, detail))

    def first(self, kind: str, after: float, detail: object = ...) -> float | None:
        return next((t for t, k, d in self.events if k == kind and t >= after and (detail is ... or d == detail)),
                    None)

    def last(self, kind: str, before: float, detail: object = ...) -> float | None:
        found = [t for t, k, d in self.events if k == kind and t <= before and (detail is ... or d == detail)]
        return found[-1] if found else None

    def count(self, kind: str, start: float, end: float) -> int:
        return sum(1 for t, k, _ in self.events if k == kind and start <= t <= end)


class TracedGrpc:
    """A tritonclient InferenceServerClient that records what the Client asks of it; all else passes through."""

    def __init__(self, inner, trace: Trace) -> None:
        self._inner, self._trace = inner, trace
        inner._channel.subscribe(lambda state: trace.add("channel", state.name), try_to_connect=False)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def infer(self, *args, **kwargs):
        self._trace.add("attempt")
        try:
            result = self._inner.infer(*args, **kwargs)
        except Exception as exc:
            self._trace.add("attempt failed", str(getattr(exc, "status", lambda: "")()))
            raise
        self._trace.add("attempt ok")
        return result

    def is_server_ready(self, *args, **kwargs):
        try:
            ready = self._inner.is_server_ready(*args, **kwargs)
        except Exception:
            self._trace.add("probe", "error")
            raise
        self._trace.add("probe", bool(ready))
        return ready

    def register_system_shared_memory(self, *args, **kwargs):
        self._trace.add("register")
        return self._inner.register_system_shared_memory(*args, **kwargs)


def traced(client, trace: Trace):
    """Wrap ``client``'s connection before its first call (the shared-memory regions keep the one they get)."""
    client._grpc = TracedGrpc(client._grpc, trace)
    return client


def log_moments(log: Path, message: str) -> list[float]:
    """Monotonic times of the server log's lines containing ``message``."""
    offset = time.time() - time.monotonic()
    year = datetime.now(timezone.utc).year
    moments = []
    for line in log.read_text(errors="replace").splitlines():
        match = _LOG_LINE.match(line)
        if match and message in match.group(3):
            when = datetime.strptime(f"{year}{match.group(1)} {match.group(2)}", "%Y%m%d %H:%M:%S.%f")
            moments.append(when.replace(tzinfo=timezone.utc).timestamp() - offset)
    return moments


@dataclass
class Restart:
    """The server's side of one restart, monotonic seconds."""

    sigterm: float  # the benchmark asked the old server to stop
    refusing: float  # the old server's log: "Waiting for in-flight requests" (it takes no new request)
    exited: float  # the old server and its stubs were gone (TritonProcess.stop returned)
    listening: float  # the new server's log: "Started GRPCInferenceService" (its models are loaded: ready)


@dataclass
class CallPhases:
    """One call that rode through a restart, in seconds per phase (they add up to ``total``)."""

    total: float
    before_stop: float  # from its start to the old server refusing requests
    server_stopping: float  # the old server refusing until it exited (Triton's own shutdown)
    server_starting: float  # exited until the new server's gRPC service started (Triton's own start)
    reconnect: float  # the new server listening until this client's channel was READY (gRPC reconnect backoff)
    probe: float  # channel READY until a readiness probe answered True
    to_attempt: float  # probe True until the attempt that succeeded began (backoff sleep, re-registration)
    answer: float  # that attempt until the call returned
    attempts: int = 0
    probes: int = 0

    @property
    def client_after_return(self) -> float:
        """What orinkit's client controls: from the new server listening to the answer."""
        return self.reconnect + self.probe + self.to_attempt + self.answer


PHASES = ("before_stop", "server_stopping", "server_starting", "reconnect", "probe", "to_attempt", "answer",
          "client_after_return", "total")


def phases(trace: Trace, calls: list[tuple[float, float]], restart: Restart) -> CallPhases | None:
    """The phases of this client's call that spanned ``restart`` (started before the new server listened and
    answered after), or None when it made none (it was idle across the restart)."""
    spanning = [(s, e) for s, e in calls if s < restart.listening < e]
    if not spanning:
        return None
    start, end = spanning[0]
    ok = trace.last("attempt ok", end)
    succeeded = trace.last("attempt", ok) if ok is not None else end
    connected = trace.first("channel", restart.listening, "READY") or succeeded
    probed = trace.first("probe", max(restart.listening, start), True)
    # No probe answered True before the successful attempt: the attempt itself found the server.
    probed = probed if probed is not None and probed <= succeeded else connected
    connected = min(connected, probed)
    stop_from = max(start, restart.refusing)
    moments = [start, stop_from, max(stop_from, restart.exited), max(start, restart.listening), connected, probed,
               succeeded, end]
    for i in range(1, len(moments)):  # clamp: each phase begins where the one before it ended
        moments[i] = max(moments[i], moments[i - 1])
    spans = [b - a for a, b in zip(moments, moments[1:])]
    return CallPhases(end - start, *spans, attempts=trace.count("attempt", start, end),
                      probes=trace.count("probe", start, end))


def table(rows: dict[str, list[CallPhases]]) -> str:
    """Median and max per phase for each label, as a text table (milliseconds)."""
    header = f"   {'phase (ms)':20}" + "".join(f"{label:>26}" for label in rows)
    sub = f"   {'':20}" + "".join(f"{'median':>13}{'max':>13}" for _ in rows)
    lines = [header, sub]
    for phase in PHASES:
        cells = ""
        for calls in rows.values():
            values = [getattr(c, phase) * 1000 for c in calls]
            cells += (f"{statistics.median(values):13.0f}{max(values):13.0f}" if values else f"{'-':>13}{'-':>13}")
        lines.append(f"   {phase:20}{cells}")
    counts = "".join(f"{len(calls):>26}" for calls in rows.values())
    lines.append(f"   {'calls measured':20}{counts}")
    return "\n".join(lines)


# What orinkit's client did before issue 24, for the side-by-side: gRPC reconnect tries up to 1 s apart (and a
# 100 ms connection timeout), and readiness probes every 50 ms whatever the channel's state.
OLD_CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 100), ("grpc.min_reconnect_backoff_ms", 100),
                       ("grpc.max_reconnect_backoff_ms", 1000))


def old_client_class():
    from orinkit.client import Client

    class OldClient(Client):
        def _wait_ready(self, seconds: float) -> None:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                try:
                    if self._grpc.is_server_ready(client_timeout=max(0.05, deadline - time.monotonic())):
                        return
                except Exception:  # noqa: BLE001 - still down
                    pass
                time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    return OldClient
