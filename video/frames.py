"""What flows through a video pipeline: decoded frames, and the answers the model gave for them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Frame:
    """One decoded picture. ``index`` counts every frame the source decoded (dropped ones too), from 0 after each
    open of a file and across reconnects of a live source; ``captured`` is the wall clock (``time.time()``) when
    the decoder handed it over, so it compares with a time a camera stamps into its pixels."""

    index: int
    image: np.ndarray  # HxWx3 uint8, BGR (cv2's order), already scaled to the size the pipeline asked for
    captured: float
    pts: float | None = None  # the stream's own timestamp in seconds, where the container has one
    source_size: tuple[int, int] | None = None  # (width, height) before scaling


@dataclass
class Result:
    """A frame and the model's answer, with the times it passed each stage (all ``time.time()``)."""

    source: str  # the source's name (its URI unless named)
    frame: Frame
    answer: Any  # what the model adapter made of the outputs (for lane_detection: a list of Lane)
    record: dict  # the answer as JSON (a JSON line's "answer")
    sent: float
    answered: float
    sunk: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def latency_s(self) -> float:
        """Capture to answer."""
        return self.answered - self.frame.captured
