"""Which TensorRT API generation a ``tensorrt`` module belongs to (see the table in the TensorRT notes)."""

from __future__ import annotations

import re
from types import ModuleType

from orinkit.convert.errors import EngineBuildError

_VERSION = re.compile(r"^(\d+)\.(\d+)")


def generation(trt: ModuleType) -> int:
    """8 for 8.5/8.6 (JetPack 5/6.0), 10 for 9.x/10.x (JetPack 6.1/6.2), 11 for 11 and later (JetPack 7.2+)."""
    version = str(getattr(trt, "__version__", ""))
    match = _VERSION.match(version)
    if not match:
        raise EngineBuildError(f"cannot tell the TensorRT version from '{version}'",
                               hint="reinstall TensorRT from JetPack (apt: python3-libnvinfer)")
    major, minor = int(match[1]), int(match[2])
    if (major, minor) < (8, 5):
        raise EngineBuildError(
            f"TensorRT {version} is too old: the tensor-name API needs TensorRT 8.5+",
            hint="flash JetPack 5.1 or newer (TensorRT 8.5+), or build the engine on a newer device of the same model",
        )
    if major == 8:
        return 8
    return 10 if major in (9, 10) else 11
