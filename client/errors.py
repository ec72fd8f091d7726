"""Errors of ``orinkit.client``: tritonclient's single exception, mapped by gRPC status code and chained.

::

    ClientError
    ├── ServerUnavailableError   no connection (wrong port, server down, TLS mismatch) after the retries (exit 6)
    ├── DeadlineExceededError    the call took longer than its timeout (exit 6)
    ├── ModelNotFoundError       the server has no such model or version (exit 4)
    ├── ModelNotReadyError       the model exists but did not become ready in time (exit 6)
    ├── InvalidInputError        a dtype, shape, name or count the model does not take (exit 4)
    ├── InferenceFailedError     the server ran the request and the model failed (exit 6)
    ├── SharedMemoryError        shared memory could not be set up or was refused by the server (exit 6)
    └── ClientClosedError        the client was used after close() (exit 1)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_SERVER, OrinkitError


class ClientError(OrinkitError):
    exit_code = EXIT_SERVER


class ServerUnavailableError(ClientError):
    pass


class DeadlineExceededError(ClientError):
    pass


class ModelNotFoundError(ClientError):
    exit_code = EXIT_BAD_INPUT


class ModelNotReadyError(ClientError):
    pass


class InvalidInputError(ClientError):
    """``expected`` and ``given`` hold what the model takes and what the call passed (dtype or shape)."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, expected=None, given=None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.expected = expected
        self.given = given


class InferenceFailedError(ClientError):
    pass


class SharedMemoryError(ClientError):
    pass


class ClientClosedError(ClientError):
    exit_code = 1


def map_exception(exc, *, url: str, model: str | None = None) -> ClientError:
    """The most specific ClientError for a tritonclient InferenceServerException (the caller chains it)."""
    status = exc.status() or ""
    message = exc.message() or str(exc)
    if status.endswith("UNAVAILABLE"):
        return ServerUnavailableError(
            f"cannot reach the server at {url}: {message}",
            hint="is tritonserver running there, on its gRPC port (8001 by default, not HTTP's 8000), "
                 "with matching TLS settings?",
        )
    if status.endswith("DEADLINE_EXCEEDED"):
        return DeadlineExceededError(f"the call to {url} took longer than its timeout",
                                     hint="raise timeout_s, or look at the server's load")
    if status.endswith("NOT_FOUND") or "unknown model" in message:
        return ModelNotFoundError(f"{message}", hint="check the model name and version (edge-repo status)")
    if "shared memory" in message.lower() or "shm" in message.lower():
        return SharedMemoryError(
            f"the server refused client shared memory: {message}",
            hint="start tritonserver with --allow-client-shm=true (Triton 2.69+), or use shared_memory=None",
        )
    if status.endswith("INVALID_ARGUMENT"):
        return InvalidInputError(message, hint="match the model's inputs (client.inputs lists them)")
    return InferenceFailedError(f"the server failed the request for '{model}': {message}",
                                hint="the server log has the model's own error")
