"""Errors of ``orinkit.client``: tritonclient's single exception, mapped by gRPC status code and chained.

::

    ClientError
    ├── ServerUnavailableError   no connection (wrong port, server down, TLS mismatch) after the retries (exit 6)
    ├── DeadlineExceededError    the call took longer than its timeout (exit 6)
    ├── ModelNotFoundError       the server has no such model or version (exit 4)
    ├── ModelNotReadyError       the model exists but did not become ready in time (exit 6)
    │   └── ModelNotLoadedError  the server's repository has it, but it is not loaded and nothing loads it (exit 6)
    ├── InvalidInputError        a dtype, shape, name or count the model does not take (exit 4)
    │   ├── DecoupledModelError  a plain call to a decoupled model, which answers only over stream() (exit 4)
    │   └── SequenceError        a stateful call outside its sequence, or sequence() on a model without one (exit 4)
    ├── InferenceFailedError     the server ran the request and the model failed (exit 6)
    ├── SharedMemoryError        shared memory could not be set up or was refused by the server (exit 6)
    │   └── SharedMemoryRegionLostError   the server no longer knows a region (it restarted); re-registered
    ├── BenchError               every request of a benchmark level failed (exit 6)
    └── ClientClosedError        the client was used after close() (exit 1)

gRPC's status code decides first; the server's message only separates causes that share a code (a region the
server forgot and a model it does not know are both NOT_FOUND).
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_SERVER, OrinkitError


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


class ModelNotLoadedError(ModelNotReadyError):
    """Raised at once, not after the ready wait: the server's repository index says the model is there but no
    version is loaded or loading (explicit model control before ``load``, after ``unload``, or a failed load)."""


class InvalidInputError(ClientError):
    """``expected`` and ``given`` hold what the model takes and what the call passed (dtype or shape)."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, *, expected=None, given=None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.expected = expected
        self.given = given


class DecoupledModelError(InvalidInputError):
    pass


class SequenceError(InvalidInputError):
    pass


class InferenceFailedError(ClientError):
    pass


class SharedMemoryError(ClientError):
    pass


class SharedMemoryRegionLostError(SharedMemoryError):
    pass


class BenchError(ClientError):
    """``report`` holds what was measured up to the level that failed."""

    def __init__(self, message: str, *, hint: str | None = None, report=None) -> None:
        super().__init__(message, hint=hint)
        self.report = report


class ClientClosedError(ClientError):
    exit_code = EXIT_ERROR


def _unavailable(url, model, message):
    return ServerUnavailableError(
        f"cannot reach the server at {url}: {message}",
        hint="is tritonserver running there, on its gRPC port (8001 by default, not HTTP's 8000), with matching "
             "TLS settings?")


def _deadline(url, model, message):
    return DeadlineExceededError(f"the call to {url} took longer than its timeout ({message})",
                                 hint="raise timeout_s, or look at the server's load")


def _not_found(url, model, message):
    if "shared memory region" in message.lower():
        return SharedMemoryRegionLostError(f"the server at {url} no longer knows a shared memory region: {message}",
                                           hint="it restarted; the client registers its regions again")
    if "no available versions" in message:
        # The model is known but has no version loaded: the server is stopping, or the model is being reloaded.
        return ModelNotReadyError(f"'{model}' has no version loaded on {url}: {message}",
                                  hint="edge-repo status shows its state; it is loaded again, or the call fails at "
                                       "its deadline")
    return _unknown_model(message)


def _unknown_model(message):
    return ModelNotFoundError(message, hint="check the model name and version (edge-repo status)")


def _invalid(url, model, message):
    if "shared memory" in message.lower():
        return _shm_refused(url, model, message)
    if "must specify the START flag" in message:
        # Never started, already ended, idle past the sequence batcher's limit, or lost in a server restart.
        return SequenceError(message, hint="a sequence's first request carries start: begin a new one with "
                                           "client.sequence(); the server also drops a sequence left idle longer "
                                           "than its max_sequence_idle_microseconds (1 s by default)")
    if "correlation ID" in message:
        return SequenceError(message, hint=f"'{model}' is stateful: call it through client.sequence()")
    return InvalidInputError(message, hint="the server refused this input's data or shape (client.inputs lists what "
                                           "the model takes)")


def _shm_refused(url, model, message):
    return SharedMemoryError(f"the server refused client shared memory: {message}",
                             hint="start tritonserver with --allow-client-shm=true (Triton 2.69+), or use "
                                  "shared_memory=None")


def _too_large(url, model, message):
    return InvalidInputError(f"the request or its answer is too large for gRPC: {message}",
                             hint="send smaller batches or encoded images, or use shared_memory='system'")


def _failed(url, model, message):
    if "unknown model" in message:
        return _unknown_model(message)
    if "shared memory" in message.lower():
        return _shm_refused(url, model, message)
    from orinkit.client.server_text import one_line

    # A Python model's exception arrives after Triton's words and with its stack over many lines: one line, the
    # exception first, the rest in parentheses.
    return InferenceFailedError(one_line(f"the server failed the request for '{model}': {message}"),
                                hint="the server log has the model's own error")


# gRPC status → the error it means (httpx's pattern: one table, most specific class per cause).
_BY_STATUS = {
    "UNAVAILABLE": _unavailable,
    "DEADLINE_EXCEEDED": _deadline,
    "NOT_FOUND": _not_found,
    "INVALID_ARGUMENT": _invalid,
    "RESOURCE_EXHAUSTED": _too_large,
}


def unready_model_error(index: list[dict], *, url: str, model: str, version: str = "") -> ClientError | None:
    """Why ``model`` (``version``, or any) is not ready, read from the server's repository index (tritonclient's
    ``get_model_repository_index(as_json=True)["models"]``): the error to raise at once, or None while waiting can
    help (a version is loading, or became ready since the probe)."""
    entries = [m for m in index if m.get("name") == model]
    if not entries:
        names = sorted({str(m.get("name")) for m in index})
        return ModelNotFoundError(
            f"unknown model: '{model}' is not in the repository of the server at {url}",
            hint=f"its models: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}" if names
            else "its repository is empty: check the server's --model-repository")
    served = [m for m in entries if not version or m.get("version") == version]
    states = {m.get("state") or "" for m in served}
    if states & {"LOADING", "READY"}:
        return None
    load = f"edge-repo load {model} --repo REPOSITORY --url {url}"
    versions = ", ".join(f"{m['version']} {m.get('state') or 'not loaded'}" for m in entries if m.get("version"))
    if version and not served and versions:
        return ModelNotFoundError(f"unknown model: '{model}' version {version} is not served by {url} (its "
                                  f"versions: {versions})", hint=f"use a version it serves, or load this one: {load}")
    failed = [m["reason"] for m in served if m.get("reason") and m["reason"] != "unloaded"]
    if failed:
        return ModelNotLoadedError(f"'{model}' failed to load on the server at {url}: {failed[0]}",
                                   hint=f"fix it (edge-repo check REPOSITORY; the server's log has the details), "
                                        f"then load it again: {load}, or restart the server")
    state = ", ".join(dict.fromkeys((m.get("state") or "never loaded") + (f": {m['reason']}" if m.get("reason")
                                                                        else "") for m in served)) or "never loaded"
    return ModelNotLoadedError(
        f"'{model}'{f' version {version}' if version else ''} is in the repository of the server at {url} but not "
        f"loaded ({state})", hint=f"load it: {load} (the server runs with --model-control-mode explicit)")


def decoupled_error(model) -> DecoupledModelError:
    return DecoupledModelError(f"'{model}' is decoupled (it may send any number of responses per request), so it "
                               "answers only over a stream", hint="iterate over client.stream(...) instead")


def map_exception(exc, *, url: str, model: str | None = None) -> ClientError:
    """The most specific ClientError for a tritonclient InferenceServerException (the caller chains it).

    Errors a model sends inside a stream carry no status (tritonclient builds them from the message alone):
    they are the model's failures, InferenceFailedError."""
    status = (exc.status() or "").rpartition(".")[2]
    message = exc.message() or str(exc)
    if "decoupled transaction policy" in message:
        return decoupled_error(model)
    return _BY_STATUS.get(status, _failed)(url, model, message)
