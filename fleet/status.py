"""The fleet as its devices last described it (``edge-fleet status``): every device, its ring, what it serves,
its gates and how old its report is, beside what its ring wants."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from orinkit.fleet.errors import BucketLayoutError
from orinkit.fleet.layout import DesiredState, DeviceReport, report_key


@dataclass(frozen=True)
class FleetStatus:
    devices: dict[str, DeviceReport]
    rings: dict[str, DesiredState]
    unreadable: dict[str, str] = field(default_factory=dict)  # device → why its report could not be read

    def as_json(self, now: float | None = None) -> dict:
        now = time.time() if now is None else now
        return {
            "rings": {name: {"generation": s.generation, "models": dict(s.models), "note": s.note,
                             "updated_at": s.updated_at} for name, s in sorted(self.rings.items())},
            "devices": [{"device": r.device, "ring": r.ring, "generation": r.generation,
                         "wanted_generation": self.rings[r.ring].generation if r.ring in self.rings else None,
                         "age_s": round(now - r.reported_at, 1), "models": {m: asdict(v) for m, v in r.models.items()},
                         "health": dict(r.health), "note": r.note,
                         "outages": {k: dict(v) for k, v in r.outages.items()}}
                        for _, r in sorted(self.devices.items())],
            "unreadable": dict(self.unreadable),
        }


def read_reports(bucket, devices=None) -> tuple[dict[str, DeviceReport], dict[str, str]]:
    """Every device's last report (or those of ``devices``), and the devices whose report cannot be read."""
    if devices is None:
        devices = sorted({key.split("/")[1] for key in bucket.keys("devices") if key.endswith("/report.json")})
    reports, unreadable = {}, {}
    for device in devices:
        try:
            data = bucket.read(report_key(device))
            if data is not None:
                reports[device] = DeviceReport.from_json(data)
        except BucketLayoutError as exc:
            unreadable[device] = exc.message
    return reports, unreadable


def read_rings(bucket) -> dict[str, DesiredState]:
    rings = {}
    for key in bucket.keys("rings"):
        name = key.rsplit("/", 1)[-1]
        if name.endswith(".json"):
            data = bucket.read(key)
            if data is not None:
                rings[name[:-len(".json")]] = DesiredState.from_json(data)
    return rings


def fleet_status(bucket) -> FleetStatus:
    reports, unreadable = read_reports(bucket)
    return FleetStatus(reports, read_rings(bucket), unreadable)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _outages(device: str, report: DeviceReport) -> list[str]:
    """A line per thing the device's agent lost touch with since it started (the bucket, its server)."""
    from orinkit.fleet.outage import duration

    lines = []
    for what, outage in sorted(report.outages.items()):
        count, ongoing = int(outage.get("count") or 0), outage.get("ongoing_s")
        if not count and ongoing is None:
            continue
        words = [f"{count} {what} outage{'s' if count != 1 else ''} since its agent started"] if count else []
        if count and outage.get("last_s") is not None:
            words.append(f"the last {duration(outage['last_s'])} ({int(outage.get('last_failed_polls') or 0)} polls "
                         "failed)")
        if ongoing is not None:
            words.append(f"its {what} had not answered for {duration(ongoing)} when it reported")
        lines.append(f"{device}: " + ", ".join(words))
    return lines


def format_status(status: FleetStatus, now: float | None = None) -> str:
    """A table: one line per device and model; a device behind its ring's generation is marked."""
    now = time.time() if now is None else now
    lines = []
    for name, ring in sorted(status.rings.items()):
        wanted = ", ".join(f"{m}={v}" for m, v in sorted(ring.models.items())) or "nothing"
        lines.append(f"ring {name}: generation {ring.generation} wants {wanted}" + (f" ({ring.note})" if ring.note
                                                                                     else ""))
    rows = [("DEVICE", "RING", "GEN", "MODEL", "VERSION", "STATE", "GATE", "P99 MS", "AGE", "REASON")]
    for device, report in sorted(status.devices.items()):
        ring = status.rings.get(report.ring)
        generation = str(report.generation) + ("" if ring is None or report.generation >= ring.generation
                                               else f"<{ring.generation}")
        age = _age(now - report.reported_at)
        for model, state in sorted(report.models.items()) or [("-", None)]:
            p99 = report.health.get(f"{model}:p99_ms")
            version = None if state is None else state.version
            rows.append((device, report.ring, generation, model, "-" if version is None else str(version),
                         "-" if state is None else state.state, "-" if state is None else str(state.gate or "-"),
                         "-" if p99 is None else f"{p99:.1f}", age, "" if state is None else state.reason))
    if len(rows) == 1:
        lines.append("no device has reported yet")
    else:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
                  for row in rows]
    lines += [line for device, report in sorted(status.devices.items()) for line in _outages(device, report)]
    lines += [f"{device}: report unreadable: {why}" for device, why in sorted(status.unreadable.items())]
    return "\n".join(line.rstrip() for line in lines)
