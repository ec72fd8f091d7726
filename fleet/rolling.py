"""Ring rollouts (``edge-fleet rollout``): one ring at a time, judged by the devices themselves, undone on failure.

For each ring in order the rollout writes the ring's desired state with the new version (one object, one write),
waits until every device of the ring (the devices whose last report names that ring) reports the new version READY
with its gate passed at that generation, then soaks: for ``soak_s`` seconds every device must keep serving it, and at
the end its p99 latency and failure ratio are compared with the devices still on the old version, not with fixed
numbers (a loaded fleet is slow everywhere; a bad version is slow where it runs). Where no device is left on the old
version, the ring's own reports from before its move are the reference. Any failure writes the previous desired
state back to every ring moved (as a new generation whose note says why), waits for their devices to serve the old
version again and raises :class:`RolloutError` naming the device and the reason.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from orinkit.fleet.errors import RolloutError, UnknownVersionError
from orinkit.fleet.layout import DesiredState, DeviceReport, checked_name

Progress = Callable[[str], None]
OK_GATES = ("passed", "none")


@dataclass(frozen=True)
class SoakRule:
    """A device on the new version holds if its p99 <= ``p99_ratio`` x the reference median p99 + ``p99_slack_ms``
    and its failure ratio (failed / all requests) <= ``failure_factor`` x the reference median ratio +
    ``failure_slack``. The slacks keep a quiet, fast fleet (p99 of 1 ms, no failures) from failing on noise."""

    p99_ratio: float = 1.5
    p99_slack_ms: float = 5.0
    failure_factor: float = 2.0
    failure_slack: float = 0.01


@dataclass(frozen=True)
class RolloutResult:
    name: str
    model: str
    version: int
    rings: tuple[str, ...]
    devices: dict[str, tuple[str, ...]]  # ring → its devices
    seconds: float
    soak: dict[str, dict] = field(default_factory=dict)  # ring → the numbers the soak compared


class _DeviceFailed(Exception):
    def __init__(self, device: str, why: str) -> None:
        from orinkit.client.server_text import one_line

        why = one_line(why)  # it becomes a ring's note and a log line; an older agent's reason may hold a stack
        super().__init__(f"{device}: {why}")
        self.device, self.why = device, why


def rollout(bucket, model: str, version: int, rings: Sequence[str], *, name: str = "", soak_s: float = 60.0,
            timeout_s: float = 600.0, poll_s: float = 2.0, devices_per_ring: Mapping[str, Sequence[str]] | None = None,
            rule: SoakRule = SoakRule(), progress: Progress = print) -> RolloutResult:
    from orinkit.fleet.push import read_manifest
    from orinkit.fleet.rings import read_desired_state, write_desired_state
    from orinkit.fleet.status import read_reports

    model, version = checked_name("model", model), int(version)
    rings = [checked_name("ring", r) for r in rings]
    name = name or f"{model}-{version}"
    if not rings:
        raise RolloutError("no ring to roll out to", hint="give --rings canary,wave1,all")
    if read_manifest(bucket, model, version) is None:
        raise UnknownVersionError(f"{bucket.url} holds no {model} version {version} (no manifest)",
                                  hint="push it first: edge-repo push REPO " + str(bucket.url))
    reports, _ = read_reports(bucket)
    members = {ring: tuple(sorted(devices_per_ring[ring] if devices_per_ring and ring in devices_per_ring
                                  else (d for d, r in reports.items() if r.ring == ring))) for ring in rings}
    empty = [ring for ring, devices in members.items() if not devices]
    if empty:
        raise RolloutError(f"ring {', '.join(empty)} has no device (no device report names it); nothing was changed",
                           hint="start the agent on the ring's devices (edge-fleet agent --ring RING), or fix --rings")
    previous = {ring: read_desired_state(bucket, ring)[0] for ring in rings}
    started, moved, soaks = time.monotonic(), [], {}
    everyone_new: set[str] = set()
    try:
        for ring in rings:
            before = {d: reports[d] for d in members[ring] if d in reports}
            wanted = {**(previous[ring].models if previous[ring] else {}), model: version}
            state = write_desired_state(bucket, ring, wanted, note=f"rollout {name}: {model} version {version}")
            moved.append(ring)
            progress(f"ring {ring}: generation {state.generation} wants {model} version {version}; waiting for "
                     f"{', '.join(members[ring])}")
            _wait_ready(bucket, members[ring], model, version, state.generation, timeout_s, poll_s)
            everyone_new |= set(members[ring])
            progress(f"ring {ring}: every device serves version {version} with its gate passed; soaking {soak_s:g} s")
            soaks[ring] = _soak(bucket, members[ring], everyone_new, before, model, version, soak_s, poll_s, rule)
            progress(f"ring {ring}: held during the soak ({soaks[ring]['reference']})")
    except _DeviceFailed as failure:
        why = f"{failure.device} {failure.why}"
        progress(f"rollout {name} failed: {why}; putting back {', '.join(moved)}")
        back = _roll_back(bucket, moved, previous, members, model, name, why, timeout_s, poll_s, progress,
                          write_desired_state)
        latest, _ = read_reports(bucket, [d for ring in moved for d in members[ring]])
        raise RolloutError(
            f"rollout {name} of {model} version {version} stopped at ring {moved[-1]}: {why}. Rings put back: "
            f"{', '.join(moved)}" + ("" if back else " (some devices had not reported the old version back in "
                                                      f"{timeout_s:g} s)"),
            report={d: r.to_json().decode() for d, r in latest.items()},
            hint="edge-fleet status shows each device; the failing version stays in the bucket for inspection",
        ) from None
    return RolloutResult(name, model, version, tuple(rings), members, time.monotonic() - started, soaks)


def _serving(version: int | None) -> str:
    return "nothing serving" if version is None else f"version {version}"


def _model_state(report: DeviceReport | None, model: str):
    return None if report is None else report.models.get(model)


def _wait_ready(bucket, devices, model, version, generation, timeout_s, poll_s) -> None:
    from orinkit.fleet.status import read_reports

    deadline = time.monotonic() + timeout_s
    while True:
        reports, _ = read_reports(bucket, devices)
        waiting = []
        for device in devices:
            report = reports.get(device)
            state = _model_state(report, model)
            if report is None or report.generation < generation:
                waiting.append((device, f"has not reported generation {generation}"))
            elif state is None:
                waiting.append((device, f"does not report {model}"))
            elif state.state == "FAILED":
                raise _DeviceFailed(device, state.reason or f"reports {model} FAILED")
            elif not (state.state == "READY" and state.version == version and state.gate in OK_GATES):
                waiting.append((device, state.reason or f"reports {model} {state.state}, {_serving(state.version)}"))
        if not waiting:
            return
        if time.monotonic() > deadline:
            device, why = waiting[0]
            raise _DeviceFailed(device, f"was not ready with version {version} after {timeout_s:g} s: {why}")
        time.sleep(poll_s)


def _soak(bucket, devices, everyone_new, before, model, version, soak_s, poll_s, rule: SoakRule) -> dict:
    """Watch the ring for ``soak_s``; then compare its devices with the reference. The counts of every report
    seen during the soak are summed (each report holds the counts since the previous one)."""
    from orinkit.fleet.status import read_reports

    seen: dict[str, dict[float, DeviceReport]] = {}
    end = time.monotonic() + soak_s
    while True:
        reports, _ = read_reports(bucket)
        for device, report in reports.items():
            seen.setdefault(device, {})[report.reported_at] = report
        for device in devices:
            state = _model_state(reports.get(device), model)
            if state is None or state.version != version or state.state != "READY":
                why = state.reason if state is not None and state.reason else "stopped serving it"
                raise _DeviceFailed(device, f"left version {version} during the soak: {why}")
        if time.monotonic() >= end:
            break
        time.sleep(min(poll_s, max(0.0, end - time.monotonic())))
    old = {d: r for d, r in reports.items() if d not in everyone_new and _on_old_version(r, model, version)}
    if old:
        reference, label = {d: [r] for d, r in old.items()}, f"compared with {len(old)} device(s) on the old version"
    else:
        reference, label = {d: [r] for d, r in before.items()}, "compared with the ring's reports before its move"
    ref_p99 = _median([_p99(r[-1], model) for r in reference.values()])
    ref_ratio = _median([_failure_ratio(r, model) for r in reference.values()]) or 0.0
    numbers = {"reference": label, "reference_p99_ms": ref_p99, "reference_failure_ratio": ref_ratio, "devices": {}}
    for device in devices:
        own = list(seen.get(device, {}).values())
        p99, ratio = _p99(reports[device], model), _failure_ratio(own, model) or 0.0
        numbers["devices"][device] = {"p99_ms": p99, "failure_ratio": ratio}
        if p99 is not None and ref_p99 is not None and p99 > rule.p99_ratio * ref_p99 + rule.p99_slack_ms:
            raise _DeviceFailed(device, f"p99 latency {p99:.1f} ms is above {rule.p99_ratio:g} x {ref_p99:.1f} ms + "
                                        f"{rule.p99_slack_ms:g} ms ({label})")
        if ratio > rule.failure_factor * ref_ratio + rule.failure_slack:
            raise _DeviceFailed(device, f"{ratio:.1%} of its requests failed during the soak, against "
                                        f"{ref_ratio:.1%} ({label})")
    return numbers


def _on_old_version(report: DeviceReport, model: str, version: int) -> bool:
    state = report.models.get(model)
    return state is not None and state.state in ("READY", "UNMANAGED") and state.version not in (None, version)


def _p99(report: DeviceReport, model: str) -> float | None:
    return report.health.get(f"{model}:p99_ms", report.health.get("p99_ms"))


def _failure_ratio(reports: Sequence[DeviceReport], model: str) -> float | None:
    failures = sum(r.health.get(f"{model}:failures", r.health.get("failures", 0.0)) for r in reports)
    requests = sum(r.health.get(f"{model}:requests", r.health.get("requests", 0.0)) for r in reports)
    return failures / (failures + requests) if failures + requests > 0 else None


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(statistics.median(values)) if values else None


def _roll_back(bucket, moved, previous: Mapping[str, DesiredState | None], members, model, name, why, timeout_s,
               poll_s, progress, write_desired_state) -> bool:
    """Write each moved ring's previous models back as a new generation; True once every device serves the old
    version again (or, where the ring had no version of the model, has acted on the new generation)."""
    from orinkit.fleet.status import read_reports

    targets = {}
    for ring in reversed(moved):
        models = dict(previous[ring].models) if previous[ring] else {}
        state = write_desired_state(bucket, ring, models, note=f"rollback of {name}: {why}")
        targets[ring] = (state.generation, models.get(model))
        if model in models:
            back_to = f"wants {model} version {models[model]} again"
        else:  # the ring named no version of the model before: its devices keep what they serve, unmanaged
            back_to = f"goes back to no managed version of {model} (its devices keep serving what they have)"
        progress(f"ring {ring}: generation {state.generation} {back_to}")
    deadline = time.monotonic() + timeout_s
    while True:
        behind = []
        for ring, (generation, old) in targets.items():
            reports, _ = read_reports(bucket, members[ring])
            for device in members[ring]:
                report = reports.get(device)
                state = _model_state(report, model)
                if report is None or report.generation < generation or (
                        old is not None and (state is None or state.version != old or state.state != "READY")):
                    behind.append(device)
        if not behind:
            return True
        if time.monotonic() > deadline:
            progress(f"not back on the old version after {timeout_s:g} s: {', '.join(behind)}")
            return False
        time.sleep(poll_s)
