"""The stages of a conversion as the user sees them: numbered start and end lines with the time taken, and while a
stage runs its status (whichever part of the stage is at work: onnxsim in its child process, the gate's search, the
FP16 graph's repair, the engine) as one live line on a terminal, or a line every 30 s in a log
(:class:`orinkit.core.progress.Heartbeat`)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from orinkit.core.progress import Heartbeat

Progress = Callable[[str], None]


@dataclass
class Stage:
    name: str
    seconds: float
    detail: str = ""


@contextlib.contextmanager
def paced(progress: Progress, status: str) -> Iterator[Heartbeat]:
    """A heartbeat saying ``status`` while the block runs: the running stage's own when ``progress`` is that
    stage's ``say`` (so nested work sets what the one heartbeat repeats, instead of adding a second voice), else
    a new one."""
    outer = getattr(progress, "__self__", None)
    if isinstance(outer, Heartbeat):
        outer.status(status)
        yield outer
        return
    with Heartbeat(progress, status=status) as beat:
        yield beat


class Stages:
    """Runs the stages in order and keeps their times."""

    def __init__(self, progress: Progress, total: int, earlier: tuple[Stage, ...] = ()) -> None:
        self.progress, self.total, self.done = progress, total, list(earlier)

    def run(self, name: str, fn: Callable[[Progress], object]):
        """``fn(say)`` as the next stage, where ``say`` is the progress it reports on."""
        self.progress(f"[{len(self.done) + 1}/{self.total}] {name} ...")
        started = time.perf_counter()
        with paced(self.progress, name) as beat:
            value = fn(beat.say)
        seconds = time.perf_counter() - started
        self.done.append(Stage(name, round(seconds, 3)))
        self.progress(f"[{len(self.done)}/{self.total}] {name} done in {seconds:.2f} s")
        return value
