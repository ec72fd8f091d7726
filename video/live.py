"""The live view: the newest answered frame, drawn, as JPEG for an MJPEG stream, and the newest figures of the
pipeline, for the device page (``orinkit.ui`` serves them at ``/live.mjpg`` and ``/api/live``).

A viewer never slows the pipeline: ``write`` only keeps a reference to the drawn frame; a viewer's thread encodes it
(once, whoever asks first) when it wants it, and a slow viewer simply skips to the newest frame.
"""

from __future__ import annotations

import io
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from orinkit.core.optional import require
from orinkit.video.frames import Result
from orinkit.video.sinks import BadOutputError, Sink, drawn

BOUNDARY = "orinkit-frame"
_WAKE_S = 0.5  # how often a waiting reader looks whether it should stop


def _json_safe(value):
    """The snapshot as the page can parse it: NaN and infinities (no answer yet) as null, tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalars
        return _json_safe(value.tolist())
    return value


class LiveView(Sink):
    """A sink holding the newest frame (drawn by ``draw(image, answer)``, an adapter's ``draw``; None: as decoded)
    and the newest statistics snapshot. Thread-safe: one pipeline thread writes, any number of page threads read
    with :meth:`jpeg`, :meth:`frames` and :meth:`status`."""

    name = "live view"

    def __init__(self, quality: int = 80, draw: Callable[[Any, Any], Any] | None = None) -> None:
        if not 1 <= quality <= 95:
            raise BadOutputError(f"the live view's JPEG quality {quality} is outside 1..95", hint="e.g. 80")
        self.quality, self.draw = quality, draw
        self._image = require("PIL.Image")
        self._changed = threading.Condition()
        self._frame: np.ndarray | None = None
        self._meta: dict = {}
        self._sequence = 0  # frames written so far; a reader waits for a higher number than it has sent
        self._jpeg: tuple[int, bytes] | None = None
        self._encode = threading.Lock()
        self._stats: dict | None = None
        self._closed = False

    def write(self, result: Result) -> None:
        image = drawn(result, self.draw)
        with self._changed:
            self._frame = image
            self._meta = {"source": result.source, "frame": result.frame.index, "captured": result.frame.captured,
                          "latency_ms": round(result.latency_s * 1000.0, 1), **_tally(result.record)}
            self._sequence += 1
            self._changed.notify_all()

    def stats(self, snapshot: dict) -> None:
        safe = _json_safe(snapshot)
        with self._changed:
            self._stats = safe

    def close(self) -> None:
        """Readers' streams end; the last frame and figures stay readable."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def jpeg(self) -> tuple[int, bytes | None]:
        """``(sequence, JPEG bytes)`` of the newest frame; ``(0, None)`` before the first."""
        with self._changed:
            sequence, image = self._sequence, self._frame
        if image is None:
            return 0, None
        with self._encode:  # several viewers of one frame: one encoding
            if self._jpeg is None or self._jpeg[0] < sequence:
                self._jpeg = (sequence, self._encode_jpeg(image))
            return self._jpeg

    def _encode_jpeg(self, image: np.ndarray) -> bytes:
        rgb = np.ascontiguousarray(image[..., ::-1])  # BGR (cv2's order) to Pillow's RGB
        buffer = io.BytesIO()
        self._image.fromarray(rgb, "RGB").save(buffer, "JPEG", quality=self.quality)
        return buffer.getvalue()

    def frames(self, stop: threading.Event | None = None, after: int = 0) -> Iterator[bytes]:
        """JPEG of each new frame as it comes (the newest one at once, if there is one newer than ``after``),
        skipping those written while the reader was busy; ends when the view is closed or ``stop`` is set."""
        sent = after
        while True:
            with self._changed:
                while self._sequence <= sent and not self._closed and not (stop is not None and stop.is_set()):
                    self._changed.wait(_WAKE_S)
                if self._closed or (stop is not None and stop.is_set()):
                    return
            sent, data = self.jpeg()
            if data is not None:
                yield data

    def status(self) -> dict:
        """What ``/api/live`` answers: the view's newest frame (its source, index, latency, when) and the
        pipeline's newest snapshot (``fps``, ``latency_ms`` {p50, p95, p99}, ``read``, ``answered``,
        ``dropped``, ``sources``), JSON-safe."""
        with self._changed:
            frame = self._frame
            return {
                "live": True,
                "closed": self._closed,
                "frames": self._sequence,
                "size": [int(frame.shape[1]), int(frame.shape[0])] if frame is not None else None,
                "last": dict(self._meta) or None,
                "age_s": round(time.time() - self._meta["captured"], 3) if self._meta else None,
                "stats": self._stats,
            }


def _tally(record) -> dict:
    """Objects in a frame's JSON record, for the page's live line: ``count``, and ``classes`` (name -> boxes) when
    the record lists ``detections`` (orinkit's record of a detector's frame, the JSON lines' format)."""
    count = record.get("count") if isinstance(record, dict) else None
    if isinstance(count, bool) or not isinstance(count, int):
        return {}
    classes: dict[str, int] = {}
    for found in record.get("detections") or ():
        if isinstance(found, dict) and found.get("class") is not None:
            classes[str(found["class"])] = classes.get(str(found["class"]), 0) + 1
    return {"count": record["count"], "classes": classes}
