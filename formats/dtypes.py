"""One table for the dtype names of Triton's config, the KServe protocol, numpy, ONNX and TensorRT."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from orinkit.formats.errors import FormatError


@dataclass(frozen=True)
class DType:
    triton: str  # "FP32": the protocol's name; the config's is "TYPE_" + this
    numpy: str | None  # numpy dtype name; None where numpy has no equivalent
    onnx: int  # onnx.TensorProto enum value
    tensorrt: str | None  # tensorrt.DataType member name

    @property
    def config_name(self) -> str:
        return f"TYPE_{'STRING' if self.triton == 'BYTES' else self.triton}"


# onnx.TensorProto values are part of the ONNX standard, so they are written out instead of importing onnx here.
_TABLE = (
    DType("BOOL", "bool", 9, "BOOL"),
    DType("UINT8", "uint8", 2, "UINT8"),
    DType("UINT16", "uint16", 4, None),
    DType("UINT32", "uint32", 12, None),
    DType("UINT64", "uint64", 13, None),
    DType("INT8", "int8", 3, "INT8"),
    DType("INT16", "int16", 5, None),
    DType("INT32", "int32", 6, "INT32"),
    DType("INT64", "int64", 7, "INT64"),
    DType("FP16", "float16", 10, "HALF"),
    DType("FP32", "float32", 1, "FLOAT"),
    DType("FP64", "float64", 11, None),
    DType("BF16", None, 16, "BF16"),
    DType("BYTES", "object", 8, None),
)
_BY_TRITON = {d.triton: d for d in _TABLE}
_BY_CONFIG = {d.config_name: d for d in _TABLE}
_BY_ONNX = {d.onnx: d for d in _TABLE}
_BY_TENSORRT = {d.tensorrt: d for d in _TABLE if d.tensorrt}
_BY_NUMPY = {d.numpy: d for d in _TABLE if d.numpy}

NAMES = tuple(d.triton for d in _TABLE)


def dtype(name: str) -> DType:
    """Look a dtype up by its protocol name ("FP32"), config name ("TYPE_FP32") or numpy name ("float32")."""
    key = name.strip()
    found = _BY_TRITON.get(key.upper()) or _BY_CONFIG.get(key.upper()) or _BY_NUMPY.get(key.lower())
    if key.upper() == "STRING":
        found = _BY_TRITON["BYTES"]
    if found is None:
        raise FormatError(f"unknown dtype '{name}'", hint=f"use one of {', '.join(NAMES)}")
    return found


def from_onnx(elem_type: int) -> DType:
    try:
        return _BY_ONNX[elem_type]
    except KeyError:
        raise FormatError(
            f"ONNX element type {elem_type} has no Triton equivalent", hint="cast that tensor in the model"
        ) from None


def from_tensorrt(value) -> DType:
    """From a tensorrt.DataType member (its ``.name``, e.g. "HALF") or its name ("DataType.HALF" as str() gives)."""
    name = value if isinstance(value, str) else getattr(value, "name", str(value))
    try:
        return _BY_TENSORRT[name.rpartition(".")[2]]
    except KeyError:
        raise FormatError(f"TensorRT type {name} has no Triton equivalent", hint="cast it in the model") from None


def from_numpy(value) -> DType:
    kind = np.dtype(value)
    if kind.kind in "SUO":
        return _BY_TRITON["BYTES"]
    try:
        return _BY_NUMPY[kind.name]
    except KeyError:
        raise FormatError(f"numpy dtype {kind} has no Triton equivalent", hint="cast it first") from None
