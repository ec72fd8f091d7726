"""Which Jetson module this is, from the device tree, and how many DLA cores it has.

TensorRT's ``Builder.num_DLA_cores`` is the truth on a device (see :mod:`orinkit.jetson.software`); the table
here answers where TensorRT is not installed, and for captured trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from orinkit.jetson.memory import EIGHT_GB_BOARD_KB

MODEL = Path("proc/device-tree/model")
COMPATIBLE = Path("proc/device-tree/compatible")


@dataclass(frozen=True)
class Module:
    name: str
    dla_cores: int | None


# Module part numbers as they appear in the device tree's compatible list.
_PART_NUMBERS = {
    "p3701-0000": Module("Jetson AGX Orin", 2),
    "p3701-0004": Module("Jetson AGX Orin 32GB", 2),
    "p3701-0005": Module("Jetson AGX Orin 64GB", 2),
    "p3701-0008": Module("Jetson AGX Orin Industrial", 2),
    "p3767-0000": Module("Jetson Orin NX 16GB", 2),
    "p3767-0001": Module("Jetson Orin NX 8GB", 1),
    "p3767-0003": Module("Jetson Orin Nano 8GB", 0),
    "p3767-0004": Module("Jetson Orin Nano 4GB", 0),
    "p3767-0005": Module("Jetson Orin Nano 8GB", 0),
}


def _device_tree_strings(path: Path) -> tuple[str, ...]:
    """Device-tree string properties are NUL-terminated, string lists NUL-separated."""
    try:
        raw = path.read_bytes()
    except OSError:
        return ()
    return tuple(part.decode("utf-8", errors="replace").strip() for part in raw.split(b"\0") if part.strip())


def read_model(root: Path = Path("/")) -> str | None:
    strings = _device_tree_strings(root / MODEL)
    return strings[0] if strings else None


def read_compatible(root: Path = Path("/")) -> tuple[str, ...]:
    return _device_tree_strings(root / COMPATIBLE)


def identify_module(model: str | None, compatible: tuple[str, ...] = (),
                    mem_total_kb: int | None = None) -> Module | None:
    """The part number in the compatible list when there is one; otherwise the model name, where the Orin NX
    8GB and 16GB share one name (their developer kits both say "Orin NX Engineering Reference Developer Kit")
    and only the memory tells them apart."""
    for entry in compatible:
        for part, module in _PART_NUMBERS.items():
            if part in entry:
                return module
    if not model:
        return None
    if "AGX Orin" in model:
        return Module("Jetson AGX Orin", 2)
    if "Orin NX" in model:
        if mem_total_kb is None:
            return Module("Jetson Orin NX", None)
        if mem_total_kb <= EIGHT_GB_BOARD_KB:
            return Module("Jetson Orin NX 8GB", 1)
        return Module("Jetson Orin NX 16GB", 2)
    if "Orin Nano" in model:
        return Module("Jetson Orin Nano", 0)
    return None
