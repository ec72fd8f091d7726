"""Errors of ``orinkit.lanes``.

::

    LaneError                     lanes, images, options or outputs that lane detection cannot use (exit 4)
    ├── LaneInputError            proposals, anchors, sizes or options of the wrong shape or range (exit 4);
    │                             also a ValueError, as numpy code expects
    ├── CheckpointMismatchError   a checkpoint that does not fit the model built (exit 4)
    ├── DatasetError              a lane dataset that cannot be read: an unknown kind, a missing list, label or
    │                             image, a malformed line (exit 4)
    └── MissingWeightsError       trained weights asked for where none ship (exit 3)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_MISSING, OrinkitError


class LaneError(OrinkitError):
    exit_code = EXIT_BAD_INPUT


class LaneInputError(LaneError, ValueError):
    pass


class CheckpointMismatchError(LaneError):
    pass


class DatasetError(LaneError):
    """A lane dataset (CULane, TuSimple, CurveLanes, a folder of frames) that cannot be read as its kind."""


class MissingWeightsError(LaneError):
    """Trained weights were asked for and none are here."""

    exit_code = EXIT_MISSING
