"""Memory from /proc/meminfo. CPU and GPU share this DRAM on a Jetson, so it is also what the GPU has left."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# 8 GB modules report about 7.4 GiB after the carve-outs; 16 GB ones about 15 GiB.
EIGHT_GB_BOARD_KB = 9 * 1024 * 1024


@dataclass(frozen=True)
class Memory:
    """Sizes in kB as the kernel prints them (kibibytes). ``nvmap_used_kb`` is None where the kernel does not
    report NvMapMemUsed (older L4T kernels did, the JetPack 6 ones seen do not); ``available_kb`` is None where
    the kernel predates MemAvailable."""

    total_kb: int
    available_kb: int | None
    swap_total_kb: int
    nvmap_used_kb: int | None = None

    @property
    def is_8gb_or_less(self) -> bool:
        return self.total_kb <= EIGHT_GB_BOARD_KB


def parse_meminfo(text: str) -> Memory | None:
    """None when there is no MemTotal line: whatever the text is, it is not /proc/meminfo."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        fields = rest.split()
        if sep and fields and fields[0].isdigit():
            values[key.strip()] = int(fields[0])
    if "MemTotal" not in values:
        return None
    return Memory(
        total_kb=values["MemTotal"],
        available_kb=values.get("MemAvailable"),
        swap_total_kb=values.get("SwapTotal", 0),
        nvmap_used_kb=values.get("NvMapMemUsed"),
    )


def read_memory(root: Path = Path("/")) -> Memory | None:
    try:
        return parse_meminfo((root / "proc" / "meminfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
