"""A model's inputs and outputs as Triton sees them: names, dtypes, dims without the batch axis, batch limit."""

from __future__ import annotations

import re
from dataclasses import dataclass

from orinkit.repo.dtypes import dtype
from orinkit.repo.errors import SignatureError

_SPEC = re.compile(r"^(?P<name>[^:]+):(?P<dtype>[A-Za-z0-9_]+):(?P<dims>-?\d+(?:x-?\d+)*|scalar)$")


@dataclass(frozen=True)
class TensorSpec:
    """One tensor: ``dims`` excludes the batch axis when the model batches; -1 marks a dynamic dimension."""

    name: str
    dtype: str
    dims: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype(self.dtype).triton)
        object.__setattr__(self, "dims", tuple(int(d) for d in self.dims))
        if not self.name:
            raise SignatureError("a tensor needs a name", hint="name every input and output")
        if any(d == 0 or d < -1 for d in self.dims):
            raise SignatureError(
                f"tensor '{self.name}' has dims {list(self.dims)}", hint="use positive sizes, or -1 for dynamic ones"
            )

    @classmethod
    def parse(cls, text: str) -> TensorSpec:
        """``NAME:DTYPE:DIMS`` as in ``image:FP32:3x360x640`` (``-1`` for dynamic, ``scalar`` for none)."""
        match = _SPEC.match(text.strip())
        if not match:
            raise SignatureError(
                f"tensor spec '{text}' is not NAME:DTYPE:DIMS", hint="write it like image:FP32:3x360x640"
            )
        dims_text = match["dims"]
        dims = () if dims_text == "scalar" else tuple(int(d) for d in dims_text.split("x"))
        return cls(match["name"], match["dtype"], dims)

    def __str__(self) -> str:
        return f"{self.name}:{self.dtype}:{'x'.join(map(str, self.dims)) or 'scalar'}"


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


def dims_compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Same rank and equal sizes wherever neither side is dynamic (-1)."""
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))
