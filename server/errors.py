"""Errors of ``orinkit.server``: finding, starting and running a tritonserver.

::

    ServerError
    ├── TritonNotFoundError        no usable tritonserver installation (exit 3)
    │   └── PythonStubNotFoundError  the bundled server has no Python-backend stub for this Python (exit 3)
    ├── InvalidServerOptionError   an option value that cannot work (exit 4)
    │   ├── RepositoryNotFoundError  the model repository folder is missing (exit 4)
    │   └── RepositoryCheckError     models the server would refuse, found before it starts (exit 4)
    ├── PortInUseError             a port the server needs is taken (exit 5)
    └── ServerStartError           the server exited or did not become ready while starting (exit 6)
        └── ServerExitedError      a running server exited on its own (exit 6)
"""

from __future__ import annotations

from orinkit.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_BUSY,
    EXIT_MISSING,
    EXIT_SERVER,
    OrinkitError,
)


class ServerError(OrinkitError):
    """Base of every error about locating, starting or running tritonserver."""


class TritonNotFoundError(ServerError):
    exit_code = EXIT_MISSING


class PythonStubNotFoundError(TritonNotFoundError):
    pass


class InvalidServerOptionError(ServerError):
    exit_code = EXIT_BAD_INPUT


class RepositoryNotFoundError(InvalidServerOptionError):
    pass


class RepositoryCheckError(InvalidServerOptionError):
    pass


class PortInUseError(ServerError):
    exit_code = EXIT_BUSY

    def __init__(self, message: str, *, port: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.port = port


class ServerStartError(ServerError):
    """The server did not come up. ``log_tail`` holds the end of its log, which usually says why."""

    exit_code = EXIT_SERVER

    def __init__(self, message: str, *, log_tail: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.log_tail = log_tail


class ServerExitedError(ServerStartError):
    pass
