"""Sources → a served model → sinks, at stream rate with bounded latency.

Each source has a reader thread applying its frame policy (``orinkit.video.reader``). This loop takes frames from
the readers in turn, keeps up to ``in_flight`` requests per source going through the Client's worker pool (one
gRPC channel per worker), and hands answers to the sinks in each source's frame order. Several sources share the
server fairly: each has its own in-flight budget, and the loop starts its turn at a different source each time, so
a fast camera cannot starve a slow one; Triton's dynamic batcher merges the concurrent requests. One source
ending or failing changes nothing for the others.

Each source gets its own adapter (``adapter.for_source(name)``, asked once before its first frame): an adapter with
state across frames (a detector's tracker) keeps one per camera, and answers that source's frames in their order
on this loop's thread. At the end each source adapter's ``summary()`` (a detector's track counts) goes into the
:class:`Summary` and to the sinks' ``finish``.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from orinkit.core.errors import EXIT_BAD_INPUT, OrinkitError
from orinkit.video.adapters import Adapter
from orinkit.video.errors import SourceError, VideoError
from orinkit.video.frames import Frame, Result
from orinkit.video.reader import Backoff, Event, Reader
from orinkit.video.sources import open_source
from orinkit.video.stats import StreamStats
from orinkit.video.uri import SourceSpec, parse_source

STATS_INTERVAL_S = 1.0
SINK_QUEUE = 32
# At the end (or on Ctrl-C) requests in flight get this long to come back, so the files end with their answers.
DRAIN_S = 10.0
BACKOFF = Backoff()


@dataclass
class _Pending:
    frame: Frame
    sent: float
    future: Future
    answered: float | None = None


@dataclass
class Summary:
    stats: dict
    events: list[Event] = field(default_factory=list)
    interrupted: bool = False
    errors: list[str] = field(default_factory=list)  # sources that failed, sinks that were dropped
    source_errors: dict[str, VideoError] = field(default_factory=dict)  # why each failed source failed
    answers: dict[str, dict] = field(default_factory=dict)  # source -> its adapter's summary() (those not None)


class Pipeline:
    """``Pipeline(["rtsp://cam/1", "clip.mp4"], client, adapter, sinks=[...]).run()`` streams until every
    source ends, ``frames`` frames were sent, or ``stop()`` / Ctrl-C, and returns a :class:`Summary`.

    ``client`` is an :class:`orinkit.client.Client` (anything with its ``submit``); ``policy`` overrides the
    sources' default frame policy (``latest`` for live sources and ``realtime`` files, ``every`` for files);
    ``in_flight`` is per source (default: 1 for each live source, 2 for each file, so a file beside a camera
    keeps its own default)."""

    def __init__(self, sources: Sequence[str | SourceSpec], client, adapter: Adapter, *, sinks: Sequence = (),
                 in_flight: int | None = None, frames: int | None = None, policy: str | None = None,
                 realtime: bool = False,
                 read_timeout_s: float = 3.0, max_reconnects: int | None = None, backoff: Backoff = BACKOFF,
                 decoder: str = "auto", on_event: Callable[[Event], None] = lambda event: None,
                 on_sink_error: Callable[[str, VideoError], None] | None = None,
                 stats_interval_s: float = STATS_INTERVAL_S) -> None:
        if not sources:
            raise SourceError("no video source given", hint="give at least one file, folder or stream URI")
        if in_flight is not None and in_flight < 1:
            raise SourceError(f"in_flight {in_flight} sends nothing", hint="use 1 or more (2 keeps a model busy)")
        if frames is not None and frames < 1:
            raise SourceError(f"frames {frames} is below 1", hint="give 1 or more, or none for the whole source")
        if read_timeout_s <= 0:
            raise SourceError(f"read timeout {read_timeout_s} s is not above 0", hint="e.g. 3")
        self.specs = [s if isinstance(s, SourceSpec) else parse_source(s) for s in sources]
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise SourceError("the same source is given twice", hint="give each camera or file once")
        if realtime and any(s.live for s in self.specs):
            raise SourceError("--realtime applies to files and folders; live sources run at their own rate",
                              hint="leave --realtime out for rtsp/v4l2/csi/gst sources")
        # Live: one request at a time per source, so each answer is for the newest frame (a second request would
        # wait behind the first and answer an older one). Files: two, so that decoding and the network overlap
        # the model's work.
        self.budgets = {s.name: in_flight or (1 if s.live or realtime else 2) for s in self.specs}
        self.in_flight = in_flight or max(self.budgets.values())  # the largest budget, for reports
        self.client, self.adapter, self.frames = client, adapter, frames
        self.policy, self.realtime, self.read_timeout_s = policy, realtime, read_timeout_s
        self.max_reconnects, self.backoff, self.decoder = max_reconnects, backoff, decoder
        self.stats_interval_s = stats_interval_s
        self._on_event, self._on_sink_error = on_event, on_sink_error
        self.sinks = list(sinks)  # more may be added before run()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.stats = StreamStats()
        self.readers: list[Reader] = []
        self.adapters: dict[str, Adapter] = {}  # each source's own (adapter.for_source), made as its reader starts
        self._errors: list[str] = []
        self._prepare: ThreadPoolExecutor | None = None

    def stop(self) -> None:
        """Ends ``run`` from another thread: no new frames are sent; those in flight are answered and sunk."""
        self._stop.set()
        self._wake.set()

    def snapshot(self) -> dict:
        return self.stats.snapshot(self.readers)

    # --- running -------------------------------------------------------------------------------------------

    def run(self) -> Summary:
        from orinkit.video.sinks import SinkSet

        sinkset = SinkSet(self.sinks, on_error=self._sink_failed)
        sink_queue: queue.Queue = queue.Queue(SINK_QUEUE)
        sink_thread = threading.Thread(target=_sink_loop, args=(sinkset, sink_queue), name="orinkit-video-sinks",
                                       daemon=True)
        pending: dict[str, collections.deque[_Pending]] = {}
        interrupted = False
        answers: dict[str, dict] = {}
        try:
            try:
                self._start_readers()
            except BaseException:
                # A source that cannot be opened (or a Ctrl-C while one opens): nothing was answered, so the
                # outputs are dropped unwritten, not closed into empty files and "no frame reached it" reports.
                for sink in self.sinks:
                    abort = getattr(sink, "abort", None)
                    if abort is not None:
                        abort()
                raise
            self._prepare = ThreadPoolExecutor(self._workers(), "orinkit-video-prepare")
            pending = {reader.name: collections.deque() for reader in self.readers}
            sink_thread.start()
            self._loop(pending, sink_queue)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            for reader in self.readers:
                reader.stop(wait_s=0)
            if sink_thread.is_alive():
                interrupted = self._drain(pending, sink_queue) or interrupted
                # Asked only now: every answer a summary counts has been made (the drain's included).
                answers = self._answers()
                final = self.snapshot()
                sink_queue.put(("stats", final))
                sink_queue.put(("finish", final, answers))
                sink_queue.put(None)
                sink_thread.join()
            else:
                sinkset.close()
            for reader in self.readers:
                reader.stop(wait_s=1.0)
            if self._prepare is not None:
                self._prepare.shutdown(wait=False, cancel_futures=True)
        return Summary(self.snapshot(), [e for r in self.readers for e in r.events], interrupted, self._errors,
                       {r.name: r.error for r in self.readers if r.error is not None}, answers)

    def _start_readers(self) -> None:
        for spec in self.specs:
            self.adapters[spec.name] = self.adapter.for_source(spec.name)
            reader = Reader(spec.name, self._source_maker(spec), live=spec.live, policy=self.policy,
                            realtime=self.realtime, max_reconnects=self.max_reconnects, backoff=self.backoff,
                            on_event=self._event, wake=self._wake)
            self.readers.append(reader)
            # With several sources a camera that is down at start is retried like one that dropped, while the
            # others run; alone, it fails at once (nothing else could run meanwhile, and the user sees why).
            reader.start(retry_first=len(self.specs) > 1)

    def _source_maker(self, spec: SourceSpec):
        return lambda: open_source(spec, size=self.adapters[spec.name].size, read_timeout_s=self.read_timeout_s,
                                   decoder=self.decoder)

    def _loop(self, pending, sink_queue: queue.Queue) -> None:
        sent = 0
        turn = 0
        next_stats = time.time() + self.stats_interval_s
        while True:
            self._wake.clear()
            progressed = self._collect(pending, sink_queue)
            if not self._stop.is_set() and (self.frames is None or sent < self.frames):
                count = len(self.readers)
                for offset in range(count):
                    reader = self.readers[(turn + offset) % count]
                    if len(pending[reader.name]) >= self.budgets[reader.name]:
                        continue
                    frame = reader.take()
                    if frame is None:
                        continue
                    pending[reader.name].append(self._send(reader.name, frame))
                    sent += 1
                    progressed = True
                    if self.frames is not None and sent >= self.frames:
                        break
                turn += 1
            now = time.time()
            if now >= next_stats:
                sink_queue.put(("stats", self.snapshot()))
                next_stats = now + self.stats_interval_s
            if not any(pending.values()) and (
                    self._stop.is_set() or (self.frames is not None and sent >= self.frames)
                    or all(reader.done for reader in self.readers)):
                return
            if not progressed:
                self._wake.wait(0.05)

    def _send(self, name: str, frame: Frame) -> _Pending:
        entry = _Pending(frame, time.time(), Future())
        # The frame is encoded for the model (JPEG: about 1 ms at 640x360, more for bigger frames) on a worker, not
        # on this loop, which every source's frames and answers pass through.
        entry.future = self._prepare.submit(self._infer, self.adapters[name], frame)
        entry.future.add_done_callback(lambda _f, e=entry: self._answered(e))
        return entry

    def _infer(self, adapter: Adapter, frame: Frame):
        return self.client.submit(*adapter.inputs(frame), in_flight=self._workers()).result()

    def _workers(self) -> int:
        return sum(self.budgets[reader.name] for reader in self.readers)

    def _answered(self, entry: _Pending) -> None:
        entry.answered = time.time()
        self._wake.set()

    def _collect(self, pending, sink_queue: queue.Queue) -> bool:
        progressed = False
        for name, entries in pending.items():
            while entries and entries[0].future.done() and entries[0].answered is not None:
                entry = entries.popleft()
                progressed = True
                error = entry.future.exception()
                if error is not None:
                    self._request_failed(name, error)
                    continue
                answer, record = self.adapters[name].answer(entry.future.result(), entry.frame)
                result = Result(name, entry.frame, answer, record, entry.sent, entry.answered)
                self.stats.answer(name, entry.answered, result.latency_s)
                sink_queue.put(result)
        return progressed

    def _request_failed(self, name: str, error: BaseException) -> None:
        self.stats.failure(name)
        if isinstance(error, OrinkitError) and error.exit_code == EXIT_BAD_INPUT:
            raise error  # the model refuses these frames (a wrong model or adapter): every frame would fail
        if not isinstance(error, OrinkitError):
            raise error
        self._event(Event(time.time(), name, "request failed", str(error)))

    def _drain(self, pending, sink_queue: queue.Queue) -> bool:
        """Wait for the requests in flight (up to DRAIN_S) and sink their answers; True if a second Ctrl-C came."""
        deadline = time.time() + DRAIN_S
        try:
            while any(pending.values()) and time.time() < deadline:
                self._wake.clear()
                try:
                    self._collect(pending, sink_queue)
                except OrinkitError:
                    pass
                self._wake.wait(0.05)
        except KeyboardInterrupt:
            return True
        return False

    def _answers(self) -> dict[str, dict]:
        """Each source adapter's summary, those that have one; one that fails is reported, not raised: the files
        and the other sources' summaries are still written."""
        answers = {}
        for name, adapter in self.adapters.items():
            try:
                summary = adapter.summary()
            except Exception as exc:  # noqa: BLE001 - the stream is over; its outputs must still be finished
                from orinkit.video.sinks import one_line

                self._errors.append(f"summary of {name} failed: {one_line(exc)}")
                continue
            if summary is not None:
                answers[name] = summary
        return answers

    def _event(self, event: Event) -> None:
        if event.state == "failed":
            self._errors.append(event.text())
        self._on_event(event)

    def _sink_failed(self, name: str, error: VideoError) -> None:
        self._errors.append(f"sink {name}: {error}")
        if self._on_sink_error is not None:
            self._on_sink_error(name, error)


def _sink_loop(sinkset, items: queue.Queue) -> None:
    try:
        while True:
            item = items.get()
            if item is None:
                return
            if isinstance(item, tuple):
                if item[0] == "finish":
                    sinkset.finish(item[1], item[2])
                else:
                    sinkset.stats(item[1])
                continue
            sinkset.write(item)  # stamps item.sunk
    finally:
        sinkset.close()
