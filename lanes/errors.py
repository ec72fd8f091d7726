"""Errors of ``orinkit.lanes``.

::

    LaneError                 lanes, images, options or outputs that lane detection cannot use (exit 4)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, OrinkitError


class LaneError(OrinkitError):
    exit_code = EXIT_BAD_INPUT
