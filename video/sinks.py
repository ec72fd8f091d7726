"""Where answered frames go: the :class:`Sink` contract, :class:`SinkSet` that keeps one failing sink from
stopping the others, and :class:`JsonLinesSink`. The annotated MP4 is :mod:`orinkit.video.mp4`, the page's live
view :mod:`orinkit.video.live`.

The pipeline calls ``SinkSet.write`` from its one sink thread for every answered frame, in frame order, and
``SinkSet.stats`` about once a second with its figures, ``SinkSet.finish`` once at the end with the final figures
and each source adapter's summary; then (and on SIGINT/SIGTERM) it calls ``SinkSet.close``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from orinkit.video.errors import BadOutputError, SinkError
from orinkit.video.frames import Result

log = logging.getLogger("orinkit.video")
_CAUSE_LIMIT = 300  # a report's line, not a log: an exception can print a whole array


class Sink:
    """The contract. ``write`` takes every answered frame in frame order; ``stats`` the pipeline's figures about
    once a second (``fps``, ``latency_ms`` percentiles, ``read``/``answered``/``dropped``, ``sources``); ``close``
    finishes the output (files complete at their final path). Any exception a sink raises drops that sink only."""

    name: str = "sink"

    def write(self, result: Result) -> None:
        raise NotImplementedError

    def stats(self, snapshot: dict) -> None:
        """Most sinks have no use for the pipeline's figures."""

    def finish(self, stats: dict, answers: dict[str, dict]) -> None:
        """Once, after the last ``write`` of a stream that ran: the final figures (as ``stats``) and ``answers``,
        each source's adapter summary (source name -> e.g. ``{"tracks": {"disc": 3}}``; sources without one are
        left out). Most sinks have no use for them."""

    def close(self) -> None:
        """Nothing to finish by default."""


def one_line(exc: BaseException, limit: int = _CAUSE_LIMIT) -> str:
    """An exception as one line: orinkit's own by their message (and hint), others prefixed by their type."""
    from orinkit.core.errors import OrinkitError

    text = str(exc) if isinstance(exc, OrinkitError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def drawn(result: Result, draw: Callable[[Any, Any], Any] | None):
    """The frame's image with the answer drawn by ``draw`` (an adapter's ``draw``), drawn once per frame however
    many sinks ask: the copy is kept in ``result.extra`` for the next sink with the same function."""
    if draw is None:
        return result.frame.image
    kept = result.extra.get("drawn")
    if kept is not None and kept[0] == draw:  # == : a bound method is a new object at every attribute access
        return kept[1]
    image = draw(result.frame.image, result.answer)
    result.extra["drawn"] = (draw, image)
    return image


def _report(on_error: Callable[[str, SinkError], None] | None, name: str, error: SinkError) -> None:
    if on_error is None:
        log.warning("%s", error)
        return
    try:
        on_error(name, error)
    except Exception:  # the reporter's own failure must not stop the other sinks either
        log.exception("reporting the failure of sink %r failed", name)


class SinkSet:
    """Sinks fed together, each isolated: a sink whose ``write``/``stats``/``close`` raises is closed (best
    effort), reported once through ``on_error(name, SinkError)`` (one line naming the sink and the cause; logged
    when ``on_error`` is None) and dropped; the others go on. Safe to call from several threads."""

    def __init__(self, sinks: Iterable[Sink], on_error: Callable[[str, SinkError], None] | None = None) -> None:
        self._sinks: list[Sink] = []
        names: set[str] = set()
        for sink in sinks:
            name, n = sink.name, 2
            while name in names:  # two JSON-lines files, two views: each failure must say which one
                name, n = f"{sink.name} #{n}", n + 1
            names.add(name)
            sink.name = name
            self._sinks.append(sink)
        self._on_error = on_error
        self._lock = threading.Lock()

    @property
    def alive(self) -> list[str]:
        """The names of the sinks still fed."""
        with self._lock:
            return [sink.name for sink in self._sinks]

    def write(self, result: Result) -> None:
        self._each(lambda sink: sink.write(result), "writing frame", result)

    def stats(self, snapshot: dict) -> None:
        self._each(lambda sink: sink.stats(snapshot), "taking the statistics", None)

    def finish(self, stats: dict, answers: dict[str, dict]) -> None:
        # getattr: a sink written before finish() existed (write/stats/close only) still works.
        self._each(lambda sink: getattr(sink, "finish", lambda *_: None)(stats, answers), "finishing", None)

    def close(self) -> None:
        """Close every sink (each isolated; a close that fails is reported like a write). Idempotent."""
        failed = []
        with self._lock:
            sinks, self._sinks = self._sinks, []
            for sink in sinks:
                try:
                    sink.close()
                except Exception as exc:
                    failed.append((sink.name, self._error(sink.name, "closing", exc)))
        for name, error in failed:
            _report(self._on_error, name, error)

    def _each(self, call: Callable[[Sink], None], doing: str, result: Result | None) -> None:
        failed = []
        with self._lock:
            for sink in list(self._sinks):
                try:
                    call(sink)
                except Exception as exc:
                    what = f"{doing} {result.frame.index} of {result.source}" if result is not None else doing
                    failed.append((sink.name, self._error(sink.name, what, exc)))
                    self._sinks.remove(sink)
                    try:
                        sink.close()
                    except Exception:  # best effort: the write's failure is the one worth reporting
                        log.debug("closing the failed sink %r failed too", sink.name, exc_info=True)
            if result is not None and result.sunk is None:
                result.sunk = time.time()
        for name, error in failed:
            _report(self._on_error, name, error)

    @staticmethod
    def _error(name: str, doing: str, exc: Exception) -> SinkError:
        error = SinkError(f"the output '{name}' failed {doing} and was dropped: {one_line(exc)}",
                          hint="the other outputs go on; fix the cause (disk space, the folder) and run again")
        error.__cause__ = exc
        return error

    def __enter__(self) -> SinkSet:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def check_output(path: str | os.PathLike, what: str, suffix: str, *, required: bool = True) -> Path:
    """The output path as given, refused when it cannot be a file in an existing folder, or (``required``) when
    it does not end in ``suffix`` (with its dot; the example in the hints either way)."""
    target = Path(path)
    example = f"e.g. out{suffix}"
    if required and target.suffix.lower() != suffix:
        raise BadOutputError(f"the {what} output '{target}' does not end in {suffix}",
                             hint=f"name the file with that suffix, {example}")
    if target.is_dir():
        raise BadOutputError(f"the {what} output '{target}' is a folder", hint=f"give a file name in it, {example}")
    folder = target.parent
    if not folder.is_dir():
        raise BadOutputError(f"the folder of the {what} output '{target}' does not exist",
                             hint=f"create it first (mkdir -p {folder}) or write elsewhere")
    return target


def _finite(value):
    """NaN and infinities as null: a JSON line must parse everywhere (json.loads reads NaN, most readers do not)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _plain(value):
    # numpy scalars and arrays in an adapter's record: their Python values
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def to_json_line(record: dict) -> str:
    try:
        return json.dumps(record, allow_nan=False, default=_plain, separators=(",", ":"))
    except ValueError:  # a NaN somewhere: rare, so only then is the record walked
        return json.dumps(_finite(json.loads(json.dumps(record, default=_plain))), allow_nan=False,
                          separators=(",", ":"))


def result_record(result: Result) -> dict:
    """A result as its JSON line's object."""
    frame = result.frame
    return {"source": result.source, "frame": frame.index, "pts": frame.pts, "captured": frame.captured,
            "sent": result.sent, "answered": result.answered, "latency_ms": round(result.latency_s * 1000.0, 3),
            "answer": result.record}


SUMMARY_FIGURES = ("read", "answered", "dropped", "failed", "elapsed_s", "fps_overall", "latency_ms_overall")


def summary_record(stats: dict, answers: dict[str, dict]) -> dict:
    """The results file's closing object: the stream's totals (not the rolling window, which means nothing once it
    ended) and ``answers``, each source adapter's summary."""
    return {**{key: stats[key] for key in SUMMARY_FIGURES if key in stats}, "answers": answers}


class JsonLinesSink(Sink):
    """One JSON object per answered frame and line: ``source``, ``frame`` (its index), ``pts``, ``captured``,
    ``sent``, ``answered`` (``time.time()`` seconds), ``latency_ms`` (capture to answer) and ``answer`` (the
    adapter's record). When a source's adapter sums the stream up (a detector's track counts), one last line
    follows: ``{"summary": {"read", "answered", "dropped", "failed", "elapsed_s", "fps_overall",
    "latency_ms_overall", "answers": {source: summary}}}`` (no ``frame``: a reader of frames skips it). Each line
    is flushed as written, so a reader tailing the file sees it at once; the file is written at its final path
    (every line in it is whole). ``path`` may also be an open text stream (e.g. ``sys.stdout``), which is flushed
    but left open."""

    def __init__(self, path: str | os.PathLike | TextIO) -> None:
        self.lines = 0
        if hasattr(path, "write"):
            self.path, self._file, self._owned = None, path, False
            self.name = f"JSON lines {getattr(path, 'name', 'stream')}"
            return
        self.path = check_output(path, "JSON lines", ".jsonl", required=False)  # /dev/stdout is fine too
        self.name = f"JSON lines {self.path}"
        self._created = not os.path.lexists(self.path)  # only a file this sink made is removed by abort()
        try:
            self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - open until close()
        except OSError as exc:
            raise BadOutputError(f"cannot write the JSON lines output '{self.path}': {exc.strerror}",
                                 hint="check the folder's permissions or write elsewhere") from exc
        self._owned = True

    def write(self, result: Result) -> None:
        self._file.write(to_json_line(result_record(result)) + "\n")
        self._file.flush()
        self.lines += 1

    def finish(self, stats: dict, answers: dict[str, dict]) -> None:
        if not answers:
            return  # a model without a summary (lanes, a classifier): every line stays a frame's
        self._file.write(to_json_line({"summary": summary_record(stats, answers)}) + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._owned:
            self._file.flush()
        elif not self._file.closed:
            self._file.close()

    def abort(self) -> None:
        """Drop the output: closed, and removed if this sink made the file (an existing path such as /dev/stdout,
        or a stream, is left where it is)."""
        self.close()
        if self._owned and self._created:
            self.path.unlink(missing_ok=True)
