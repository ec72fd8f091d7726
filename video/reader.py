"""One thread per source: decode, apply the source's frame policy, reopen a live source that ends, fails or
stalls, and report each change of state.

Policies (named, as Roboflow's InferencePipeline names them):

* ``latest``: the newest decoded frame wins; one that the pipeline did not take before the next arrived is
  dropped and counted. Live sources, and files with ``realtime``. Frames are dropped only after decoding: dropping
  compressed packets would corrupt the picture until the next key frame.
* ``every``: every frame, in order; the reader waits for the pipeline (a bounded queue). Files by default.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from orinkit.video.errors import SourceError, SourceLostError, VideoError
from orinkit.video.frames import Frame

POLICIES = ("latest", "every")
STATES = ("opening", "running", "reconnecting", "ended", "failed", "stopped")
EVERY_QUEUE = 8


@dataclass(frozen=True)
class Event:
    time: float
    source: str
    state: str
    detail: str = ""

    def text(self) -> str:
        return f"{self.source}: {self.state}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class Backoff:
    """Waits between reopen attempts: ``first_s`` doubled up to ``max_s``, each scaled by 1 ± ``jitter`` so that
    cameras that dropped together do not come back in lockstep."""

    first_s: float = 0.25
    max_s: float = 5.0
    jitter: float = 0.2

    def delay(self, attempt: int) -> float:
        base = min(self.max_s, self.first_s * 2 ** max(0, attempt))
        return max(0.0, base * (1 + self.jitter * (2 * random.random() - 1)))  # noqa: S311 - not for secrets


class Reader:
    """Reads ``make_source()`` (a fresh, unopened source per open) on a thread. ``start()`` opens it in the
    caller's thread, so a bad URI, a missing file or an unreachable camera raises at once; later failures of a
    live source are reopened with ``backoff``, up to ``max_reconnects`` times in a row (None: forever)."""

    def __init__(self, name: str, make_source: Callable, *, live: bool, policy: str | None = None,
                 realtime: bool = False, max_reconnects: int | None = None, backoff: Backoff | None = None,
                 on_event: Callable[[Event], None] = lambda event: None,
                 wake: threading.Event | None = None) -> None:
        policy = policy or ("latest" if live or realtime else "every")
        if policy not in POLICIES:
            raise SourceError(f"frame policy '{policy}' is unknown", hint=f"use one of {', '.join(POLICIES)}")
        if live and policy == "every":
            raise SourceError(f"{name} is live: it cannot wait for the model ('every' would fall behind for good)",
                              hint="live sources use 'latest'")
        self.name, self.live, self.policy, self.realtime = name, live, policy, realtime
        self.max_reconnects, self.backoff = max_reconnects, backoff or Backoff()
        self._make_source, self._on_event = make_source, on_event
        self._wake = wake or threading.Event()
        self._lock = threading.Condition()
        self._frames: collections.deque[Frame] = collections.deque()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._source = None
        self.state = "opening"
        self.error: VideoError | None = None
        self.read = self.dropped = self.reconnects = 0
        self.fps: float | None = None
        self.events: list[Event] = []

    # --- the pipeline's side -------------------------------------------------------------------------------

    def start(self, *, retry_first: bool = False) -> Reader:
        """Open the source and start reading. A live source that cannot be opened raises here, unless
        ``retry_first`` (the pipeline's choice when it has several sources: one camera down at start must not
        keep the others from running): then it is reopened on the thread like a camera that dropped."""
        try:
            self._source = self._open_first()
        except VideoError as exc:
            if not (self.live and retry_first):
                raise
            self._source = None
            self._event("reconnecting", f"not reachable at start: {exc.message}")
        self._thread = threading.Thread(target=self._run, name=f"orinkit-video-{self.name[:24]}", daemon=True)
        self._thread.start()
        return self

    def take(self) -> Frame | None:
        """The next frame to send, or None when none is waiting."""
        with self._lock:
            frame = self._frames.popleft() if self._frames else None
            self._lock.notify_all()
            return frame

    @property
    def done(self) -> bool:
        """Ended (or failed, or stopped) with no frame left to take."""
        with self._lock:
            return self.state in ("ended", "failed", "stopped") and not self._frames

    def stop(self, wait_s: float = 1.0) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(wait_s)

    # --- the thread ----------------------------------------------------------------------------------------

    def _open_first(self):
        source = self._make_source()
        source.open()
        self.fps = getattr(source, "fps", None)
        self._event("running")
        return source

    def _run(self) -> None:
        failures = 0
        source = self._source
        try:
            while not self._stop.is_set():
                reason = self._drain(source) if source is not None else "not open"
                if source is not None:
                    source.close()
                    source = None
                if self._stop.is_set():
                    break
                if not self.live:
                    if isinstance(reason, VideoError):
                        self.error = reason
                        self._event("failed", str(reason))
                    else:
                        self._event("ended")
                    return
                if reason != "not open":
                    self._event("reconnecting", str(reason))
                source, failures = self._reopen(failures)
                if source is None:
                    return
        finally:
            if source is not None:
                source.close()
            if self.state not in ("ended", "failed"):
                self._event("stopped")

    def _drain(self, source) -> VideoError | str:
        """Read until the source ends (returns why) or the reader is stopped."""
        paced_from: tuple[float, float] | None = None
        last_index: int | None = None
        while not self._stop.is_set():
            try:
                frame = source.read()
            except VideoError as exc:
                return exc
            except Exception as exc:  # noqa: BLE001 - a decoder's bug must not end the other sources
                return SourceLostError(f"{self.name} failed while reading: {type(exc).__name__}: {exc}",
                                       hint="it is reopened if live")
            if frame is None:
                return "the stream ended"
            if self.realtime:
                paced_from = self._pace(frame, paced_from)
            # A GStreamer appsink drops frames itself (the newest wins there too): its gaps count as decoded and
            # dropped, so that the figures add up whichever decoder read the source.
            skipped = frame.index - last_index - 1 if last_index is not None else 0
            last_index = frame.index
            if skipped > 0:
                with self._lock:
                    self.read += skipped
                    self.dropped += skipped
            frame.index = self.read
            self.read += 1
            self._put(frame)
        return "stopped"

    def _pace(self, frame: Frame, paced_from):
        media = frame.pts if frame.pts is not None else frame.index / (self.fps or 30.0)
        if paced_from is None:
            return time.monotonic(), media
        start, first = paced_from
        delay = start + (media - first) - time.monotonic()
        if delay > 0:
            self._stop.wait(delay)
        frame.captured = time.time()
        return paced_from

    def _put(self, frame: Frame) -> None:
        with self._lock:
            if self.policy == "latest":
                if self._frames:
                    self.dropped += len(self._frames)
                    self._frames.clear()
            else:
                while len(self._frames) >= EVERY_QUEUE and not self._stop.is_set():
                    self._lock.wait(0.1)
            self._frames.append(frame)
        self._wake.set()

    def _reopen(self, failures: int):
        while not self._stop.is_set():
            if self.max_reconnects is not None and failures >= self.max_reconnects:
                plural = "" if failures == 1 else "s"
                self.error = SourceLostError(f"{self.name} did not come back after {failures} reconnect{plural}",
                                             hint="check the camera; raise --max-reconnects or leave it unset")
                self._event("failed", str(self.error))
                return None, failures
            if self._stop.wait(self.backoff.delay(failures)):
                return None, failures
            failures += 1
            self.reconnects += 1
            source = self._make_source()
            try:
                source.open()
            except Exception as exc:  # noqa: BLE001 - a decoder's bug while reopening must not end the reader
                source.close()
                reason = exc.message if isinstance(exc, VideoError) else f"{type(exc).__name__}: {exc}"
                self._event("reconnecting", f"attempt {failures}: {reason}")
                continue
            self.fps = getattr(source, "fps", None) or self.fps
            self._event("running", f"back after {failures} attempt{'s' if failures > 1 else ''}")
            return source, 0
        return None, failures

    def _event(self, state: str, detail: str = "") -> None:
        with self._lock:
            self.state = state
        event = Event(time.time(), self.name, state, detail)
        self.events.append(event)
        try:
            self._on_event(event)
        finally:
            self._wake.set()
