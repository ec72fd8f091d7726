"""Errors of ``orinkit.formats``.

::

    FormatError               a dtype, tensor spec or manifest that cannot be read or used (exit 4)
    └── ManifestError         a plan's manifest that is missing, unreadable or malformed (exit 4)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, OrinkitError


class FormatError(OrinkitError):
    exit_code = EXIT_BAD_INPUT


class ManifestError(FormatError):
    pass
