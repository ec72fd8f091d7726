"""The reader's thread on a real clip decoded by PyAV: a failure that is not orinkit's own while a live source is
reopened (a decoder library's bug) is reported and retried like any other, never a silently dead thread."""

from __future__ import annotations

import time

import pytest
from video_models import write_clip

from orinkit.video.reader import Backoff, Reader
from orinkit.video.sources import open_source

pytest.importorskip("av")


class DecoderBug:
    """Failpoint: stands in for a decoder library raising its own exception type while a source is reopened (no
    real decoder does so on demand)."""

    def open(self) -> None:
        raise RuntimeError("decoder bug: bad internal state")

    def close(self) -> None:
        pass


def test_a_foreign_exception_while_reopening_is_retried_then_fails_with_its_cause(tmp_path):
    clip = tmp_path / "clip.mp4"
    write_clip(clip, frames=5)
    opens = []

    def make_source():
        opens.append(time.monotonic())
        return open_source(str(clip)) if len(opens) == 1 else DecoderBug()

    events = []
    # live=True: the clip's end counts as a lost camera, so the reader reopens it
    reader = Reader("camera", make_source, live=True, max_reconnects=3,
                    backoff=Backoff(first_s=0.01, max_s=0.02), on_event=events.append).start()
    deadline = time.monotonic() + 10
    while not reader.done and time.monotonic() < deadline:
        reader.take()
        time.sleep(0.01)
    reader.stop()
    assert reader.state == "failed", [(e.state, e.detail) for e in events]
    assert len(opens) == 4  # the first open and three reopen attempts
    retries = [e.detail for e in events if e.state == "reconnecting" and e.detail.startswith("attempt")]
    assert retries == [f"attempt {n}: RuntimeError: decoder bug: bad internal state" for n in (1, 2, 3)]
    assert "did not come back after 3 reconnects" in str(reader.error)
