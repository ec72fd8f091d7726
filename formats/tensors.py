"""One tensor described once: a name, a dtype from the one dtype table, and dims (-1 for a dynamic size).

What a dims tuple means is said where it is used: in a Triton config it excludes the batch axis of a model that
batches; in an engine manifest it is the engine's full shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from orinkit.formats.dtypes import dtype
from orinkit.formats.errors import FormatError

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
            raise FormatError("a tensor needs a name", hint="name every input and output")
        if any(d == 0 or d < -1 for d in self.dims):
            raise FormatError(
                f"tensor '{self.name}' has dims {list(self.dims)}", hint="use positive sizes, or -1 for dynamic ones"
            )

    @classmethod
    def parse(cls, text: str) -> TensorSpec:
        """``NAME:DTYPE:DIMS`` as in ``image:FP32:3x360x640`` (``-1`` for dynamic, ``scalar`` for none)."""
        match = _SPEC.match(text.strip())
        if not match:
            raise FormatError(
                f"tensor spec '{text}' is not NAME:DTYPE:DIMS", hint="write it like image:FP32:3x360x640"
            )
        dims_text = match["dims"]
        dims = () if dims_text == "scalar" else tuple(int(d) for d in dims_text.split("x"))
        return cls(match["name"], match["dtype"], dims)

    def __str__(self) -> str:
        return f"{self.name}:{self.dtype}:{'x'.join(map(str, self.dims)) or 'scalar'}"

    @property
    def numpy_dtype(self):
        """The numpy scalar type of this tensor (np.object_ for BYTES)."""
        return np.dtype(dtype(self.dtype).numpy).type


def dims_compatible(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Same rank and equal sizes wherever neither side is dynamic (-1)."""
    return len(a) == len(b) and all(x == y or -1 in (x, y) for x, y in zip(a, b))


def dims_fit(declared: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """A concrete ``shape`` fits ``declared`` dims: same rank, equal sizes where declared is not dynamic (-1)."""
    return len(declared) == len(shape) and all(d in (-1, s) for d, s in zip(declared, shape))
