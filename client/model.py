"""What a model takes and returns, read once from the server, and inputs checked against it before sending."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from orinkit.client.errors import InvalidInputError
from orinkit.repo.dtypes import dtype


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str  # Triton protocol name: FP32, INT64, BYTES, ...
    dims: tuple[int, ...]  # without the batch axis when the model batches; -1 for dynamic sizes

    @property
    def numpy_dtype(self):
        return np.dtype(dtype(self.datatype).numpy).type


@dataclass(frozen=True)
class ModelInfo:
    name: str
    version: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    max_batch_size: int

    @classmethod
    def from_config(cls, config: Mapping, version: str | None) -> ModelInfo:
        def tensors(entries) -> tuple[Tensor, ...]:
            result = []
            for entry in entries:
                kind = entry["data_type"].removeprefix("TYPE_")
                dims = tuple(int(d) for d in entry.get("dims", ()))
                if "reshape" in entry and not entry["reshape"].get("shape"):
                    dims = ()
                result.append(Tensor(entry["name"], "BYTES" if kind == "STRING" else kind, dims))
            return tuple(result)

        return cls(config["name"], version or "", tensors(config.get("input", ())),
                   tensors(config.get("output", ())), int(config.get("max_batch_size", 0)))

    def input(self, name: str) -> Tensor | None:
        return next((t for t in self.inputs if t.name == name), None)


def _cast(array: np.ndarray, tensor: Tensor) -> np.ndarray:
    """``array`` in the tensor's dtype when no value can change on the way; InvalidInputError otherwise."""
    target = np.dtype(tensor.numpy_dtype)
    source = array.dtype
    if tensor.datatype == "BYTES":
        if source.kind in "SUO":
            return array.astype(np.object_) if source.kind != "O" else array
        raise InvalidInputError(f"input '{tensor.name}' takes BYTES, got {source}", expected="BYTES",
                                given=str(source), hint="pass bytes or str in an object array")
    if source == target:
        return array
    allowed = (
        (source.kind == "f" and target.kind == "f")  # float64 → FP32/FP16: precision, not meaning, changes
        or (source.kind in "iub" and target.kind == "f")
        or (source.kind == "b" and target.kind == "b")
        or (source.kind in "iu" and target.kind in "iu" and _fits(array, target))
    )
    if not allowed:
        raise InvalidInputError(
            f"input '{tensor.name}' takes {tensor.datatype} ({target}), got {source}, which would not cast "
            "safely", expected=tensor.datatype, given=str(source), hint=f"pass {target} data",
        )
    return array.astype(target)


def _fits(array: np.ndarray, target: np.dtype) -> bool:
    if array.size == 0:
        return True
    limits = np.iinfo(target)
    return bool(array.min() >= limits.min and array.max() <= limits.max)


def _dims_match(dims: Sequence[int], shape: Sequence[int]) -> bool:
    return len(dims) == len(shape) and all(d in (-1, s) for d, s in zip(dims, shape))


def prepare_inputs(info: ModelInfo, arrays: Sequence, named: Mapping) -> tuple[dict[str, np.ndarray], bool]:
    """Map positional (config order) and named inputs, cast and check them; True when a batch axis was added."""
    if len(arrays) > len(info.inputs):
        raise InvalidInputError(f"'{info.name}' takes {len(info.inputs)} inputs, got {len(arrays)} positional",
                                expected=len(info.inputs), given=len(arrays), hint="pass one array per input")
    values = {t.name: a for t, a in zip(info.inputs, arrays)}
    for name, array in named.items():
        if info.input(name) is None:
            raise InvalidInputError(f"'{info.name}' has no input '{name}'",
                                    hint=f"its inputs are {', '.join(t.name for t in info.inputs)}")
        if name in values:
            raise InvalidInputError(f"input '{name}' is given twice", hint="pass it positionally or by name")
        values[name] = array
    missing = [t.name for t in info.inputs if t.name not in values]
    if missing:
        raise InvalidInputError(f"'{info.name}' needs inputs {', '.join(missing)}", hint="pass every input")
    prepared, single = {}, None
    for tensor in info.inputs:
        array = np.asarray(values[tensor.name])
        array = _cast(array, tensor)
        shape = array.shape
        if info.max_batch_size > 0:
            if _dims_match(tensor.dims, shape):
                is_single = True
                array = array[None]
            elif len(shape) == len(tensor.dims) + 1 and _dims_match(tensor.dims, shape[1:]):
                is_single = False
                if shape[0] > info.max_batch_size or shape[0] < 1:
                    raise InvalidInputError(
                        f"input '{tensor.name}' has a batch of {shape[0]}, the model takes 1 to "
                        f"{info.max_batch_size}", expected=info.max_batch_size, given=shape[0],
                        hint="split the batch (map() does that for a stream of samples)")
            else:
                raise InvalidInputError(
                    f"input '{tensor.name}' has shape {list(shape)}, the model takes {list(tensor.dims)} per sample "
                    f"(optionally with a batch axis of up to {info.max_batch_size})",
                    expected=[-1, *tensor.dims], given=list(shape), hint="reshape the array")
            if single is not None and single != is_single:
                raise InvalidInputError("some inputs have a batch axis and others do not",
                                        hint="give every input the same form")
            single = is_single
        elif not _dims_match(tensor.dims, shape):
            raise InvalidInputError(f"input '{tensor.name}' has shape {list(shape)}, the model takes "
                                    f"{list(tensor.dims)}", expected=list(tensor.dims), given=list(shape),
                                    hint="reshape the array")
        prepared[tensor.name] = np.ascontiguousarray(array)
    if info.max_batch_size > 0:
        batches = {a.shape[0] for a in prepared.values()}
        if len(batches) > 1:
            raise InvalidInputError(f"inputs have different batch sizes {sorted(batches)}",
                                    hint="give every input the same batch size")
    return prepared, bool(single)
