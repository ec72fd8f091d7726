"""What users tune in a model's config: instances, batching (dynamic or per sequence), decoupled responses,
version policy, warmup, accelerators."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orinkit.repo.errors import SignatureError

INSTANCE_KINDS = ("auto", "KIND_CPU", "KIND_GPU", "KIND_AUTO")


@dataclass(frozen=True)
class VersionPolicy:
    """Which versions Triton serves: the latest N, all, or specific ones."""

    kind: str = "latest"  # latest | all | specific
    latest: int = 1
    versions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "versions", tuple(sorted(set(int(v) for v in self.versions))))
        if self.kind not in ("latest", "all", "specific"):
            raise SignatureError(f"version policy '{self.kind}' is unknown", hint="use latest:N, all or specific:1,2")
        if self.kind == "latest" and self.latest < 1:
            raise SignatureError("version policy latest needs N >= 1", hint="write latest:1")
        if self.kind == "specific" and (not self.versions or min(self.versions) < 1):
            raise SignatureError("version policy specific needs version numbers >= 1", hint="write specific:1,2")

    @classmethod
    def parse(cls, text: str) -> VersionPolicy:
        """``latest:N``, ``all`` or ``specific:1,3``."""
        match = re.fullmatch(r"\s*(latest|all|specific)\s*(?::\s*([\d,\s]+))?\s*", text)
        if not match:
            raise SignatureError(f"version policy '{text}' is not understood", hint="use latest:N, all or specific:1,2")
        kind, numbers = match[1], [int(n) for n in (match[2] or "").replace(" ", "").split(",") if n]
        if kind == "latest":
            return cls("latest", latest=numbers[0] if numbers else 1)
        if kind == "specific":
            return cls("specific", versions=tuple(numbers))
        return cls("all")

    def served(self, available: list[int]) -> list[int]:
        """The versions Triton serves out of ``available`` under this policy."""
        ordered = sorted(available)
        if self.kind == "all":
            return ordered
        if self.kind == "specific":
            return [v for v in ordered if v in self.versions]
        return ordered[-self.latest :]


SEQUENCE_STRATEGIES = ("direct", "oldest")
CORRELATION_TYPES = ("UINT64", "INT64", "UINT32", "INT32", "STRING")


@dataclass(frozen=True, kw_only=True)
class SequenceBatching:
    """A stateful model's sequence batcher: every request of one sequence goes to the same instance, and the model
    reads the control tensors (START, END, CORRID) that say where a sequence begins and ends and whose it is.

    ``max_idle_us``: Triton drops a sequence idle longer than this (its default, 1 s, is shorter than many video
    pipelines pause), so the default here is 10 s."""

    strategy: str = "direct"
    max_idle_us: int = 10_000_000
    start: str | None = "START"
    end: str | None = "END"
    ready: str | None = None
    correlation_id: str | None = "CORRID"
    correlation_type: str = "UINT64"

    def __post_init__(self) -> None:
        if self.strategy not in SEQUENCE_STRATEGIES:
            raise SignatureError(f"sequence strategy '{self.strategy}' is unknown", hint="use direct or oldest")
        if self.correlation_type not in CORRELATION_TYPES:
            raise SignatureError(f"correlation id type '{self.correlation_type}' is unknown",
                                 hint=f"use one of {', '.join(CORRELATION_TYPES)}")
        if self.max_idle_us < 1:
            raise SignatureError(f"sequence idle limit {self.max_idle_us} us is below 1", hint="use 1 or more")
        names = [n for n in (self.start, self.end, self.ready, self.correlation_id) if n]
        if len(set(names)) != len(names):
            raise SignatureError(f"sequence control tensors {names} repeat a name", hint="give each its own name")

    @property
    def control_names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.start, self.end, self.ready, self.correlation_id) if n)


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Tuning written into a generated config; every default is what Triton does unless told otherwise."""

    max_batch_size: int | None = None  # None: from the artifact (8 for a dynamic batch axis, else 0)
    instance_count: int = 1
    instance_kind: str = "auto"  # auto: KIND_CPU for Python models, Triton's default otherwise
    dynamic_batching: bool = False
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    version_policy: VersionPolicy | None = None
    warmup: bool = False  # one zero-filled request per input at batch 1 while loading
    tensorrt_fp16: bool = False  # onnxruntime_onnx on a GPU: TensorRT execution accelerator in FP16
    execution_env: str | None = None  # python: a conda-pack archive for the stub (EXECUTION_ENV_PATH)
    parameters: tuple[tuple[str, str], ...] = ()  # the config's parameters map, e.g. a Python model's settings
    decoupled: bool = False  # any number of responses per request (Python models; called with Client.stream)
    sequence: SequenceBatching | None = None  # a stateful model (called with Client.sequence)

    def __post_init__(self) -> None:
        object.__setattr__(self, "preferred_batch_sizes", tuple(self.preferred_batch_sizes))
        items = self.parameters.items() if isinstance(self.parameters, dict) else self.parameters
        object.__setattr__(self, "parameters", tuple((str(k), str(v)) for k, v in items))
        if self.instance_count < 1:
            raise SignatureError(f"instance count {self.instance_count} is below 1", hint="use 1 or more")
        if self.instance_kind not in INSTANCE_KINDS:
            raise SignatureError(
                f"instance kind '{self.instance_kind}' is unknown", hint=f"use one of {', '.join(INSTANCE_KINDS)}"
            )
        if self.max_batch_size is not None and self.max_batch_size < 0:
            raise SignatureError(f"max_batch_size {self.max_batch_size} is negative", hint="use 0 or more")
        if (self.preferred_batch_sizes or self.max_queue_delay_us) and not self.dynamic_batching:
            raise SignatureError(
                "preferred batch sizes and queue delay only apply with dynamic batching",
                hint="add --dynamic-batching",
            )
        if any(size < 1 for size in self.preferred_batch_sizes) or self.max_queue_delay_us < 0:
            raise SignatureError("preferred batch sizes must be >= 1 and the queue delay >= 0", hint="fix the values")
        if self.sequence is not None and self.dynamic_batching:
            # One scheduler per model: Triton's config holds dynamic_batching or sequence_batching, never both.
            raise SignatureError("a model has either a sequence batcher or dynamic batching, not both",
                                 hint="drop --dynamic-batching (the sequence batcher batches sequences itself)")
