"""The backend directory tritonserver is started with.

A release tarball's ``backends/`` is used as it is. The nvidia-pytriton wheel keeps its Python-backend stubs apart,
one per Python version, because the stub must match the interpreter whose packages the Python models import; so
for it orinkit assembles ``<cache>/backends-<key>/python/`` with the backend library, its utilities module and the
stub for the chosen Python, once, and reuses it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

from orinkit.core.files import building_directory
from orinkit.server.errors import PythonStubNotFoundError, TritonNotFoundError
from orinkit.server.locate import Layout, TritonInstall

CACHE_ENV = "ORINKIT_CACHE_DIR"
STUB_NAME = "triton_python_backend_stub"
PYTHON_BACKEND_FILES = ("libtriton_python.so", "triton_python_backend_utils.py")


def cache_dir() -> Path:
    """Where orinkit keeps what it assembles: $ORINKIT_CACHE_DIR, else $XDG_CACHE_HOME/orinkit, else ~/.cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "orinkit"


def running_python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def available_python_stubs(install: TritonInstall) -> list[str]:
    if not install.python_stubs.is_dir():
        return []
    found = [p.name for p in install.python_stubs.iterdir() if (p / STUB_NAME).is_file()]
    return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".") if x.isdigit()))


def _sources(install: TritonInstall, python_version: str) -> dict[str, Path]:
    stub = install.python_stubs / python_version / STUB_NAME
    if not stub.is_file():
        available = ", ".join(available_python_stubs(install)) or "none"
        raise PythonStubNotFoundError(
            f"the server at {install.home} has no Python-backend stub for Python {python_version} "
            f"(it has: {available})",
            hint="run orinkit from a virtual environment of one of those Python versions",
        )
    sources = {name: install.backends / "python" / name for name in PYTHON_BACKEND_FILES}
    missing = [str(p) for p in sources.values() if not p.is_file()]
    if missing:
        raise TritonNotFoundError(
            f"the server at {install.home} lacks its Python backend ({', '.join(missing)})",
            hint="reinstall it: pip install --force-reinstall 'orinkit[server]'",
        )
    sources[STUB_NAME] = stub
    return sources


def _is_current(folder: Path, sources: dict[str, Path]) -> bool:
    for name, source in sources.items():
        copy = folder / "python" / name
        if not copy.is_file() or copy.stat().st_size != source.stat().st_size:
            return False
    return True


def backend_directory(
    install: TritonInstall, *, python_version: str | None = None, cache: Path | None = None, assemble: bool = True
) -> Path:
    """The folder to pass as ``--backend-directory`` for ``install``, assembling it when the layout needs that
    (``assemble=False``: only say where it would be)."""
    if install.layout is Layout.RELEASE:
        if not install.backends.is_dir():
            raise TritonNotFoundError(
                f"the server at {install.home} has no backends/ folder",
                hint="unpack the complete Triton release tarball (bin/, lib/ and backends/)",
            )
        return install.backends
    version = python_version or running_python_version()
    sources = _sources(install, version)
    key = hashlib.sha256(f"{install.home}\0{version}".encode()).hexdigest()[:16]
    target = (cache or cache_dir()) / f"backends-py{version}-{key}"
    if not assemble or _is_current(target, sources):
        return target
    if target.exists():
        # Left by an older nvidia-pytriton at the same place: replace it whole.
        shutil.rmtree(target)
    with building_directory(target) as staging:
        (staging / "python").mkdir()
        for name, source in sources.items():
            shutil.copy2(source, staging / "python" / name)
    return target
