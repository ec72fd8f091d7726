"""The client class users embed: ``Client(url, model)(*arrays)`` runs inference."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from orinkit.client import sequence as sequences
from orinkit.client.channel import TLS, connect
from orinkit.client.errors import (
    ClientClosedError,
    ClientError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotFoundError,
    ModelNotReadyError,
    SequenceError,
    ServerUnavailableError,
    SharedMemoryRegionLostError,
    decoupled_error,
    map_exception,
    unready_model_error,
)
from orinkit.client.model import KNOWN_SIGNATURES, ModelInfo, passed_unchanged, prepare_inputs, signature
from orinkit.client.plan import Plan, sizes
from orinkit.client.plan import grpc_inputs as inputs_for
from orinkit.client.pool import Throughput
from orinkit.client.retry import Retry

COMPRESSION = (None, "gzip", "deflate")


# Requests above this are refused before sending: the server copies every request into the Python backend's
# shared memory, which grows for good (a 200 MB request took a server from 214 MB to 933 MB); on an 8 GB Orin that
# memory is the GPU's too. A batch of eight 1080p FP32 frames is 200 MB; encoded images are a few hundred kB.
DEFAULT_MAX_REQUEST_BYTES = 64 << 20
# Without a deadline, UNAVAILABLE is retried this many times (about 4 s with the default backoff).
ATTEMPTS_WITHOUT_DEADLINE = 8
# While the server is away or not ready it is probed this often, and at once when the connection changes.
PROBE_INTERVAL_S = 0.05
# A model that is loading is asked about again this often while a client waits for it.
MODEL_POLL_S = 0.2


class Client(Throughput):
    """A gRPC client for one model on a Triton server.

    ``client(*arrays, **named)`` sends positional inputs in the model config's order, or by name; dtypes and
    shapes are checked first (safe casts such as float64 → FP32 are made, unsafe ones refused). For a model that
    batches, ``infer_sample`` adds and removes the batch axis, ``infer_batch`` takes it as given, and
    ``__call__`` reads which from the shapes, refusing a shape that fits both. One output comes back as an array,
    several as a dict by name; ``outputs=`` selects some.

    A BYTES input (an ensemble's encoded image) takes the bytes themselves: ``client(jpeg_bytes)`` is one sample
    where the input takes one item per sample (dims [1] or [-1]); a list of them, ``client([jpeg1, jpeg2])``, is a
    batch for dims [1] (``infer_batch`` for a batch of one, or for dims [-1]).

    Thread safety: ``__call__``, ``submit`` and ``map`` may be called from several threads at once (with
    ``shared_memory="system"`` calls through the one region pair take turns). ``close`` is for one thread, after
    the others are done; a closed client raises ClientClosedError.
    """

    def __init__(
        self,
        url: str = "localhost:8001",
        model: str = "",
        version: str | None = None,
        *,
        ssl: bool = False,
        root_certificates: str | None = None,
        private_key: str | None = None,
        certificate_chain: str | None = None,
        insecure: bool = False,
        timeout_s: float | None = 30.0,
        ready_timeout_s: float = 30.0,
        retry: Retry = Retry(),
        keepalive=None,
        compression: str | None = None,
        channel_options: Sequence[tuple[str, object]] = (),
        shared_memory: str | None = None,
        outputs: Sequence[str] | None = None,
        max_request_bytes: int | None = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        if not model:
            raise InvalidInputError("Client needs a model name", hint="Client(url, model='...')")
        if compression not in COMPRESSION:
            raise InvalidInputError(f"compression '{compression}' is unknown", hint="use None, 'gzip' or 'deflate'")
        if shared_memory not in (None, "system"):
            raise InvalidInputError(f"shared_memory '{shared_memory}' is unknown",
                                    hint="use 'system' (CUDA shared memory does not exist on Jetson) or None")
        if timeout_s is not None and not timeout_s > 0:
            raise InvalidInputError(f"timeout_s {timeout_s} is not above 0", hint="e.g. 30, or None for no deadline")
        self.max_request_bytes = max_request_bytes
        self.url, self.model, self.version = url, model, version
        self.timeout_s, self.ready_timeout_s, self.retry = timeout_s, ready_timeout_s, retry
        self.compression, self.shared_memory = compression, shared_memory
        self.default_outputs = tuple(outputs) if outputs else None
        self._tls = TLS(root_certificates, private_key, certificate_chain, insecure) if ssl or insecure else None
        self._keepalive, self._channel_options = keepalive, tuple(channel_options)
        self._grpc = connect(url, tls=self._tls, keepalive=keepalive, channel_options=channel_options)
        self._info: ModelInfo | None = None
        self._known: dict[tuple, Plan] = {}  # per input signature that passed prepare_inputs unchanged
        self._shm = None
        self._init_lock = threading.Lock()
        self._shm_lock = threading.Lock()
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None
        self._workers: list[Client] = []
        self._local = threading.local()

    # --- what the model is ---------------------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        """The model's inputs, outputs and batch limit, read once (waiting up to ``ready_timeout_s`` for the model
        to be ready; a call waits only within its own deadline)."""
        return self._ready_info(None)

    def _ready_info(self, deadline: float | None) -> ModelInfo:
        self._check_open()
        if self._info is None:
            with self._init_lock:
                if self._info is None:
                    self._info = self._load_info(deadline)
                    if self.shared_memory == "system":
                        from orinkit.client.shm import SharedMemoryIO

                        self._shm = SharedMemoryIO(self._grpc, self._info)
        return self._info

    @property
    def inputs(self):
        return self.info.inputs

    @property
    def outputs(self):
        return self.info.outputs

    def _load_info(self, call_deadline: float | None) -> ModelInfo:
        """Wait for the model to be ready, within the call's deadline when there is one (a call never outlives
        ``timeout_s``, its first included) and ``ready_timeout_s`` at most; a model that waiting cannot help (not
        in the server's repository, or there but not loaded) fails at once."""
        ready_deadline = time.monotonic() + self.ready_timeout_s
        if call_deadline is not None and call_deadline <= ready_deadline:
            deadline, budget, span = call_deadline, self.timeout_s, "of the call"
        else:
            deadline, budget, span = ready_deadline, self.ready_timeout_s, "of the wait for its model (ready_timeout_s)"
        version = self.version or ""
        while True:
            if self._with_retry(lambda left: self._grpc.is_model_ready(self.model, version, client_timeout=left),
                                deadline, budget_s=budget, span=span):
                break
            self._raise_if_waiting_cannot_help(version, deadline)
            time.sleep(max(0.0, min(MODEL_POLL_S, deadline - time.monotonic())))
            if time.monotonic() >= deadline:
                raise ModelNotReadyError(f"'{self.model}' was still loading on {self.url} at the end of the "
                                         f"{budget:g} s {span}", hint="edge-repo status shows its state; give it "
                                         "more time (timeout_s, ready_timeout_s) if it loads slowly")
        config = self._with_retry(lambda left: self._grpc.get_model_config(self.model, version, as_json=True,
                                                                         client_timeout=left),
                                  deadline, budget_s=budget, span=span)
        return ModelInfo.from_config(config["config"], self.version)

    def _raise_if_waiting_cannot_help(self, version: str, deadline: float) -> None:
        """The server's repository index says whether the model exists and whether it is loading; a model
        unknown, or known but not loaded, fails at once, one still loading is waited for."""
        from tritonclient.utils import InferenceServerException

        left = max(0.01, deadline - time.monotonic())
        try:
            index = self._grpc.get_model_repository_index(as_json=True, client_timeout=left)
        except InferenceServerException:
            # Gone again (the next probe retries it), or the index refused: a server restricting its repository
            # API says UNAVAILABLE too. The metadata still tells an unknown model from one on its way.
            try:
                self._grpc.get_model_metadata(self.model, version, client_timeout=left)
            except InferenceServerException as inner:
                error = map_exception(inner, url=self.url, model=self.model)
                if isinstance(error, ModelNotFoundError):
                    raise error from inner
            return
        error = unready_model_error(index.get("models", []), url=self.url, model=self.model, version=version)
        if error is not None:
            raise error

    # --- calls ---------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(f"this client for '{self.model}' is closed", hint="make a new Client")

    def _deadline(self) -> float | None:
        return None if self.timeout_s is None else time.monotonic() + self.timeout_s

    def _with_retry(self, call, deadline: float | None, *, region_lost=None, attempts: int | None = None,
                    budget_s: float | None = None, span: str = "of the call", failed: Exception | None = None):
        """``call(seconds_left)`` until it succeeds, retrying UNAVAILABLE (and, with ``region_lost``, a shared
        memory region the server forgot) until ``deadline``; the most specific ClientError otherwise.
        ``attempts`` overrides the retry policy's cap; ``budget_s`` is the deadline's length when it is not the
        client's timeout_s (a stream's own), and ``span`` what it bounds, for the messages. ``failed``: the
        InferenceServerException of a first attempt the caller made itself."""
        from tritonclient.utils import InferenceServerException

        delay = self.retry.backoff_s
        budget = self.timeout_s if budget_s is None else budget_s
        cap = attempts or self.retry.attempts or (ATTEMPTS_WITHOUT_DEADLINE if deadline is None else None)
        attempt, last, reregistered = 0 if failed is None else 1, None, 0
        while True:
            if failed is None:
                self._check_open()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    if isinstance(last, ModelNotReadyError):
                        raise ModelNotReadyError(f"{last.message} (for the whole {budget:g} s {span})",
                                                 hint=last.hint) from last.__cause__
                    if isinstance(last, ServerUnavailableError):
                        raise ServerUnavailableError(
                            f"the server at {self.url} was unreachable for the whole {budget:g} s {span}: "
                            f"{last.message}", hint=last.hint) from last.__cause__
                    raise DeadlineExceededError(f"{self.url} did not answer within the {budget:g} s {span}",
                                                hint="raise timeout_s, or look at the server's load") from last
                attempt += 1
                try:
                    return call(left)
                except InferenceServerException as exc:
                    failed = exc
            exc, failed = failed, None
            error = map_exception(exc, url=self.url, model=self.model)
            error.__cause__ = exc
            recoverable = isinstance(error, (ServerUnavailableError, ModelNotReadyError)) or (
                region_lost is not None and isinstance(error, SharedMemoryRegionLostError) and reregistered < 3)
            if not recoverable or (cap is not None and attempt >= cap):
                raise error from exc
            last = error
            if isinstance(last, SharedMemoryRegionLostError):
                reregistered += 1
                region_lost()
                continue
            self._wait_ready(delay if deadline is None else min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, self.retry.max_backoff_s)

    def _wait_ready(self, seconds: float) -> None:
        """Wait up to ``seconds``, returning as soon as the server reports ready. Between probes it waits on the
        channel's connectivity: gRPC reconnects the moment its backoff allows and says so, and the probe follows
        at once instead of at the next poll."""
        deadline = time.monotonic() + seconds
        changed = threading.Event()

        def on_change(_state) -> None:
            changed.set()

        # try_to_connect=False: with True, grpcio's watcher thread may touch the channel after close() and print
        # "Channel closed!" from a thread of its own. The probes ask it to connect instead.
        channel = getattr(self._grpc, "_channel", None)
        if channel is not None:
            channel.subscribe(on_change, try_to_connect=False)
        try:
            while (left := deadline - time.monotonic()) > 0:
                changed.clear()
                try:
                    if self._grpc.is_server_ready(client_timeout=max(0.05, left)):
                        return
                except Exception:  # noqa: BLE001 - still down: keep waiting until the backoff ends
                    pass
                changed.wait(min(PROBE_INTERVAL_S, max(0.0, deadline - time.monotonic())))
        finally:
            if channel is not None:
                channel.unsubscribe(on_change)

    def __call__(self, *arrays, outputs: Sequence[str] | None = None, **named):
        """Run inference on one sample or a batch, read from the shapes; a shape that reads both ways (a model
        whose per-sample dims start with -1) raises InvalidInputError: use ``infer_sample`` or ``infer_batch``."""
        return self._call(arrays, named, outputs, "auto")

    def infer_sample(self, *arrays, outputs: Sequence[str] | None = None, **named):
        """Run inference on one sample (no batch axis); results come back without a batch axis."""
        return self._call(arrays, named, outputs, "sample")

    def infer_batch(self, *arrays, outputs: Sequence[str] | None = None, **named):
        """Run inference on a batch (leading axis, 1 to the model's max_batch_size); results keep the batch axis.
        A model that does not batch refuses it."""
        return self._call(arrays, named, outputs, "batch")

    def _call(self, arrays: Sequence, named: dict, outputs: Sequence[str] | None, form: str):
        if outputs is None and not named and (plan := self._known.get(signature(arrays, form))) is not None:
            return self._run_planned(plan, arrays)
        return self._run(arrays, named, outputs, form)

    def _run_planned(self, plan: Plan, arrays: Sequence):
        """A call whose inputs' dtypes and shapes passed every check before unchanged: the checks' answer is
        known. Measured: the checks, run on every call, made a small model's calls ~5 % slower than
        tritonclient's own. Only plain numeric arrays get here (``signature`` is None for anything else: bytes,
        str, lists and object arrays are checked on every call)."""
        self._check_open()
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        inputs = []
        for name, datatype, array in zip(plan.names, plan.datatypes, arrays):
            if plan.single:
                array = array[None]
            tensor = plan.input_class(name, list(array.shape), datatype)
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)

        def infer(left):
            return self._grpc.infer(self.model, inputs, model_version=self.version or "", outputs=plan.requested,
                                    client_timeout=left, compression_algorithm=self.compression)

        try:  # the first attempt inline: most calls need no other
            result = infer(None if deadline is None else deadline - time.monotonic())
        except plan.server_exception as exc:
            result = self._with_retry(infer, deadline, failed=exc)
        if len(plan.wanted) == 1:
            value = result.as_numpy(plan.wanted[0])
            return value[0] if plan.single else value
        return {name: result.as_numpy(name)[0] if plan.single else result.as_numpy(name) for name in plan.wanted}

    def _run(self, arrays: Sequence, named: dict, outputs: Sequence[str] | None, form: str, *,
             sequence: dict | None = None, attempts: int | None = None):
        """One request; ``sequence`` holds tritonclient's sequence_id/start/end for a step of a Sequence."""
        deadline = self._deadline()
        info = self._ready_info(deadline)
        # Checked before sending: the server's own refusals come only after the data went over the wire.
        if info.decoupled:
            raise decoupled_error(self.model)
        if info.stateful and sequence is None:
            raise SequenceError(f"'{self.model}' is stateful (it has a sequence batcher), so every request belongs "
                                "to a sequence", hint="with client.sequence() as seq: seq(frame) ...")
        prepared, single = prepare_inputs(info, arrays, named, form)
        self._check_size(prepared)
        wanted = self._wanted(info, outputs)
        if (outputs is None and not named and sequence is None and self._shm is None
                and len(self._known) < KNOWN_SIGNATURES and (key := signature(arrays, form)) is not None
                and passed_unchanged(info, arrays, prepared)):
            self._known[key] = Plan.of(info, single, wanted)
        if self._shm is not None:
            with self._shm_lock:
                results = self._infer(info, prepared, wanted, deadline, sequence, attempts)
        else:
            results = self._infer(info, prepared, wanted, deadline, sequence, attempts)
        if single:
            results = {name: value[0] for name, value in results.items()}
        return results[wanted[0]] if len(wanted) == 1 else results

    def _wanted(self, info: ModelInfo, outputs: Sequence[str] | None) -> list[str]:
        if not outputs and not self.default_outputs:
            return [t.name for t in info.outputs]
        wanted = list(outputs or self.default_outputs)
        unknown = [n for n in wanted if n not in {t.name for t in info.outputs}]
        if unknown:
            raise InvalidInputError(f"'{self.model}' has no output {', '.join(repr(n) for n in unknown)}",
                                    hint=f"its outputs are {', '.join(t.name for t in info.outputs)}")
        return wanted

    def _check_size(self, prepared: dict[str, np.ndarray]) -> None:
        if self.max_request_bytes is None:
            return
        size = sum(sum(len(x) if isinstance(x, (bytes, str)) else 0 for x in a.flat) if a.dtype == np.object_
                   else a.nbytes for a in prepared.values())
        if size > self.max_request_bytes:
            given, limit = sizes(size, self.max_request_bytes)
            raise InvalidInputError(
                f"the request holds {given}, above this client's limit of {limit}", expected=self.max_request_bytes,
                given=size,
                hint="send smaller batches or encoded images; or raise Client(max_request_bytes=...) if the "
                     "server has the memory (each large request grows the Python backend's shared memory for good)")

    def _infer(self, info: ModelInfo, prepared: dict[str, np.ndarray], wanted: list[str],
               deadline: float | None, sequence: dict | None = None,
               attempts: int | None = None) -> dict[str, np.ndarray]:
        import tritonclient.grpc as grpcclient

        grpc_inputs = inputs_for(info, prepared)
        shm = self._shm
        if shm is not None:
            shm.bind_inputs(prepared, grpc_inputs)
        for name, array in prepared.items():
            if shm is None or array.dtype == np.object_:
                grpc_inputs[name].set_data_from_numpy(array)
        requested, in_shm = [], set()
        for name in wanted:
            output = grpcclient.InferRequestedOutput(name)
            if shm is not None and shm.bind_output(output, name):
                in_shm.add(name)
            requested.append(output)
        result = self._with_retry(lambda left: self._grpc.infer(
            self.model, list(grpc_inputs.values()), model_version=self.version or "", outputs=requested,
            client_timeout=left, compression_algorithm=self.compression, **(sequence or {})), deadline,
            region_lost=None if shm is None else shm.register_again, attempts=attempts)
        return {name: shm.read_output(result, name) if name in in_shm else result.as_numpy(name)
                for name in wanted}

    # --- streams and sequences ------------------------------------------------------------------------------

    def stream(self, *arrays, outputs: Sequence[str] | None = None, timeout_s: float | None = None,
               **named) -> Iterator:
        """Send one request and yield its responses as they arrive: for a decoupled model any number of them
        (the server's empty final response ends the iteration unseen), for any other model exactly one.

        Inputs are checked as ``__call__`` checks them, at once; the request goes out on the first ``next``. Each
        response comes as ``__call__``'s result would. ``timeout_s`` (the client's by default) bounds the whole
        stream, counted from the first ``next``: past it DeadlineExceededError, and the request is cancelled.
        UNAVAILABLE before the first response is retried as ``__call__`` retries it. Leaving the loop early
        (``break``) or ``close()`` on the returned generator cancels the request; streams use their own
        connection each (no shared memory), so several may run at once from different threads.
        """
        from orinkit.client.stream import responses

        info = self.info
        if info.stateful:
            raise SequenceError(f"'{self.model}' is stateful; orinkit streams only sequence-free requests",
                                hint="call it through client.sequence()")
        if timeout_s is not None and not timeout_s > 0:
            raise InvalidInputError(f"timeout_s {timeout_s} is not above 0", hint="e.g. 30")
        prepared, single = prepare_inputs(info, arrays, named, "auto")
        self._check_size(prepared)
        wanted = self._wanted(info, outputs)

        def build_request():
            import tritonclient.grpc as grpcclient

            inputs = inputs_for(info, prepared)
            for name, array in prepared.items():
                inputs[name].set_data_from_numpy(array)
            return list(inputs.values()), [grpcclient.InferRequestedOutput(name) for name in wanted]

        return responses(self, build_request, wanted, single, timeout_s or self.timeout_s)

    def _connect(self):
        """A new connection with this client's settings (a stream holds one for itself)."""
        self._check_open()
        return connect(self.url, tls=self._tls, keepalive=self._keepalive, channel_options=self._channel_options)

    def sequence(self, sequence_id: int | str | None = None) -> sequences.Sequence:
        """A sequence of a stateful model (one with a sequence batcher): ``with client.sequence() as seq:
        seq(frame); ...; seq.end(frame)``. ``sequence_id`` defaults to a fresh id unique to this process (a str
        when the model's CORRID control is TYPE_STRING)."""
        info = self.info
        if not info.stateful:
            raise SequenceError(f"'{self.model}' has no sequence_batching in its config, so it keeps no state "
                                "between requests", hint="call it directly: client(...) or client.infer_sample(...)")
        if info.decoupled:
            raise decoupled_error(self.model)
        chosen = (sequences.new_sequence_id(info.correlation_type) if sequence_id is None
                  else sequences.check_sequence_id(sequence_id))
        return sequences.Sequence(self, chosen)

    # --- what the server measured ---------------------------------------------------------------------------

    def statistics(self, *, all_models: bool = False) -> dict:
        """The server's counters for this model (every version it has), or for every model with ``all_models``:
        ``{(model, version): ModelStatistics}``. Subtract two snapshots to measure a run (``after - before``)."""
        from orinkit.client.statistics import model_statistics

        self._check_open()
        return model_statistics(self._grpc, "" if all_models else self.model,
                                "" if all_models else self.version or "", timeout_s=self.timeout_s, url=self.url)

    # --- lifetime ------------------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for worker in self._workers:
            worker.close()
        if self._shm is not None:
            self._shm.close()
        try:
            self._grpc.close()
        except Exception:  # closing a channel to a dead server must not mask the caller's error
            pass

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self._closed and self._shm is not None:
                self._shm.close()
        except Exception:
            pass


__all__ = ["Client", "Retry", "ClientError"]
