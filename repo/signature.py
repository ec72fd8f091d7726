"""A model's inputs and outputs as Triton sees them: names, dtypes, dims without the batch axis, batch limit."""

from __future__ import annotations

from dataclasses import dataclass

from orinkit.formats.tensors import TensorSpec, dims_compatible, dims_fit
from orinkit.repo.errors import SignatureError

__all__ = ["Signature", "TensorSpec", "dims_compatible", "dims_fit"]


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    max_batch_size: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not self.inputs or not self.outputs:
            raise SignatureError("a model needs at least one input and one output", hint="declare them")
        names = [t.name for t in (*self.inputs, *self.outputs)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SignatureError(f"tensor names repeat: {', '.join(duplicates)}", hint="give each tensor its own name")
        if self.max_batch_size < 0:
            raise SignatureError(f"max_batch_size {self.max_batch_size} is negative", hint="use 0 or more")

    def input(self, name: str) -> TensorSpec | None:
        return next((t for t in self.inputs if t.name == name), None)

    def output(self, name: str) -> TensorSpec | None:
        return next((t for t in self.outputs if t.name == name), None)
