"""One configuration measured: loaded with Triton's config override, then edge-bench's load at rising concurrency.

The override (the repository API's load with ``config``) leaves config.pbtxt alone: a sweep that is stopped,
refused or outlived by its server has written nothing. Loading the model again without it brings back what the
repository says.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
from tritonclient.grpc import model_config_pb2 as mc

from orinkit.client.bench import measured_power, orinkit_call, run_load
from orinkit.repo.errors import ServerAPIError
from orinkit.repo.server_api import RepositoryAPI
from orinkit.tune.errors import TuneInputError, TuneServerError
from orinkit.tune.memory import MemoryReader, PeakSampler
from orinkit.tune.space import Candidate, configure

DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32)
# A level that adds less than this to the best throughput so far has found the configuration's ceiling.
SATURATION_GAIN = 0.05
# Uncounted load before the first level after a load (and before confirmation and --apply's runs): the first
# requests a model just loaded serves run slower, and a 1 s level that counted them understated it.
WARMUP_S = 0.5


@dataclass(frozen=True)
class Budgets:
    latency_ms: float | None = None  # p99 seen by the client
    memory_mb: float | None = None

    def describe(self) -> str:
        parts = []
        if self.latency_ms is not None:
            parts.append(f"p99 <= {self.latency_ms:g} ms")
        if self.memory_mb is not None:
            parts.append(f"memory <= {self.memory_mb:g} MB")
        return " and ".join(parts) or "no budget"


@dataclass(frozen=True)
class Level:
    concurrency: int
    throughput: float  # successful inferences per second
    p50_ms: float | None
    p99_ms: float | None
    requests: int
    errors: int
    first_error: str | None = None
    energy_per_inference_j: float | None = None

    def meets(self, budgets: Budgets) -> bool:
        if self.errors or not self.requests or self.p99_ms is None:
            return False
        return budgets.latency_ms is None or self.p99_ms <= budgets.latency_ms


@dataclass(frozen=True)
class Measurement:
    candidate: Candidate
    levels: tuple[Level, ...] = ()
    memory_mb: float | None = None
    seconds: float = 0.0  # the load and every level
    error: str | None = None  # the server refused this configuration (it did not load)
    power: dict | None = field(default=None, compare=False)

    def best(self, budgets: Budgets) -> Level | None:
        """The level with the highest throughput within the budgets; None when none is."""
        if self.error or (budgets.memory_mb is not None and (self.memory_mb is None or
                                                              self.memory_mb > budgets.memory_mb)):
            return None
        feasible = [level for level in self.levels if level.meets(budgets)]
        return max(feasible, key=lambda level: level.throughput, default=None)

    def top(self) -> Level | None:
        """The highest throughput without budgets (what the plot shows and a refusal compares)."""
        ok = [level for level in self.levels if level.requests and not level.errors]
        return max(ok, key=lambda level: level.throughput, default=None)

    def to_dict(self, budgets: Budgets) -> dict:
        best = self.best(budgets)
        return {"config": self.candidate.to_dict(), "label": self.candidate.label(),
                "levels": [asdict(level) for level in self.levels], "memory_mb": self.memory_mb,
                "seconds": round(self.seconds, 2), "error": self.error, "feasible": best is not None,
                "best": None if best is None else asdict(best)}


def config_json(config: mc.ModelConfig) -> str:
    from google.protobuf import json_format

    return json_format.MessageToJson(config, preserving_proto_field_name=True)


class Measurer:
    """Measures configurations of model ``name`` on the server at ``url``. ``alive()`` returns None while the
    server runs and what happened to it once it has died; ``guard()`` raises when the conditions of the sweep
    changed (the power mode)."""

    def __init__(self, url: str, name: str, config: mc.ModelConfig, inputs: Mapping[str, np.ndarray], *,
                 levels: Sequence[int] = DEFAULT_LEVELS, duration_s: float = 2.0, budgets: Budgets = Budgets(),
                 memory: MemoryReader | None = None, power_sampler=None,
                 alive: Callable[[], str | None] = lambda: None, guard: Callable[[], None] = lambda: None,
                 load_timeout_s: float = 300.0) -> None:
        self.url, self.name, self.config, self.inputs = url, name, config, dict(inputs)
        self.levels, self.duration_s, self.budgets = tuple(levels), duration_s, budgets
        self.memory, self.power_sampler = memory, power_sampler
        self.alive, self.guard, self.load_timeout_s = alive, guard, load_timeout_s

    def _died(self, what: str) -> TuneServerError | None:
        cause = self.alive()
        if cause is None:
            return None
        return TuneServerError(f"the server died while {what}: {cause}",
                               hint="nothing was applied; the server log says why it stopped")

    def load(self, config: mc.ModelConfig | None) -> str | None:
        """Load the model with ``config`` (None: as the repository has it); the server's refusal, or None."""
        try:
            with RepositoryAPI(self.url, timeout_s=self.load_timeout_s) as api:
                api.load(self.name, self.load_timeout_s, config=None if config is None else config_json(config))
        except ServerAPIError as exc:
            died = self._died(f"loading '{self.name}'")
            if died is not None:
                raise died from exc
            if exc.hint and "explicit" in exc.hint:  # a server that loads from its repository alone
                raise TuneInputError(f"the server at {self.url} does not take loads: {exc.message}",
                                     hint="start it with --model-control-mode explicit, or leave out --url so "
                                          "edge-tune starts one") from exc
            return exc.message
        return None

    def measure(self, candidate: Candidate) -> Measurement:
        self.guard()
        started = time.monotonic()
        refused = self.load(configure(self.config, candidate))
        if refused is not None:
            return Measurement(candidate, seconds=time.monotonic() - started, error=refused)
        levels: list[Level] = []
        power = None
        with PeakSampler(self.memory) as peak:
            best = 0.0
            for concurrency in self.levels:
                level, power = self.level(concurrency, warmup_s=0.0 if levels else WARMUP_S)
                levels.append(level)
                if not level.requests or level.errors:
                    break  # a configuration that fails requests at this load will not do better at more
                if self.budgets.latency_ms is not None and level.p99_ms > self.budgets.latency_ms:
                    break  # more requests in flight only queue longer
                filled = concurrency >= candidate.instances * max(1, candidate.max_batch_size)
                if filled and level.throughput < best * (1 + SATURATION_GAIN):
                    break
                best = max(best, level.throughput)
        self.guard()
        return Measurement(candidate, tuple(levels), peak.peak, time.monotonic() - started, power=power)

    def level(self, concurrency: int, duration_s: float | None = None,
              warmup_s: float = 0.0) -> tuple[Level, dict | None]:
        """One load level; ``warmup_s`` of the same load first, uncounted (for a model just loaded)."""
        clients: list = []
        try:
            result, power = measured_power(self.power_sampler, lambda: run_load(
                orinkit_call(self.url, self.name, self.inputs, shared_memory=None, clients=clients),
                concurrency=concurrency, duration_s=duration_s or self.duration_s, warmup_s=warmup_s))
        except Exception as exc:  # noqa: BLE001 - a client that cannot even connect: the server may be gone
            died = self._died(f"measuring '{self.name}' at concurrency {concurrency}")
            if died is not None:
                raise died from exc
            raise
        finally:
            for client in clients:
                client.close()
        if result.errors:
            died = self._died(f"measuring '{self.name}' at concurrency {concurrency}")
            if died is not None:
                raise died
        if warmup_s and power and power.get("input_power_mw") and result.requests:
            # The sampler ran through the uncounted warm-up too: the mean power over the counted seconds.
            power["energy_per_inference_j"] = power["input_power_mw"] / 1000.0 * result.seconds / result.requests
        energy = (power or {}).get("energy_per_inference_j")
        return Level(concurrency, result.throughput, result.p50_ms, result.p99_ms, result.requests, result.errors,
                     result.first_error, energy), power
