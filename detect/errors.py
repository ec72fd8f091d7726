"""Errors of ``orinkit.detect``.

::

    DetectError                   detectors, images, labels or options that detection cannot use (exit 4)
    ├── DetectInputError          images, arrays or options of the wrong shape, type or range; also a ValueError
    ├── UnrecognizedHeadError     the graph's outputs fit no known head (or not the one asked for with head=)
    ├── UnsupportedTaskError      a segmentation, pose, OBB or classification model, refused by name
    └── LabelsError               a labels file or list that does not match the class count
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, OrinkitError


class DetectError(OrinkitError):
    exit_code = EXIT_BAD_INPUT


class DetectInputError(DetectError, ValueError):
    pass


class UnrecognizedHeadError(DetectError):
    pass


class UnsupportedTaskError(DetectError):
    pass


class LabelsError(DetectError):
    pass
