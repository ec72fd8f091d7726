"""The TensorRT, CUDA and Python versions JetPack put on a device, and TensorRT's own count of DLA cores.

Files under the root come first: they describe the tree being read, where importing a Python module would
describe the machine doing the reading. ``tensorrt`` is imported only for the live device (root ``/``), and
lazily, so ``import orinkit.jetson`` stays light.
"""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path

from orinkit.jetson.commands import CUDA_PACKAGES, NVCC_VERSION, PYTHON3_VERSION, TENSORRT_PACKAGES, Runner

TENSORRT_HEADER = Path("usr/include/aarch64-linux-gnu/NvInferVersion.h")
CUDA_VERSION_JSON = Path("usr/local/cuda/version.json")
CUDA_VERSION_TXT = Path("usr/local/cuda/version.txt")  # CUDA 10.2 (JetPack 4) had no version.json

_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+(\w+)", re.MULTILINE)
_VERSION = re.compile(r"\d+(?:\.\d+)+")


def _is_live(root: Path) -> bool:
    return root.resolve() == Path("/")


def _header_version(text: str) -> str | None:
    """NV_TENSORRT_MAJOR and friends; TensorRT 10.x headers define them through TRT_*_ENTERPRISE macros."""
    defines = dict(_DEFINE.findall(text))

    def value(name: str) -> str | None:
        seen = set()
        while name in defines and name not in seen:
            seen.add(name)
            name = defines[name]
        return name if name.isdigit() else None

    parts = [value(f"NV_TENSORRT_{part}") for part in ("MAJOR", "MINOR", "PATCH", "BUILD")]
    if parts[0] is None or parts[1] is None:
        return None
    return ".".join(p for p in parts if p is not None)


def _package_version(output: str | None, preferred: tuple[str, ...]) -> str | None:
    """From ``PACKAGE VERSION`` lines: the first preferred package that is installed (an empty version means
    dpkg knows the package but it is not installed)."""
    if not output:
        return None
    installed = {}
    for line in output.splitlines():
        name, _, version = line.strip().partition(" ")
        match = _VERSION.match(version.strip())
        if name and match:
            installed[name] = match[0]
    for prefix in preferred:
        for name in sorted(installed, reverse=True):
            if name == prefix or (prefix.endswith("*") and name.startswith(prefix[:-1])):
                return installed[name]
    return None


def tensorrt_module_version() -> str | None:
    """The version of the ``tensorrt`` Python module this interpreter imports (what builds and loads plans)."""
    try:
        import tensorrt
    except ImportError:
        return None
    return str(tensorrt.__version__)


def tensorrt_version(root: Path = Path("/"), run: Runner | None = None) -> str | None:
    try:
        version = _header_version((root / TENSORRT_HEADER).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        version = None
    if version is None and _is_live(root):
        version = tensorrt_module_version()
    if version is None and run is not None:
        version = _package_version(run(TENSORRT_PACKAGES), ("tensorrt", "libnvinfer*"))
    return version


def cuda_version(root: Path = Path("/"), run: Runner | None = None) -> str | None:
    try:
        return str(json.loads((root / CUDA_VERSION_JSON).read_text())["cuda"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        match = _VERSION.search((root / CUDA_VERSION_TXT).read_text())
        if match:
            return match[0]
    except OSError:
        pass
    if run is None:
        return None
    output = run(NVCC_VERSION)
    match = re.search(r"release [\d.]+, V(\d+(?:\.\d+)+)", output or "")
    if match:
        return match[1]
    return _package_version(run(CUDA_PACKAGES), ("cuda-cudart-*",))


def python_version(root: Path = Path("/"), run: Runner | None = None) -> str | None:
    """The system python3, the interpreter JetPack's TensorRT bindings and Triton's Python backend are built for;
    for the live device, the running interpreter when python3 cannot be asked."""
    output = run(PYTHON3_VERSION) if run is not None else None
    match = _VERSION.search(output or "")
    if match:
        return match[0]
    return platform.python_version() if _is_live(root) else None


def tensorrt_dla_cores() -> int | None:
    """``Builder(Logger()).num_DLA_cores`` when TensorRT imports and can make a builder, else None."""
    from orinkit.core.optional import require

    try:
        trt = require("tensorrt")
    except ImportError:
        return None
    try:
        return int(trt.Builder(trt.Logger(trt.Logger.ERROR)).num_DLA_cores)
    except Exception:  # no GPU or no driver: TensorRT reports it with its own exception types
        return None
