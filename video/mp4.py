"""The annotated video: every answered frame, the answer drawn on it, as an H.264 MP4 that browsers play.

Encoded with PyAV's libx264 (``ultrafast``: 269 fps at 640x360 on one core here, so it keeps up with the model),
yuv420p, ``movflags=+faststart`` (the index first: a browser starts playing before the whole file arrived).
The file is written under a temporary name beside the target and renamed into place by ``close``: the target
path holds a complete video or nothing, whatever stopped the run.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from orinkit.core.optional import require
from orinkit.video.errors import SinkError
from orinkit.video.frames import Result
from orinkit.video.sinks import BadOutputError, Sink, check_output, drawn

TIME_BASE = Fraction(1, 1000)  # milliseconds: the frames' own times, however irregular (dropped frames, VFR)
_REBASE_S = 1.0  # a step back of more than this: the source restarted its clock (a reconnect, a reopened file)


def _discard(state: dict) -> None:
    """Close the container if open and remove the temporary file (a run that never reached ``close``)."""
    container = state.pop("container", None)
    if container is not None:
        try:
            container.close()
        except Exception:  # the file is removed next whatever state the muxer was in
            pass
    try:
        os.unlink(state["temp"])
    except FileNotFoundError:
        pass


class Mp4Sink(Sink):
    """Answered frames, drawn by ``draw(image, answer) -> image`` (an adapter's ``draw``; None: the frames as
    decoded), into the H.264 MP4 at ``path``. The video's size is the first frame's (an odd width or height is
    padded by one edge pixel: yuv420p needs even ones; later frames of another size are scaled to it). Frame times
    are the stream's ``pts`` where the frames have one, else their capture times, both from the first frame, kept
    strictly increasing; ``fps`` instead spaces the frames evenly at that rate."""

    def __init__(self, path: str | os.PathLike, draw: Callable[[Any, Any], Any] | None = None, *,
                 fps: float | None = None, preset: str = "ultrafast", crf: int = 23) -> None:
        self.av = require("av")
        self.path = check_output(path, "MP4", ".mp4")
        if fps is not None and not fps > 0:
            raise BadOutputError(f"the MP4's frame rate {fps} is not above 0", hint="give e.g. fps=30, or None")
        self.name = f"MP4 {self.path}"
        self.draw, self.fps, self.preset, self.crf = draw, fps, preset, crf
        self.frames = 0
        self.size: tuple[int, int] | None = None  # the video's (width, height), set by the first frame
        self.temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        try:
            self.temp.touch()  # a folder this user cannot write is refused now, not at the first frame
        except OSError as exc:
            raise BadOutputError(f"cannot write the MP4 output beside '{self.path}': {exc.strerror}",
                                 hint="check the folder's permissions or write elsewhere") from exc
        self._state: dict = {"temp": str(self.temp)}
        # An unclosed sink (an exception that skipped close, the end of the interpreter) leaves no partial file.
        self._finalizer = weakref.finalize(self, _discard, self._state)
        self._stream = None
        self._first: tuple[float | None, float] | None = None  # (pts, captured) of the first frame
        self._first_size: tuple[int, int] | None = None
        self._use_pts = False
        self._last_ms = -1
        self._offset_ms = 0
        self._step_ms = 33

    def write(self, result: Result) -> None:
        if not self._finalizer.alive:
            raise SinkError(f"the MP4 output '{self.path}' is closed", hint="write before closing it")
        image = np.asarray(drawn(result, self.draw))
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise SinkError(f"a frame of shape {image.shape} {image.dtype} is not a BGR image",
                            hint="draw() must return an HxWx3 uint8 array")
        if self._stream is None:
            self._open(image.shape[1], image.shape[0], result)
        width, height = self.size
        if (image.shape[1], image.shape[0]) == self._first_size != self.size:  # odd: one edge row/column added
            image = np.pad(image, ((0, height - image.shape[0]), (0, width - image.shape[1]), (0, 0)), mode="edge")
        frame = self.av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
        if (frame.width, frame.height) != self.size:
            frame = frame.reformat(width=width, height=height)
        frame.pts = self._pts_ms(result)
        frame.time_base = TIME_BASE
        for packet in self._stream.encode(frame):
            self._state["container"].mux(packet)
        self.frames += 1

    def _open(self, width: int, height: int, result: Result) -> None:
        self._first_size = (width, height)
        self.size = (width + width % 2, height + height % 2)
        container = self.av.open(str(self.temp), "w", format="mp4", options={"movflags": "+faststart"})
        self._state["container"] = container
        stream = container.add_stream("libx264", rate=Fraction(self.fps or 30).limit_denominator(1001))
        stream.width, stream.height = self.size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = TIME_BASE
        stream.time_base = TIME_BASE
        stream.options = {"preset": self.preset, "crf": str(self.crf)}
        self._stream = stream
        frame = result.frame
        self._first = (frame.pts, frame.captured)
        self._use_pts = frame.pts is not None

    def _pts_ms(self, result: Result) -> int:
        frame = result.frame
        if self.fps is not None:
            ms = round(self.frames * 1000.0 / self.fps)
        elif self._use_pts and frame.pts is not None:
            ms = round((frame.pts - self._first[0]) * 1000.0)
        else:
            ms = round((frame.captured - self._first[1]) * 1000.0)
        ms += self._offset_ms
        if ms <= self._last_ms:
            if self._last_ms - ms > _REBASE_S * 1000:  # a new clock: go on one frame interval after the last frame
                self._offset_ms += self._last_ms + self._step_ms - ms
                ms = self._last_ms + self._step_ms
            else:  # two frames in one millisecond, or jitter: the muxer needs strictly increasing times
                ms = self._last_ms + 1
        elif self._last_ms >= 0:
            self._step_ms = ms - self._last_ms
        self._last_ms = ms
        return ms

    def close(self) -> None:
        """Finish the video and rename it into place; with no frame written, no file is made and SinkError says
        so. On any failure the temporary file is removed and the target left as it was."""
        if not self._finalizer.alive:
            return
        container = self._state.get("container")
        try:
            if container is None:
                raise SinkError(f"no frame reached the MP4 output '{self.path}', so it was not written",
                                hint="check that the source gave frames and the model answered them")
            for packet in self._stream.encode():  # the encoder's held frames
                container.mux(packet)
            container.close()
            del self._state["container"]
            os.replace(self.temp, self.path)
        except BaseException:
            self._finalizer()
            raise
        self._finalizer.detach()

    def abort(self) -> None:
        """Drop the video: the temporary file is removed and nothing is written at the target."""
        self._finalizer()
