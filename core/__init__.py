"""What every orinkit package shares: the error root, optional dependencies, atomic writes and CLI glue."""

from orinkit.core.errors import BrokenDependencyError, MissingExtraError, OrinkitError
from orinkit.core.version import __version__

__all__ = ["OrinkitError", "MissingExtraError", "BrokenDependencyError", "__version__"]
