"""What every orinkit package shares: the error root and every exit code, optional imports that name their extra,
atomic writes, child-process isolation, signals, /proc process helpers and latency statistics."""

from orinkit.core.errors import (
    EXIT_ACCURACY,
    EXIT_BAD_INPUT,
    EXIT_BUDGET,
    EXIT_BUSY,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_MISSING,
    EXIT_SERVER,
    EXIT_STALE,
    EXIT_USAGE,
    BrokenDependencyError,
    MissingExtraError,
    OrinkitError,
)
from orinkit.core.version import __version__

__all__ = [
    "EXIT_ACCURACY",
    "EXIT_BAD_INPUT",
    "EXIT_BUSY",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_MISSING",
    "EXIT_SERVER",
    "EXIT_STALE",
    "EXIT_BUDGET",
    "EXIT_USAGE",
    "BrokenDependencyError",
    "MissingExtraError",
    "OrinkitError",
    "__version__",
]
