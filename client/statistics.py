"""Triton's per-model inference statistics: cumulative counts and times, snapshots and their differences.

Triton keeps, per model and version, how many requests succeeded and failed and the cumulative nanoseconds they
spent queued, copying inputs in, running, and copying outputs out. These counters only grow, so a measurement is
the difference of two snapshots::

    before = model_statistics(grpc, "plus_one")
    ...  # the load being measured
    after = model_statistics(grpc, "plus_one")
    change = delta(before, after)[("plus_one", "1")]
    change.success_count, change.mean_server_ms

Times are kept in nanoseconds, as Triton reports them (fields end in ``_ns``); the ``mean_*_ms`` properties divide
by the successful requests, which are the only ones Triton times stage by stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

from orinkit.client.errors import ModelNotFoundError, map_exception

Key = tuple[str, str]  # (model, version)


@dataclass(frozen=True)
class ModelStatistics:
    """One model version's counters (a snapshot), or the change between two snapshots (``after - before``)."""

    model: str
    version: str
    inference_count: int = 0  # inferences run: a batch of 8 in one request counts 8
    execution_count: int = 0  # model executions: requests the dynamic batcher joined count once
    success_count: int = 0  # requests that succeeded
    failure_count: int = 0  # requests that failed (refused at execution, or the model raised)
    request_ns: int = 0  # successful requests, arrival to response, summed
    failure_ns: int = 0  # failed requests, arrival to failure, summed
    queue_ns: int = 0  # waiting for a model instance (and for the batcher's delay)
    compute_input_ns: int = 0  # copying inputs into the model
    compute_infer_ns: int = 0  # the model itself
    compute_output_ns: int = 0  # copying outputs out
    last_inference_ms: int = 0  # milliseconds since the epoch of the last request; 0 when there was none

    @property
    def server_ns(self) -> int:
        """Queue plus compute (input, infer, output): the server's share of the successful requests."""
        return self.queue_ns + self.compute_input_ns + self.compute_infer_ns + self.compute_output_ns

    def _mean_ms(self, ns: int) -> float | None:
        # None rather than 0 or NaN: no successful request means no time to average (and JSON has no NaN).
        return ns / self.success_count / 1e6 if self.success_count > 0 else None

    @property
    def mean_queue_ms(self) -> float | None:
        return self._mean_ms(self.queue_ns)

    @property
    def mean_compute_input_ms(self) -> float | None:
        return self._mean_ms(self.compute_input_ns)

    @property
    def mean_compute_infer_ms(self) -> float | None:
        return self._mean_ms(self.compute_infer_ns)

    @property
    def mean_compute_output_ms(self) -> float | None:
        return self._mean_ms(self.compute_output_ns)

    @property
    def mean_server_ms(self) -> float | None:
        """Queue and compute per successful request, in milliseconds."""
        return self._mean_ms(self.server_ns)

    @property
    def mean_request_ms(self) -> float | None:
        return self._mean_ms(self.request_ns)

    def __sub__(self, before: ModelStatistics) -> ModelStatistics:
        """What happened between ``before`` and this snapshot (of the same model version)."""
        if not isinstance(before, ModelStatistics):
            return NotImplemented
        if (before.model, before.version) != (self.model, self.version):
            raise ValueError(f"cannot subtract {before.model} version {before.version} from {self.model} version "
                             f"{self.version}")
        return ModelStatistics(self.model, self.version, **{
            f.name: getattr(self, f.name) - getattr(before, f.name) for f in _COUNTERS},
            last_inference_ms=self.last_inference_ms)

    def __add__(self, other: ModelStatistics) -> ModelStatistics:
        """Two versions' (or two periods') counters together; the model and version of the first."""
        if not isinstance(other, ModelStatistics):
            return NotImplemented
        return ModelStatistics(self.model, self.version, **{
            f.name: getattr(self, f.name) + getattr(other, f.name) for f in _COUNTERS},
            last_inference_ms=max(self.last_inference_ms, other.last_inference_ms))

    def as_dict(self) -> dict:
        """The counters and the per-request means, for JSON."""
        result = {f.name: getattr(self, f.name) for f in fields(self)}
        result.update(server_ns=self.server_ns, mean_queue_ms=self.mean_queue_ms,
                      mean_compute_input_ms=self.mean_compute_input_ms,
                      mean_compute_infer_ms=self.mean_compute_infer_ms,
                      mean_compute_output_ms=self.mean_compute_output_ms, mean_server_ms=self.mean_server_ms,
                      mean_request_ms=self.mean_request_ms)
        return result


_COUNTERS = [f for f in fields(ModelStatistics) if f.name not in ("model", "version", "last_inference_ms")]


def from_response(response) -> dict[Key, ModelStatistics]:
    """The statistics in a tritonclient ``ModelStatisticsResponse`` (the protobuf, not its JSON form: JSON turns
    Triton's 64-bit counters into strings)."""
    result = {}
    for s in response.model_stats:
        stats = s.inference_stats
        result[(s.name, s.version)] = ModelStatistics(
            model=s.name, version=s.version, inference_count=s.inference_count, execution_count=s.execution_count,
            success_count=stats.success.count, failure_count=stats.fail.count, request_ns=stats.success.ns,
            failure_ns=stats.fail.ns, queue_ns=stats.queue.ns, compute_input_ns=stats.compute_input.ns,
            compute_infer_ns=stats.compute_infer.ns, compute_output_ns=stats.compute_output.ns,
            last_inference_ms=s.last_inference)
    return result


def from_json(answer: Mapping) -> dict[Key, ModelStatistics]:
    """The statistics in Triton's HTTP/REST answer (``GET v2/models[/NAME[/versions/V]]/stats``, parsed with
    ``json.loads``): the same fields as :func:`from_response`, read without tritonclient, protobuf or numpy.

    Triton's HTTP JSON writes the 64-bit counters as numbers (Python's ints hold them exactly); ``int()`` also
    takes the strings of the gRPC answer's ``as_json`` form. A field Triton leaves out counts as 0."""
    result = {}
    for s in answer.get("model_stats") or ():
        stats = s.get("inference_stats") or {}

        def part(stage: str, field: str, stats=stats) -> int:
            return int((stats.get(stage) or {}).get(field) or 0)

        name, version = str(s.get("name", "")), str(s.get("version", ""))
        result[(name, version)] = ModelStatistics(
            model=name, version=version, inference_count=int(s.get("inference_count") or 0),
            execution_count=int(s.get("execution_count") or 0), success_count=part("success", "count"),
            failure_count=part("fail", "count"), request_ns=part("success", "ns"), failure_ns=part("fail", "ns"),
            queue_ns=part("queue", "ns"), compute_input_ns=part("compute_input", "ns"),
            compute_infer_ns=part("compute_infer", "ns"), compute_output_ns=part("compute_output", "ns"),
            last_inference_ms=int(s.get("last_inference") or 0))
    return result


def model_statistics(grpc_client, model: str = "", version: str = "", *, timeout_s: float | None = None,
                     url: str | None = None) -> dict[Key, ModelStatistics]:
    """Statistics of ``model`` (every loaded model when empty) and ``version`` (every loaded version when empty)
    from a ``tritonclient.grpc.InferenceServerClient``, by (model, version). ``url`` only names the server in
    errors. Failures are the ClientError that matches the server's status (ServerUnavailableError,
    ModelNotFoundError, DeadlineExceededError, …)."""
    from tritonclient.utils import InferenceServerException

    try:
        response = grpc_client.get_inference_statistics(model, version, as_json=False, client_timeout=timeout_s)
    except InferenceServerException as exc:
        message = exc.message() or str(exc)
        if "INVALID_ARGUMENT" in (exc.status() or "") and "is not available" in message:
            # The statistics call says INVALID_ARGUMENT for a model or version the server does not serve, where
            # inference says NOT_FOUND: the generic table would blame the input's data.
            raise ModelNotFoundError(f"{url or 'the server'} has no statistics for {_named(model, version)}: "
                                     f"{message}", hint="check the model name and version (edge-repo status "
                                                        "lists what is loaded)") from exc
        raise map_exception(exc, url=url or "the server", model=model or None) from exc
    return from_response(response)


def _named(model: str, version: str) -> str:
    return f"'{model}'" + (f" version {version}" if version else "")


def delta(before: Mapping[Key, ModelStatistics], after: Mapping[Key, ModelStatistics]) -> dict[Key, ModelStatistics]:
    """``after - before`` per model version; a version loaded in between counts from zero, one unloaded in
    between is left out (its counters are gone)."""
    return {key: stats - before.get(key, ModelStatistics(*key)) for key, stats in after.items()}


def total(statistics: Iterable[ModelStatistics] | Mapping[Key, ModelStatistics], model: str) -> ModelStatistics:
    """Every version of ``model`` together (requests without a version go to whichever serves); an ensemble's
    composing models, listed beside it, are not included."""
    items = statistics.values() if isinstance(statistics, Mapping) else statistics
    result = ModelStatistics(model, "")
    for stats in items:
        if stats.model == model:
            result = result + stats
    return result


__all__ = ["ModelStatistics", "delta", "from_json", "from_response", "model_statistics", "total"]
