"""The responses of one request to a decoupled model, as they arrive, over a gRPC bidirectional stream.

tritonclient runs one stream per InferenceServerClient and its start/stop are not thread-safe, so each call
opens its own connection for its stream and closes it at the end: streams from several threads never share one.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator

from orinkit.client.errors import DeadlineExceededError, map_exception

# The response parameter the server sets, with enable_empty_final_response, on the last response of a request.
FINAL = "triton_final_response"


def is_final(result) -> bool:
    parameters = result.get_response().parameters
    return FINAL in parameters and parameters[FINAL].bool_param


class _Attempt:
    """One stream on its own connection, the queue its callback fills, and a stop that leaves no thread behind."""

    def __init__(self, connection) -> None:
        self.connection = connection
        self.received: queue.Queue = queue.Queue()

    def _callback(self, result, error) -> None:
        self.received.put((result, error))

    def start(self, client, grpc_inputs, requested, seconds_left: float | None) -> None:
        from tritonclient.utils import InferenceServerException

        # stream_timeout is the gRPC deadline: the server cancels the request too when it passes.
        self.connection.start_stream(self._callback, stream_timeout=seconds_left,
                                     compression_algorithm=client.compression)
        try:
            self.connection.async_stream_infer(client.model, grpc_inputs, model_version=client.version or "",
                                               outputs=requested, enable_empty_final_response=True)
        except InferenceServerException as exc:
            # The stream died before the request was queued (no server yet); the callback holds the real error,
            # with its gRPC status, and is about to be called if it has not been.
            try:
                self.received.put(self.received.get(timeout=1.0))
            except queue.Empty:
                self.received.put((None, exc))

    def next(self, deadline: float | None):
        """The next (result, error) from the server; queue.Empty when the deadline passes first."""
        if deadline is None:
            return self.received.get()
        left = deadline - time.monotonic()
        if left <= 0:
            raise queue.Empty
        return self.received.get(timeout=left)

    def stop(self) -> None:
        stream = getattr(self.connection, "_stream", None)
        try:
            # Cancelling also tells the model (response_sender.is_cancelled()) to stop producing.
            self.connection.stop_stream(cancel_requests=True)
        finally:
            # After a cancel tritonclient never ends its request iterator, so gRPC's thread reading it would wait
            # on that queue for good: end it.
            requests = getattr(stream, "_request_queue", None)
            if requests is not None:
                requests.put(None)
            try:
                self.connection.close()
            except Exception:  # noqa: BLE001 - a connection to a dead server must not mask the caller's error
                pass


def _values(result, wanted: list[str], single: bool):
    """What the response holds of the wanted outputs, as ``__call__`` returns them; None when it holds none."""
    present = {output.name for output in result.get_response().outputs}
    values = {name: result.as_numpy(name) for name in wanted if name in present}
    if not values:
        return None
    if single:
        values = {name: value[0] for name, value in values.items()}
    return values[wanted[0]] if len(wanted) == 1 else values


def responses(client, build_request, wanted: list[str], single: bool, timeout_s: float | None) -> Iterator:
    """Yield each response's outputs until the final one; ``build_request()`` gives (inputs, requested outputs).

    The deadline covers the whole stream, counted from the first ``next``. UNAVAILABLE before the first response
    is retried like a plain call (nothing was answered yet, so nothing is repeated); later it is raised.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    current: list[_Attempt] = []  # the attempt that answered, stopped when the iteration ends

    def expired() -> DeadlineExceededError:
        return DeadlineExceededError(f"the stream from '{client.model}' at {client.url} took longer than its "
                                     f"{timeout_s:g} s", hint="raise timeout_s (Client's or stream()'s), or look "
                                                             "at the model's pace")

    def first(left: float | None):
        attempt = _Attempt(client._connect())
        try:
            attempt.start(client, *build_request(), left)
            result, error = attempt.next(deadline)
        except queue.Empty:
            attempt.stop()
            raise expired() from None
        except BaseException:
            attempt.stop()
            raise
        if error is not None:
            attempt.stop()
            if isinstance(map_exception(error, url=client.url, model=client.model), DeadlineExceededError):
                raise expired() from error
            raise error  # _with_retry maps it, and retries UNAVAILABLE
        current.append(attempt)
        return result

    try:
        result = client._with_retry(first, deadline, budget_s=timeout_s)
        while True:
            values = _values(result, wanted, single)
            if values is not None:
                yield values
            if is_final(result):
                return
            try:
                result, error = current[-1].next(deadline)
            except queue.Empty:
                raise expired() from None
            if error is not None:
                mapped = map_exception(error, url=client.url, model=client.model)
                if isinstance(mapped, DeadlineExceededError):
                    raise expired() from error
                raise mapped from error
    finally:
        for attempt in current:
            attempt.stop()
