"""Board readings from the kernel's own files, for when tegrastats is not there (not a Jetson) or has died.

* CPU load: two ``/proc/stat`` snapshots; the load is the busy share of the jiffies that passed between them.
* Temperatures: ``/sys/class/thermal/thermal_zone*/temp`` named by ``type``, and ``/sys/class/hwmon/*/temp*_input``
  named ``<name>/<label>`` (``<name>/tempN`` without a label). Millidegrees Celsius.
* Power: hwmon ``power*_input`` (microwatts), and ``in*_input`` × ``curr*_input`` pairs (millivolts, milliamps):
  the INA3221 monitors of a Jetson expose their rails that way, labelled as tegrastats names them (``VDD_IN``).
* GPU load: the Jetson GPU's ``load`` file (per mille), under ``/sys/devices/platform/gpu.0`` or ``…/gpu.0``.

Every path is under ``root``, so a test can build the tree. A file that is missing or unreadable is left out,
never replaced by a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_INDEX = re.compile(r"(\d+)")
# A powered-down Jetson sensor reads -256 °C (tegrastats prints -256C for it); it is not a temperature.
_SENSOR_OFF_MILLI_C = -256000
_GPU_LOAD = ("sys/devices/platform/gpu.0/load", "sys/devices/gpu.0/load")


@dataclass(frozen=True)
class CpuTimes:
    busy: int
    total: int


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:  # also EAGAIN/ENODATA, which some sensors return while powered down
        return None


def _read_int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _by_index(paths) -> list[Path]:
    """hwmon10 after hwmon2: sysfs numbers are not zero-padded."""
    def key(path: Path) -> tuple[int, str]:
        found = _INDEX.search(path.name)
        return (int(found[1]) if found else -1, path.name)
    return sorted(paths, key=key)


def _unique(name: str, taken: dict) -> str:
    """Two zones may share a type (``acpitz`` twice on many PCs); the second becomes ``acpitz#2``."""
    candidate, count = name, 1
    while candidate in taken:
        count += 1
        candidate = f"{name}#{count}"
    return candidate


def read_cpu_times(root: Path = Path("/")) -> CpuTimes | None:
    """The aggregate ``cpu`` line: user nice system idle iowait irq softirq steal [guest guest_nice]. Guest time is
    already counted in user and nice, so only the first eight fields add up to the total."""
    text = _read(root / "proc/stat")
    for line in (text or "").splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu" and len(fields) >= 5 and all(f.isdigit() for f in fields[1:]):
            values = [int(f) for f in fields[1:9]]
            idle = values[3] + (values[4] if len(values) > 4 else 0)
            return CpuTimes(busy=sum(values) - idle, total=sum(values))
    return None


def cpu_load_pct(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    if before is None or after is None or after.total <= before.total:
        return None
    share = (after.busy - before.busy) / (after.total - before.total)
    # iowait may step backwards (the kernel documents it as unreliable), which can push a share past 0 or 1.
    return round(min(max(share, 0.0), 1.0) * 100, 1)


def _hwmon_devices(root: Path) -> list[tuple[str, Path]]:
    return [(_read(device / "name") or device.name, device)
            for device in _by_index((root / "sys/class/hwmon").glob("hwmon*"))]


def read_temperatures(root: Path = Path("/")) -> dict[str, float]:
    temps: dict[str, float] = {}
    zone_types = set()
    for zone in _by_index((root / "sys/class/thermal").glob("thermal_zone*")):
        zone_type = _read(zone / "type") or zone.name
        zone_types.add(zone_type.replace("-", "_"))
        milli = _read_int(zone / "temp")
        if milli is not None and milli != _SENSOR_OFF_MILLI_C:
            temps[_unique(zone_type, temps)] = round(milli / 1000, 3)
    for name, device in _hwmon_devices(root):
        # The thermal core also registers each zone as an hwmon device named after its type ('-' becomes '_'):
        # the same sensor twice.
        if name.replace("-", "_") in zone_types:
            continue
        for source in _by_index(device.glob("temp*_input")):
            channel = source.name[: -len("_input")]
            milli = _read_int(source)
            if milli is not None and milli != _SENSOR_OFF_MILLI_C:
                label = _read(device / f"{channel}_label") or channel
                temps[_unique(f"{name}/{label}", temps)] = round(milli / 1000, 3)
    return temps


def read_power(root: Path = Path("/")) -> dict[str, float]:
    """Milliwatts per rail. Channels labelled ``NC`` (unconnected, as on AGX Orin's second monitor) are left out,
    as tegrastats leaves them out."""
    rails: dict[str, float] = {}
    for name, device in _hwmon_devices(root):
        for source in _by_index(device.glob("power*_input")):
            channel = source.name[: -len("_input")]
            microwatts = _read_int(source)
            label = _read(device / f"{channel}_label") or f"{name}/{channel}"
            if microwatts is not None and label != "NC":
                rails[_unique(label, rails)] = round(microwatts / 1000, 1)
        for source in _by_index(device.glob("curr*_input")):
            number = source.name[len("curr"): -len("_input")]
            milliamps, millivolts = _read_int(source), _read_int(device / f"in{number}_input")
            label = (_read(device / f"in{number}_label") or _read(device / f"curr{number}_label")
                     or f"{name}/in{number}")
            if milliamps is not None and millivolts is not None and label != "NC":
                rails[_unique(label, rails)] = round(millivolts * milliamps / 1000, 1)
    return rails


def read_gpu_load(root: Path = Path("/")) -> float | None:
    for relative in _GPU_LOAD:
        per_mille = _read_int(root / relative)
        if per_mille is not None:
            return round(per_mille / 10, 1)
    return None
