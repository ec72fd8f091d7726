"""Lazy imports of heavy optional dependencies, with an error that names what to install.

``import orinkit.client`` must stay light on a Jetson, so torch, tensorrt, pycuda and onnxruntime are imported
only inside the functions that use them, through :func:`require`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from orinkit.core.errors import BrokenDependencyError, MissingExtraError

_JETPACK_HINT = (
    "on a Jetson it comes with JetPack ({apt}): create the venv with --system-site-packages; "
    "elsewhere run: pip install 'orinkit[{extra}]'"
)

# How each optional module gets onto a machine.
INSTALL_HINTS = {
    "torch": "run: pip install 'orinkit[torch]'",
    "onnxruntime": "run: pip install 'orinkit[server]'",
    "pytriton": "run: pip install 'orinkit[server]'",
    "PIL": "run: pip install 'orinkit[server]' (Pillow)",
    "boto3": "run: pip install 'orinkit[fleet]'",
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
