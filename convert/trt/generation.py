"""Which TensorRT API generation a ``tensorrt`` module belongs to, and which releases can build for the DLA.

What each JetPack brings to the Orin (docs/reference/versions.md has the sources): 8.5/8.6 on JetPack 5 and 6.0,
10.3 on 6.1/6.2, 10.16 on 7.2 and 7.2.1 (OE4T/meta-tegra #2224), and 11.4.1 installable on 7.2.2 or later as the
SBSA build (TensorRT 11.4.1 release notes). The generation follows the major version alone, so JetPack 7.2's 10.16
takes the 10.x path (FP16 by flag, INT8 as a strongly typed Q/DQ graph) and 11.4.1 the 11.x one (strongly typed only).
"""

from __future__ import annotations

import re
from types import ModuleType

from orinkit.convert.errors import EngineBuildError

_VERSION = re.compile(r"^(\d+)\.(\d+)")

# DLA by release ("Working with DLA", TensorRT 11.4.1): "TensorRT 10.7 was the last 10.x release that supported
# DLA", so JetPack 7.2's 10.16 has none (its L4T R39 ships no libnvdla_compiler.so, frigate #23582); 11.0-11.3 have
# none and 11.4.0 only on Windows on ARM; 11.4.1 restores it on AGX Orin under JetPack 7.2.2+, strongly typed.
DLA_LAST_10 = (10, 7)
DLA_BACK_IN = (11, 4, 1)
DLA_HINT = ("leave out --dla-core to build for the GPU, or move to JetPack 7.2.2+ with TensorRT 11.4.1 "
            "(NVIDIA's SBSA build), which runs the DLA again")


def release(version: str) -> tuple[int, ...]:
    """``"10.16.0.1"`` → ``(10, 16, 0)``: the first three numbers of a TensorRT version."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def dla_unavailable(version: str) -> str | None:
    """Why TensorRT ``version`` builds nothing for the Orin's DLA, or None where it can (8.5-10.7, 11.4.1+)."""
    number = release(version)
    if not number:
        return None
    if number[0] == 10 and number[:2] > DLA_LAST_10:
        return "10.7 was the last TensorRT 10.x with DLA (JetPack 7.2's 10.16 has none)"
    if number[0] >= 11 and number < DLA_BACK_IN:
        return "TensorRT 11 has no DLA on Orin before 11.4.1 (JetPack 7.2.2)"
    return None


def generation(trt: ModuleType) -> int:
    """8 for 8.5/8.6 (JetPack 5/6.0), 10 for 9.x/10.x (JetPack 6.1/6.2 and 7.2/7.2.1's 10.16), 11 for 11 and
    later (11.4.1 on JetPack 7.2.2+)."""
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
