"""Shared formats: the one Triton dtype table, the tensor spec and the engine manifest.

A leaf package: it imports only ``orinkit.core`` and numpy, so ``orinkit.convert`` (which writes manifests) and
``orinkit.repo`` (which reads them) both depend on it and never on each other.
"""

from orinkit.formats.dtypes import DType, dtype, from_numpy, from_onnx, from_tensorrt
from orinkit.formats.engine import describe_engine
from orinkit.formats.errors import FormatError, ManifestError
from orinkit.formats.manifest import (
    EngineManifest,
    NmsRecord,
    ProfileShape,
    manifest_path,
    read_manifest,
    write_manifest,
)
from orinkit.formats.tensors import TensorSpec, dims_compatible, dims_fit

__all__ = [
    "DType",
    "EngineManifest",
    "FormatError",
    "ManifestError",
    "NmsRecord",
    "ProfileShape",
    "TensorSpec",
    "dims_compatible",
    "describe_engine",
    "dims_fit",
    "dtype",
    "from_numpy",
    "from_onnx",
    "from_tensorrt",
    "manifest_path",
    "read_manifest",
    "write_manifest",
]
