"""Errors of ``orinkit.ui``, and the HTTP status each orinkit error is answered with.

::

    UiError
    ├── AddressInUseError  the page's address and port cannot be listened on (exit 5)
    ├── UnsafeBindError    a page that would be open to the network without a token, or control without a
    │                      repository (exit 4)
    ├── RequestError       a request the page server refuses; ``status`` is its HTTP status (exit 4)
    └── TryError           the "Try" panel cannot run the model on the upload (exit 4; orinkit.ui.tryout)
        ├── NotAnImageModelError   the model takes no image, or not in a way the panel can feed
        ├── BadImageError          not an image, damaged, or over the byte or pixel limit
        └── UnknownOutputError     a .npy download of an output the result does not hold (also a KeyError)

Every other :class:`OrinkitError` a request meets (the server, the model, the image) is answered with the status
:func:`http_status` picks from its exit code, and the same message and hint the command-line tools print.
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_BUSY, EXIT_MISSING, EXIT_SERVER, OrinkitError


class UiError(OrinkitError):
    exit_code = EXIT_BAD_INPUT


class UnsafeBindError(UiError):
    pass


class AddressInUseError(UiError):
    exit_code = EXIT_BUSY


class RequestError(UiError):
    def __init__(self, status: int, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


def http_status(error: Exception) -> int:
    """The HTTP status for an error met while answering a request."""
    if isinstance(error, RequestError):
        return error.status
    if not isinstance(error, OrinkitError):
        return 500
    if type(error).__name__ == "ModelNotFoundError":  # the client's class; named so that this stays import-free
        return 404
    return {EXIT_BAD_INPUT: 400, EXIT_BUSY: 409, EXIT_SERVER: 502, EXIT_MISSING: 500}.get(error.exit_code, 500)


def error_body(error: Exception) -> dict:
    """``{"error": {type, message, hint, exit_code}}``: what the page shows. Anything that is not an orinkit error
    is a bug of the page server: its text stays in the server's log, never in a response."""
    if isinstance(error, OrinkitError):
        return {"error": {"type": type(error).__name__, "message": error.message, "hint": error.hint,
                          "exit_code": error.exit_code}}
    return {"error": {"type": "InternalError", "message": "the page server failed on this request",
                      "hint": "its log says why", "exit_code": 1}}
