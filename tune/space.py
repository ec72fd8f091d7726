"""What is tuned: serving configurations of one model, and the space they are drawn from.

A configuration is written over the model's own config (Triton's protobuf), so every other field (inputs,
parameters, the backend) stays as the repository has it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

from tritonclient.grpc import model_config_pb2 as mc

from orinkit.tune.errors import TuneInputError

# Instance kinds by the names edge-tune takes. "auto" keeps the kind the model's config has; dla0/dla1 run a
# TensorRT engine on that DLA core (Triton's instance group on the GPU with an NVDLA secondary device).
KINDS = ("auto", "cpu", "gpu", "dla0", "dla1")
DEFAULT_INSTANCES = (1, 2, 3, 4)
DEFAULT_DELAYS_US = (0, 500, 2000)


@dataclass(frozen=True, order=True)
class Candidate:
    """One serving configuration. ``max_batch_size`` 0: the model does not batch; 1: it batches but requests run
    alone (no dynamic batcher); above 1: the dynamic batcher merges requests, waiting up to ``delay_us``."""

    instances: int = 1
    max_batch_size: int = 0
    delay_us: int = 0
    kind: str = "auto"

    @property
    def dynamic_batching(self) -> bool:
        return self.max_batch_size > 1

    def label(self) -> str:
        parts = [f"{self.instances} inst"]
        if self.kind != "auto":
            parts.append(self.kind)
        if self.max_batch_size == 1:
            parts.append("batch 1")
        elif self.dynamic_batching:
            parts.append(f"batch {self.max_batch_size} delay {self.delay_us} us")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return {"instances": self.instances, "max_batch_size": self.max_batch_size,
                "dynamic_batching": self.dynamic_batching, "max_queue_delay_us": self.delay_us if
                self.dynamic_batching else None, "kind": self.kind}


@dataclass(frozen=True)
class SearchSpace:
    """The values each dimension may take. The greedy search walks them in this order: instances, batch, delay."""

    instances: tuple[int, ...] = DEFAULT_INSTANCES
    batch_sizes: tuple[int, ...] = (0,)
    delays_us: tuple[int, ...] = DEFAULT_DELAYS_US
    kinds: tuple[str, ...] = ("auto",)

    def __post_init__(self) -> None:
        for name in ("instances", "batch_sizes", "delays_us", "kinds"):
            values = getattr(self, name)
            if not values:
                raise TuneInputError(f"the search space has no {name.replace('_', ' ')}", hint="give one or more")
            if name != "kinds":
                object.__setattr__(self, name, tuple(sorted(set(int(v) for v in values))))
        if min(self.instances) < 1:
            raise TuneInputError("an instance count below 1 is not a configuration", hint="e.g. --instances 1,2,4")
        if min(self.batch_sizes) < 0 or min(self.delays_us) < 0:
            raise TuneInputError("batch sizes and queue delays must be 0 or more", hint="e.g. --delays-us 0,500")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown:
            raise TuneInputError(f"instance kind {unknown[0]!r} is unknown", hint=f"use {', '.join(KINDS)}")

    def start(self) -> Candidate:
        return Candidate(self.instances[0], self.batch_sizes[0], self.delays_us[0], self.kinds[0])

    def grid(self) -> list[Candidate]:
        """Every configuration; the delay varies only where there is a dynamic batcher to wait."""
        result = []
        for kind in self.kinds:
            for instances in self.instances:
                for batch in self.batch_sizes:
                    delays = self.delays_us if batch > 1 else (self.delays_us[0],)
                    result.extend(Candidate(instances, batch, delay, kind) for delay in delays)
        return result

    def neighbours(self, at: Candidate, dimension: str, direction: int) -> Candidate | None:
        """The next value of ``dimension`` from ``at`` (up: +1, down: -1), or None at the edge."""
        values, field = {"instances": (self.instances, "instances"), "batch": (self.batch_sizes, "max_batch_size"),
                         "delay": (self.delays_us, "delay_us"), "kind": (self.kinds, "kind")}[dimension]
        if dimension == "delay" and not at.dynamic_batching:
            return None
        index = values.index(getattr(at, field)) + direction
        if not 0 <= index < len(values):
            return None
        return replace(at, **{field: values[index]})


def batch_sizes_for(config: mc.ModelConfig, largest: int | None = None, floor: int = 0,
                    floor_reason: str = "") -> tuple[int, ...]:
    """Powers of two from 1 up to the model's max_batch_size (or ``largest``); (0,) for a model that does not
    batch: its inputs have no batch axis, and no config can give it one. ``floor``: the smallest max_batch_size
    the repository around the model allows (an ensemble over it batches that much: a step may not batch less)."""
    if config.max_batch_size <= 0:
        if largest:
            raise TuneInputError(f"'{config.name}' does not batch (max_batch_size 0): --max-batch-size does not "
                                 "apply", hint="drop --max-batch-size; instances are tuned")
        return (0,)
    top = largest or config.max_batch_size
    sizes, size = [], 1
    while size <= top:
        sizes.append(size)
        size *= 2
    if sizes[-1] != top:
        sizes.append(top)
    if floor > top:
        raise TuneInputError(f"'{config.name}' may not batch less than {floor} ({floor_reason}), above "
                             f"--max-batch-size {top}", hint=f"give --max-batch-size {floor} or more")
    return tuple(size for size in sizes if size >= floor) if floor else tuple(sizes)


def tunable(config: mc.ModelConfig) -> None:
    """Refuse models whose serving a configuration of this kind does not describe."""
    name = config.name
    if config.platform == "ensemble":
        raise TuneInputError(f"'{name}' is an ensemble: its steps run with their own instances and batching",
                             hint="tune each step by its name (edge-tune STEP --repo DIR)")
    if config.model_transaction_policy.decoupled:
        raise TuneInputError(f"'{name}' is decoupled (answers over a stream): edge-tune measures request/response "
                             "models", hint="measure it with Client.stream in your own loop")
    if config.HasField("sequence_batching"):
        raise TuneInputError(f"'{name}' is stateful (sequence batcher): its requests cannot be sent as independent "
                             "load", hint="tune a stateless model")


def configure(config: mc.ModelConfig, candidate: Candidate) -> mc.ModelConfig:
    """A copy of ``config`` serving as ``candidate`` says."""
    result = copy.deepcopy(config)
    kind = _kind(config, candidate.kind)
    group = mc.ModelInstanceGroup(count=candidate.instances, kind=kind)
    if candidate.kind in ("dla0", "dla1"):
        group.secondary_devices.add(kind=mc.ModelInstanceGroup.SecondaryDevice.KIND_NVDLA,
                                    device_id=int(candidate.kind[-1]))
    if len(config.instance_group) == 1:
        group.name = config.instance_group[0].name
        group.gpus.extend(config.instance_group[0].gpus if kind == mc.ModelInstanceGroup.KIND_GPU else ())
    del result.instance_group[:]
    result.instance_group.append(group)
    if config.max_batch_size > 0:
        result.max_batch_size = max(1, candidate.max_batch_size)
        if candidate.dynamic_batching:
            batching = result.dynamic_batching
            batching.max_queue_delay_microseconds = candidate.delay_us
            kept = [size for size in config.dynamic_batching.preferred_batch_size if size <= candidate.max_batch_size]
            del batching.preferred_batch_size[:]
            batching.preferred_batch_size.extend(kept)
        else:
            result.ClearField("dynamic_batching")
    return result


def candidate_of(config: mc.ModelConfig) -> Candidate:
    """The configuration a config serves now (its first instance group's count, batch and delay)."""
    count = sum(max(1, g.count) for g in config.instance_group) or 1
    batch = config.max_batch_size if config.max_batch_size > 0 else 0
    if batch > 1 and not config.HasField("dynamic_batching"):
        batch = 1  # requests run alone: the same as a batch of 1
    delay = config.dynamic_batching.max_queue_delay_microseconds if batch > 1 else 0
    return Candidate(count, batch, delay)


def _kind(config: mc.ModelConfig, name: str) -> int:
    kinds = mc.ModelInstanceGroup
    if name == "auto":
        return config.instance_group[0].kind if len(config.instance_group) else kinds.KIND_AUTO
    if name == "cpu":
        return kinds.KIND_CPU
    return kinds.KIND_GPU  # gpu, and the DLA cores (scheduled from the GPU's instance)
