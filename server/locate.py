"""Find a tritonserver installation and describe its layout.

Three layouts exist, and each needs a different backend directory and library path:

* a Jetson release tarball (or an NGC container's /opt/tritonserver): ``bin/``, ``lib/``, ``backends/``;
* the server bundled in the ``nvidia-pytriton`` wheel: ``bin/``, ``backends/python/`` without a stub, the stubs per
  Python version in ``python_backend_stubs/``, and its shared libraries in ``nvidia_pytriton.libs/`` beside it;
* either of them named explicitly, by argument or by ``ORINKIT_TRITONSERVER_HOME``.
"""

from __future__ import annotations

import enum
import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orinkit.server.errors import TritonNotFoundError

HOME_ENV = "ORINKIT_TRITONSERVER_HOME"
# Where the Jetson tarball is conventionally unpacked, and where NGC containers keep the server.
DEFAULT_HOMES = (Path("/opt/tritonserver"),)


class Layout(enum.Enum):
    RELEASE = "release"  # bin/ lib/ backends/, as in the Jetson tarball
    BUNDLED = "bundled"  # the nvidia-pytriton wheel's copy, Python stubs kept apart


@dataclass(frozen=True)
class TritonInstall:
    """A tritonserver found on this machine; ``source`` says how it was found."""

    home: Path
    layout: Layout
    source: str

    @property
    def binary(self) -> Path:
        return self.home / "bin" / "tritonserver"

    @property
    def backends(self) -> Path:
        return self.home / "backends"

    @property
    def python_stubs(self) -> Path:
        return self.home / "python_backend_stubs"

    @property
    def library_dirs(self) -> tuple[Path, ...]:
        candidates = [self.home / "lib"]
        if self.layout is Layout.BUNDLED:
            # The wheel's auditwheel-vendored libraries sit at site-packages level.
            candidates.append(self.home.parent.parent / "nvidia_pytriton.libs")
        return tuple(p for p in candidates if p.is_dir())

    def describe(self) -> str:
        return f"{self.binary} ({self.source})"


def _layout_of(home: Path) -> Layout | None:
    if not (home / "bin" / "tritonserver").is_file():
        return None
    if (home / "python_backend_stubs").is_dir():
        return Layout.BUNDLED
    return Layout.RELEASE


def _checked(home: Path, source: str) -> TritonInstall:
    home = home.expanduser().resolve()
    if not home.is_dir():
        raise TritonNotFoundError(
            f"tritonserver home '{home}' ({source}) does not exist",
            hint="point it at the unpacked Triton release (the folder holding bin/tritonserver)",
        )
    layout = _layout_of(home)
    if layout is None:
        raise TritonNotFoundError(
            f"'{home}' ({source}) holds no bin/tritonserver",
            hint="point it at the unpacked Triton release (the folder holding bin/ lib/ backends/)",
        )
    if not os.access(home / "bin" / "tritonserver", os.X_OK):
        raise TritonNotFoundError(
            f"'{home / 'bin' / 'tritonserver'}' ({source}) is not executable",
            hint="run: chmod +x on it, or unpack the release again",
        )
    return TritonInstall(home=home, layout=layout, source=source)


def bundled_home() -> Path | None:
    """The tritonserver folder inside an installed nvidia-pytriton wheel, without importing pytriton."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        home = Path(location) / "tritonserver"
        if home.is_dir():
            return home
    return None


def locate_tritonserver(
    home: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    default_homes: Sequence[Path] = DEFAULT_HOMES,
) -> TritonInstall:
    """Find tritonserver: ``home``, then ``$ORINKIT_TRITONSERVER_HOME``, then /opt/tritonserver, then the
    server bundled in nvidia-pytriton. An explicit choice that does not hold a server is an error, never skipped."""
    environ = os.environ if environ is None else environ
    if home is not None:
        return _checked(Path(home), "given explicitly")
    if environ.get(HOME_ENV):
        return _checked(Path(environ[HOME_ENV]), f"from ${HOME_ENV}")
    for candidate in default_homes:
        if _layout_of(candidate) is not None:
            return _checked(candidate, f"found at {candidate}")
    bundled = bundled_home()
    if bundled is not None:
        return _checked(bundled, "bundled in the nvidia-pytriton wheel")
    looked = ", ".join(str(p) for p in default_homes)
    raise TritonNotFoundError(
        f"no tritonserver found (looked at ${HOME_ENV}, {looked} and the nvidia-pytriton wheel)",
        hint=(
            "on a Jetson unpack the Triton release tarball and set ORINKIT_TRITONSERVER_HOME or pass "
            "--triton-home; elsewhere run: pip install 'orinkit[server]'"
        ),
    )
