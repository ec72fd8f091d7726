"""The power mode (nvpmodel) and whether the clocks are pinned (jetson_clocks).

``jetson_clocks --show`` needs root, so whether jetson_clocks ran is read from what it leaves behind in sysfs,
which anyone may read: it raises every online CPU's ``scaling_min_freq`` to its ``scaling_max_freq`` and the
GPU devfreq ``min_freq`` to its ``max_freq``. Under the default governors the minimum stays at the lowest step.
Pinned means every one of those that could be read has min == max; unknown (None) when none could be read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orinkit.jetson.commands import NVPMODEL_QUERY, Runner

_MODE = re.compile(r"NV Power Mode:\s*(\S+)")


@dataclass(frozen=True)
class PowerMode:
    name: str  # "MAXN", "MAXN_SUPER", "15W", ...
    id: int | None

    @property
    def is_maxn(self) -> bool:
        return self.name.upper().startswith("MAXN")


def parse_nvpmodel_query(text: str) -> PowerMode | None:
    """``NV Power Mode: MAXN`` then the mode id alone on the next line. Warnings (``NVPM WARN: …``) may come first,
    and ``--verbose`` prefixes the mode line with ``NVPM VERB: Current mode:``."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = _MODE.search(line)
        if not match:
            continue
        mode_id = next((int(rest.strip()) for rest in lines[index + 1:] if rest.strip().isdigit()), None)
        return PowerMode(match[1], mode_id)
    return None


def read_power_mode(run: Runner) -> PowerMode | None:
    output = run(NVPMODEL_QUERY)
    return parse_nvpmodel_query(output) if output else None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _cpu_pairs(root: Path) -> list[tuple[int, int]]:
    pairs = []
    for cpu in sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*")):
        if _read_int(cpu / "online") == 0:  # an offline core keeps whatever limits it had
            continue
        low, high = _read_int(cpu / "cpufreq/scaling_min_freq"), _read_int(cpu / "cpufreq/scaling_max_freq")
        if low is not None and high is not None:
            pairs.append((low, high))
    return pairs


def _gpu_pairs(root: Path) -> list[tuple[int, int]]:
    # The GPU devfreq node is 17000000.gpu on JetPack 6 and 17000000.ga10b on JetPack 5.
    pairs = []
    for node in sorted((root / "sys/class/devfreq").glob("17000000.*")):
        low, high = _read_int(node / "min_freq"), _read_int(node / "max_freq")
        if low is not None and high is not None:
            pairs.append((low, high))
    return pairs


def clocks_pinned(root: Path = Path("/")) -> bool | None:
    pairs = _cpu_pairs(root) + _gpu_pairs(root)
    if not pairs:
        return None
    return all(low == high for low, high in pairs)
