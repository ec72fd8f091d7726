"""What the agent says while something it depends on does not answer (the bucket, the local server).

An agent is a service: its log is the journal, and the bucket, where its reports go, is what may be down. So an
outage is told in the log at its first failed poll (one line, the cause and the retry), reminded at most once per
``remind_every_s`` while it lasts (its duration and the polls failed so far), and told when it ends; the next report
counts it. Silence through an outage would leave a device that served stale versions for a day with no trace of
why. Runs on the device (Python 3.10).
"""

from __future__ import annotations

import time
from collections.abc import Callable

REMIND_EVERY_S = 60.0


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 5 min``: a journal line is read by a person."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _polls(count: int) -> str:
    return f"{count} poll{'' if count == 1 else 's'}"


class Outage:
    """One thing the agent polls (``what``: "the bucket s3://b/p at http://host:9000"). :meth:`failed` after each
    poll it did not answer, :meth:`answered` after each poll it did."""

    def __init__(self, what: str, progress: Callable[[str], None], *, remind_every_s: float = REMIND_EVERY_S,
                 backoff_to_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.what, self.progress, self.remind_every_s, self.clock = what, progress, remind_every_s, clock
        self.backoff_to_s = backoff_to_s  # the polls back off up to this while it lasts (None: they do not)
        self.count = 0  # outages ended since the agent started
        self.last_s: float | None = None  # the last ended outage's duration
        self.last_failed_polls = 0
        self._since: float | None = None
        self._failed = 0
        self._told_at = 0.0

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, cause: str, retry_in_s: float, meanwhile: str = "") -> None:
        """A poll it did not answer; ``meanwhile``: what the device does until it does."""
        now = self.clock()
        self._failed += 1
        if self._since is None:
            self._since = self._told_at = now
            self.progress(f"{self.what} does not answer: {cause}"
                          + (f"; {meanwhile}" if meanwhile else "") + f"; retrying in {duration(retry_in_s)}"
                          + (f", backing off to at most {duration(self.backoff_to_s)} between tries"
                             if self.backoff_to_s else ""))
        elif now - self._told_at >= self.remind_every_s:
            self._told_at = now
            self.progress(f"{self.what} still does not answer after {duration(now - self._since)} "
                          f"({_polls(self._failed)} failed): {cause}; next try in {duration(retry_in_s)}")

    def answered(self) -> None:
        if self._since is None:
            return
        took = self.clock() - self._since
        self.count, self.last_s, self.last_failed_polls = self.count + 1, took, self._failed
        self.progress(f"{self.what} answers again after {duration(took)} ({_polls(self._failed)} failed)")
        self._since, self._failed = None, 0

    def as_report(self) -> dict:
        """For the report: ``count`` ended since start, the last one's ``last_s`` and ``last_failed_polls``, and
        ``ongoing_s`` when one lasts still (a report written while the local server is down)."""
        return {"count": self.count, "last_s": None if self.last_s is None else round(self.last_s, 1),
                "last_failed_polls": self.last_failed_polls,
                "ongoing_s": None if self._since is None else round(self.clock() - self._since, 1)}


__all__ = ["REMIND_EVERY_S", "Outage", "duration"]
