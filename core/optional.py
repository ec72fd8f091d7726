"""Lazy imports of heavy optional dependencies, with an error that names what to install.

``import orinkit.client`` must stay light on a Jetson, so torch, tensorrt, pycuda and onnxruntime are imported
only inside the functions that use them, through :func:`require`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from types import ModuleType

from orinkit.core.errors import BrokenDependencyError, MissingExtraError

_JETPACK_HINT = (
    "on a Jetson it comes with JetPack ({apt}): create the venv with --system-site-packages; "
    "elsewhere run: pip install 'orinkit[{extra}]'"
)

# How each optional module gets onto a machine.
INSTALL_HINTS = {
    "torch": "run: pip install 'orinkit[torch]'",
    "onnxruntime": "run: pip install 'orinkit[convert]' (ONNX Runtime runs edge-convert's accuracy gates)",
    "pytriton": "run: pip install 'orinkit[server]'",
    "PIL": "run: pip install 'orinkit[server]' (Pillow)",
    "boto3": "run: pip install 'orinkit[fleet]'",
    "modelopt": "run: pip install 'orinkit[int8]' (nvidia-modelopt without its [onnx] extra; see the README)",
    "matplotlib": "run: pip install 'orinkit[tune]' (matplotlib, for the plot)",
    "av": "run: pip install 'orinkit[video]' (PyAV; 17.1 on JetPack 6's Python 3.10)",
    "gi": "GStreamer's Python bindings come from the system: apt install python3-gi gstreamer1.0-tools (JetPack has "
          "them); create the venv with --system-site-packages",
    "tensorrt": _JETPACK_HINT.format(apt="apt: python3-libnvinfer", extra="tensorrt"),
    "pycuda": _JETPACK_HINT.format(apt="pip install pycuda against JetPack's CUDA", extra="device"),
}


def require(module: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtraError` naming the extra that provides it."""
    top = module.partition(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in (top, module):
            raise BrokenDependencyError(top, exc) from exc
        hint = INSTALL_HINTS.get(top, f"run: pip install {top}")
        raise MissingExtraError(top, hint=hint) from exc
    except ImportError as exc:
        raise BrokenDependencyError(top, exc) from exc


def _release(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split("."):
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def require_version(distribution: str, module: str, minimum: str) -> ModuleType:
    """:func:`require` ``module``, and check that ``distribution`` is at least ``minimum`` (as Polygraphy's lazy
    imports do): an older release fails here with what to install, not later with an obscure error."""
    from importlib import metadata

    loaded = require(module)
    try:
        found = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        found = str(getattr(loaded, "__version__", ""))
    if _release(found) < _release(minimum):
        error = MissingExtraError(module, hint=f"run: pip install '{distribution}>={minimum}'")
        error.message = f"{distribution} {found or '(unknown version)'} is installed, {minimum} or newer is needed"
        raise error
    return loaded


@contextlib.contextmanager
def current_folder_importable() -> Iterator[None]:
    """Within the block, modules in the current folder import as they do under ``python -m``: for a
    ``package.module`` a user names on a command line (``edge-convert --torch mypkg.models:build``, run from the
    folder that holds ``mypkg``). A console script's sys.path starts with its own bin folder instead, so the
    current folder goes first for the block only, and only when sys.path does not hold it already."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # the current folder was removed: nothing there to import
        yield
        return
    if any(os.path.realpath(entry or os.curdir) == here for entry in sys.path if isinstance(entry, str)):
        yield
        return
    sys.path.insert(0, here)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(here)
