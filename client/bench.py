"""edge-bench as a library: the same load through orinkit's Client and through plain tritonclient, side by side."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from orinkit.client.client import Client
from orinkit.client.errors import BenchError, InvalidInputError
from orinkit.client.model import ModelInfo
from orinkit.client.statistics import ModelStatistics, delta, model_statistics, total
from orinkit.core.stats import percentile

# After a run the server may record its last requests' statistics a moment after their answers reached the
# client: wait this long at most for its counts to catch up with the client's.
STATISTICS_SETTLE_S = 2.0


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    requests: int
    errors: int
    seconds: float
    throughput: float  # requests per second
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None  # None when no request succeeded (JSON has no NaN)
    p99_ms: float | None
    first_error: str | None = None  # what the first failed request was told
    mean_ms: float | None = None  # mean latency seen by the client, to set beside the server's mean time


def _percentile(sorted_ms: Sequence[float], q: float) -> float | None:
    return percentile(sorted_ms, q) if sorted_ms else None


def run_load(make_call: Callable[[], Callable[[], object]], *, concurrency: int, duration_s: float | None = None,
             requests: int | None = None, warmup_s: float = 0.0) -> LevelResult:
    """``concurrency`` threads, each with its own ``make_call()``, calling until ``duration_s`` passes or
    ``requests`` calls were made in all. With ``warmup_s`` (duration runs only) the same load runs that long
    first, uncounted: a model just loaded runs its first requests slower (allocations, lazy initialisation), and
    a short run that includes them understates the configuration."""
    if (duration_s is None) == (requests is None):
        raise InvalidInputError("give a duration or a request count", hint="--duration 10 or --requests 1000")
    if warmup_s and duration_s is None:
        raise InvalidInputError("a warm-up goes with a duration, not a request count", hint="drop warmup_s")
    latencies: list[float] = []
    errors = [0]
    first_error: list[str] = []
    lock = threading.Lock()
    remaining = [requests if requests is not None else -1]
    calls = [make_call() for _ in range(concurrency)]
    start_gate = threading.Barrier(concurrency + 1)

    def worker(call):
        local, failed = [], 0
        start_gate.wait()
        while warmup_s and time.perf_counter() < counted_from:
            try:
                call()
            except Exception:  # noqa: BLE001 - the counted run that follows meets it again and counts it
                pass
        while True:
            if duration_s is not None and time.perf_counter() >= deadline:
                break
            if requests is not None:
                with lock:
                    if remaining[0] <= 0:
                        break
                    remaining[0] -= 1
            started = time.perf_counter()
            try:
                call()
                local.append((time.perf_counter() - started) * 1000)
            except Exception as exc:  # noqa: BLE001 - counted: a benchmark reports failures, not the first only
                failed += 1
                if not first_error:
                    first_error.append(str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__)
        with lock:
            latencies.extend(local)
            errors[0] += failed

    threads = [threading.Thread(target=worker, args=(c,)) for c in calls]
    for thread in threads:
        thread.start()
    counted_from = time.perf_counter() + warmup_s
    deadline = counted_from + (duration_s or 0)
    start_gate.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - counted_from
    ordered = sorted(latencies)
    return LevelResult(concurrency, len(ordered), errors[0], round(seconds, 3), len(ordered) / seconds,
                       _percentile(ordered, 50), _percentile(ordered, 90), _percentile(ordered, 95),
                       _percentile(ordered, 99), first_error[0] if first_error else None,
                       sum(ordered) / len(ordered) if ordered else None)


def random_inputs(info: ModelInfo, *, seed: int = 0, payload: bytes | None = None) -> dict[str, np.ndarray]:
    """One sample per input at its declared dims (dynamic dims as 1), with the batch axis when it batches.
    BYTES inputs take ``payload`` (an encoded image, say): random bytes mean nothing to a model that decodes them,
    so without one they are refused."""
    rng = np.random.default_rng(seed)
    arrays = {}
    byte_inputs = [t.name for t in info.inputs if t.dtype == "BYTES"]
    if byte_inputs and payload is None:
        raise InvalidInputError(
            f"'{info.name}' takes BYTES ({', '.join(byte_inputs)}): random bytes would only measure failures",
            hint="pass --image FILE (its bytes fill the BYTES inputs) or --data FILE.npz with real inputs")
    for tensor in info.inputs:
        shape = tuple(d if d > 0 else 1 for d in tensor.dims)
        if info.max_batch_size > 0:
            shape = (1, *shape)
        if tensor.dtype == "BYTES":
            arrays[tensor.name] = np.full(shape, payload, dtype=np.object_)
        elif tensor.dtype == "BOOL":
            arrays[tensor.name] = rng.integers(0, 2, shape).astype(bool)
        elif np.issubdtype(tensor.numpy_dtype, np.integer):
            arrays[tensor.name] = rng.integers(0, 100, shape).astype(tensor.numpy_dtype)
        else:
            arrays[tensor.name] = rng.random(shape).astype(tensor.numpy_dtype)
    return arrays


def orinkit_call(url: str, model: str, inputs: Mapping[str, np.ndarray], *, shared_memory: str | None,
                 clients: list) -> Callable[[], Callable[[], object]]:
    def make():
        client = Client(url, model, shared_memory=shared_memory)
        clients.append(client)
        _ = client.inputs  # connect and read the model before timing starts
        return lambda: client(**inputs)
    return make


def tritonclient_call(url: str, model: str, inputs: Mapping[str, np.ndarray], info: ModelInfo,
                      clients: list) -> Callable[[], Callable[[], object]]:
    """The baseline: what users write with tritonclient directly (inputs built per call, outputs as numpy)."""
    import tritonclient.grpc as grpcclient

    datatypes = {t.name: t.dtype for t in info.inputs}
    names = [t.name for t in info.outputs]

    def make():
        client = grpcclient.InferenceServerClient(url)
        clients.append(client)

        def call():
            tensors = []
            for name, array in inputs.items():
                tensor = grpcclient.InferInput(name, list(array.shape), datatypes[name])
                tensor.set_data_from_numpy(array)
                tensors.append(tensor)
            result = client.infer(model, tensors)
            return [result.as_numpy(n) for n in names]
        return call
    return make


def measured_power(sampler_factory, run):
    """``run()`` inside a tegrastats sampler (on a Jetson): its result and the power summary as a dict."""
    if sampler_factory is None:
        return run(), None
    with sampler_factory() as sampler:
        result = run()
    summary = sampler.summary()
    power = {"input_power_mw": summary.input_power_mw, "energy_j": summary.energy_j, "samples": summary.samples,
             "rails_mw": summary.rails_mw}
    if summary.energy_j is not None and result.requests:
        power["energy_per_inference_j"] = summary.energy_j / result.requests
    return result, power


class ServerTimes:
    """Server statistics of one model around a run: ``start()`` before, ``stop(requests)`` after."""

    def __init__(self, url: str, model: str) -> None:
        from orinkit.client.channel import connect

        self.url, self.model = url, model
        self._grpc = connect(url, tls=None)
        self._before: dict = {}

    def _snapshot(self) -> dict:
        return model_statistics(self._grpc, self.model, timeout_s=30.0, url=self.url)

    def start(self) -> None:
        self._before = self._snapshot()

    def stop(self, requests: int) -> ModelStatistics:
        """What the server did for ``model`` (every version) since ``start()``, once it has counted at least
        ``requests`` successes or the settling time is over (other clients' requests count too)."""
        deadline = time.monotonic() + STATISTICS_SETTLE_S
        while True:
            change = total(delta(self._before, self._snapshot()), self.model)
            if change.success_count >= requests or time.monotonic() >= deadline:
                return change
            time.sleep(0.02)

    def close(self) -> None:
        self._grpc.close()


def server_summary(change: ModelStatistics) -> dict:
    """A run's server side for the report: counts, and mean milliseconds per successful request."""
    return {"requests": change.success_count, "failures": change.failure_count,
            "executions": change.execution_count, "inferences": change.inference_count,
            "queue_ms": change.mean_queue_ms, "compute_input_ms": change.mean_compute_input_ms,
            "compute_infer_ms": change.mean_compute_infer_ms, "compute_output_ms": change.mean_compute_output_ms,
            "server_ms": change.mean_server_ms, "request_ms": change.mean_request_ms}


def bench(url: str, model: str, *, levels: Sequence[int] = (1, 4), duration_s: float | None = 5.0,
          requests: int | None = None, inputs: Mapping[str, np.ndarray] | None = None, payload: bytes | None = None,
          shared_memory: str | None = None, power_sampler=None, progress=lambda message: None) -> dict:
    """Each concurrency level through orinkit and through plain tritonclient, with the throughput ratio.
    ``payload`` fills BYTES inputs (an encoded image). ``power_sampler`` (e.g. ``orinkit.jetson.TegrastatsSampler``
    on a Jetson) adds average power and energy per inference for orinkit's run. Each side of a level also holds
    ``server``: the server's own statistics for ``model`` over that run (queue and compute time per request), so
    the client's latency can be split into the server's time and the rest (network, (de)serialisation). Raises
    BenchError when every request of a level failed, with what the server said."""
    with Client(url, model) as probe:
        info = probe.info
    inputs = dict(inputs) if inputs is not None else random_inputs(info, payload=payload)
    report = {"url": url, "model": model, "shared_memory": shared_memory, "levels": []}
    server = ServerTimes(url, model)
    try:
        for level in levels:
            clients: list = []
            try:
                server.start()
                ours, power = measured_power(power_sampler, lambda clients=clients, level=level: run_load(
                    orinkit_call(url, model, inputs, shared_memory=shared_memory, clients=clients),
                    concurrency=level, duration_s=duration_s, requests=requests))
                ours_server = server_summary(server.stop(ours.requests))
                server.start()
                base = run_load(tritonclient_call(url, model, inputs, info, clients), concurrency=level,
                                duration_s=duration_s, requests=requests)
                base_server = server_summary(server.stop(base.requests))
            finally:
                for client in clients:
                    client.close()
            entry = {"concurrency": level, "orinkit": {**asdict(ours), "server": ours_server},
                     "tritonclient": {**asdict(base), "server": base_server}, "power": power,
                     "throughput_ratio": ours.throughput / base.throughput if base.throughput else None}
            report["levels"].append(entry)
            progress(format_level(entry))
            if ours.requests == 0 and ours.errors:
                raise BenchError(f"every request to '{model}' failed at concurrency {level}: {ours.first_error}",
                                 hint="send inputs the model takes (--data FILE.npz, --image FILE); the message "
                                      "above is the server's", report=report)
    finally:
        server.close()
    return report


def format_level(entry: dict) -> str:
    def ms(value):
        return "    -  " if value is None else f"{value:7.2f}"

    def row(label, r):
        failed = f", first error: {r['first_error']}" if r.get("first_error") else ""
        return (f"  {label:12} {r['throughput']:9.1f} req/s  p50 {ms(r['p50_ms'])}  p90 {ms(r['p90_ms'])}  "
                f"p95 {ms(r['p95_ms'])}  p99 {ms(r['p99_ms'])} ms  ({r['requests']} ok, {r['errors']} failed"
                f"{failed})")

    def server_row(r):
        times = r.get("server")
        if not times:
            return []
        if times["server_ms"] is None:
            return [f"  {'':12} server: no successful request ({times['failures']} failed)"]
        mean = "-" if r.get("mean_ms") is None else f"{r['mean_ms']:.2f}"
        return [f"  {'':12} server {times['server_ms']:.2f} of {mean} ms mean per request (queue "
                f"{times['queue_ms']:.2f}, input {times['compute_input_ms']:.2f}, infer "
                f"{times['compute_infer_ms']:.2f}, output {times['compute_output_ms']:.2f}; {times['requests']} ok, "
                f"{times['failures']} failed at the server)"]

    ratio = entry["throughput_ratio"]
    lines = [f"concurrency {entry['concurrency']}:", row("orinkit", entry["orinkit"]),
             *server_row(entry["orinkit"]), row("tritonclient", entry["tritonclient"]),
             *server_row(entry["tritonclient"]),
             f"  throughput ratio orinkit / tritonclient: {'-' if ratio is None else f'{ratio:.3f}'}"]
    power = entry.get("power")
    if power and power.get("input_power_mw") is not None:
        per = power.get("energy_per_inference_j")
        lines.append(f"  power (tegrastats): {power['input_power_mw']:.0f} mW average"
                     + (f", {per * 1000:.2f} mJ per inference" if per is not None else ""))
    return "\n".join(lines)
