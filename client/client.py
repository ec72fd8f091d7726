"""The client class users embed: ``Client(url, model)(*arrays)`` runs inference."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Retry:
    """UNAVAILABLE is retried (inference is idempotent) until the call's deadline (``timeout_s``), waiting
    ``backoff_s`` doubled each time up to ``max_backoff_s``, each wait ending as soon as the server reports ready
    again. ``attempts`` caps the tries; without a deadline the cap is 8. A shared-memory region the server forgot
    (it restarted) is registered again and the call repeated, within the same deadline."""

    attempts: int | None = None
    backoff_s: float = 0.05
    max_backoff_s: float = 1.0

    def __post_init__(self) -> None:
        if self.attempts is not None and self.attempts < 1:
            raise InvalidInputError(f"Retry(attempts={self.attempts}) makes no call",
                                    hint="use 1 or more, or None for 'until the deadline'")
        if self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            raise InvalidInputError("Retry needs 0 <= backoff_s <= max_backoff_s", hint="e.g. Retry(backoff_s=0.05)")


class Client:
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
        self._known: dict[tuple, _Plan] = {}  # per input signature that passed prepare_inputs unchanged
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

    def _run_planned(self, plan: _Plan, arrays: Sequence):
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
            self._known[key] = _Plan.of(info, single, wanted)
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

        grpc_inputs = _grpc_inputs(info, prepared)
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

            inputs = _grpc_inputs(info, prepared)
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

    # --- throughput ----------------------------------------------------------------------------------------

    def _worker(self) -> Client:
        """This worker thread's own client: one gRPC channel per thread, as tritonclient's maintainers advise."""
        worker = getattr(self._local, "client", None)
        if worker is None:
            worker = Client(self.url, self.model, self.version, ssl=self._tls is not None,
                            root_certificates=self._tls.root_certificates if self._tls else None,
                            private_key=self._tls.private_key if self._tls else None,
                            certificate_chain=self._tls.certificate_chain if self._tls else None,
                            insecure=bool(self._tls and self._tls.insecure), timeout_s=self.timeout_s,
                            ready_timeout_s=self.ready_timeout_s, retry=self.retry, keepalive=self._keepalive,
                            compression=self.compression, channel_options=self._channel_options,
                            shared_memory=self.shared_memory, outputs=self.default_outputs,
                            max_request_bytes=self.max_request_bytes)
            self._local.client = worker
            with self._init_lock:
                self._workers.append(worker)
        return worker

    def _executor(self, concurrency: int) -> ThreadPoolExecutor:
        self._check_open()
        with self._init_lock:
            if self._pool is None or self._pool._max_workers < concurrency:
                old, self._pool = self._pool, ThreadPoolExecutor(max(1, concurrency), "orinkit-client")
                if old is not None:
                    old.shutdown(wait=True)
            return self._pool

    def submit(self, *arrays, outputs: Sequence[str] | None = None, in_flight: int = 4, **named) -> Future:
        """Run one inference on a worker thread; the future holds what ``__call__`` would return. The pool grows
        to ``in_flight`` workers (each with its own channel), so that many requests can be in flight at once."""
        if in_flight < 1:
            raise InvalidInputError(f"in_flight {in_flight} runs nothing", hint="use 1 or more")
        return self._executor(in_flight).submit(lambda: self._worker()(*arrays, outputs=outputs, **named))

    def map(self, samples: Iterable, *, concurrency: int = 4, outputs: Sequence[str] | None = None) -> Iterator:
        """Results for ``samples`` (each an array, a tuple of arrays, or a dict by input name), in order, with up
        to ``concurrency`` requests in flight, each worker with its own channel."""
        pool = self._executor(concurrency)

        def one(sample):
            worker = self._worker()
            if isinstance(sample, dict):
                return worker.infer_sample(outputs=outputs, **sample)
            if isinstance(sample, tuple):
                return worker.infer_sample(*sample, outputs=outputs)
            return worker.infer_sample(sample, outputs=outputs)

        pending: list[Future] = []
        iterator = iter(samples)
        for sample in iterator:
            pending.append(pool.submit(one, sample))
            if len(pending) >= concurrency * 2:
                yield pending.pop(0).result()
        while pending:
            yield pending.pop(0).result()

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


@dataclass(frozen=True)
class _Plan:
    """What a call with a known input signature sends: the checks' answer (``single``: add and drop the batch
    axis), the inputs' names and types, and the requested outputs (read only by infer(): shared by threads)."""

    single: bool
    names: tuple[str, ...]
    datatypes: tuple[str, ...]
    wanted: tuple[str, ...]
    requested: list
    input_class: type
    server_exception: type

    @classmethod
    def of(cls, info: ModelInfo, single: bool, wanted: Sequence[str]) -> _Plan:
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException

        return cls(single, tuple(t.name for t in info.inputs), tuple(t.dtype for t in info.inputs), tuple(wanted),
                   [grpcclient.InferRequestedOutput(name) for name in wanted], grpcclient.InferInput,
                   InferenceServerException)


def size_text(count: int) -> str:
    """``count`` bytes in the largest unit it fills (bytes, KiB, MiB, GiB), to one decimal, dropping ".0"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):.1f}".removesuffix(".0") + f" {unit}"
    return f"{count} bytes"


def sizes(given: int, limit: int) -> tuple[str, str]:
    """Both sizes as text that tells them apart: in bytes where rounding would make them read the same."""
    texts = size_text(given), size_text(limit)
    if texts[0] == texts[1]:
        return f"{given:,} bytes", f"{limit:,} bytes"
    return texts


def _grpc_inputs(info: ModelInfo, prepared: dict[str, np.ndarray]) -> dict:
    import tritonclient.grpc as grpcclient

    return {t.name: grpcclient.InferInput(t.name, list(prepared[t.name].shape), t.dtype) for t in info.inputs}


__all__ = ["Client", "Retry", "ClientError"]
