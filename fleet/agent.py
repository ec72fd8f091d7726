"""The device agent (``edge-fleet agent``): brings the local Triton to its ring's desired state, and says how it went.

Each poll is one conditional read of ``rings/RING.json`` (an ETag: an unchanged state costs one request and no
body). For each model whose wanted version is not what serves, the agent:

1. reads the version's manifest (no manifest: the version does not exist yet; it is reported PENDING and the serving
   version stays);
2. checks MemAvailable: during a reload the old and new versions are both in memory (an 8 GB Orin has no room to
   spare), so it needs ``memory_factor`` × the version's size + ``memory_margin_mb`` (PENDING otherwise);
3. downloads it into a staging folder beside the repository and checks every file's size and sha256 (FAILED on a
   mismatch, nothing placed);
4. gates it before it serves anything (:mod:`orinkit.fleet.shadow`): a copy is loaded as the model
   ``<model>.fleet-gate`` pinned to that version and gets the health gate (the golden input), then is unloaded and
   removed. Triton sends a request without a version to the newest READY version, so a version gated once live
   would answer real requests until its gate failed. A failed load or gate sets the version aside as
   ``quarantined-N`` (the next server start does not load it); the live model is never touched;
5. places and loads a version that passed with :func:`orinkit.repo.deploy.place_version`: renamed in whole, loaded
   in explicit mode, live only once READY (a failed load sets it aside too, and the old version serves).

A version already on disk and proven (a rollback target) is gated and loaded without a download. Shadow folders
a killed agent left behind are removed at its start (and unloaded once the server answers). The report
(``devices/DEVICE/report.json``) is written when something changed, after a change on each of the next
``report_burst`` polls (a rollout's soak reads them), and as a heartbeat every ``heartbeat_every`` polls. The server
never depends on the bucket: with the bucket down it serves what is on disk, the agent keeps the last desired state
it read (in its state folder) and retries with capped exponential backoff. An outage of the bucket or the server is
told in the log when it starts, reminded at most once a minute while it lasts and told when it ends
(:mod:`orinkit.fleet.outage`); the next report counts it. Messages of the server are turned into one line, the
cause first (:mod:`orinkit.client.server_text`). Models the server serves that the desired
state does not name are kept serving and reported UNMANAGED: taking a model away is a decision for a person (or a
later desired state naming another version), never a side effect of a ring file edited by hand.

Runs on the device (Python 3.10).
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from orinkit.client.server_text import one_line
from orinkit.core.files import atomic_write_bytes
from orinkit.fleet.errors import BucketError, BucketLayoutError, IntegrityError
from orinkit.fleet.fetch import fetch_version, version_bytes
from orinkit.fleet.gate import FAILED, GATE_REQUESTS, Gate, GateResult, run_gate
from orinkit.fleet.health import HealthProbe
from orinkit.fleet.layout import DesiredState, DeviceReport, ModelReport, checked_name, report_key, ring_key
from orinkit.fleet.outage import REMIND_EVERY_S, Outage
from orinkit.fleet.shadow import ShadowLoadError, clear_leftovers, gate_in_shadow, is_shadow, unload_leftovers
from orinkit.fleet.store import LocalStore, default_state_dir

READY, FAILED_STATE, PENDING, UNMANAGED = "READY", "FAILED", "PENDING", "UNMANAGED"
MIB = 1 << 20

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PollResult:
    changed: bool  # the ring's desired state changed since the last poll (the first read counts)
    generation: int  # of the desired state acted on (0: none read yet, or the ring has none)
    models: dict[str, ModelReport] = field(default_factory=dict)  # what the device reports now
    acted: tuple[str, ...] = ()  # models this poll placed, loaded or failed to
    reported: bool = False  # a report was written
    errors: tuple[str, ...] = ()  # bucket or server problems of this poll (the agent goes on)
    requests: int = 0  # S3 requests this poll made
    next_poll_s: float = 60.0  # the interval, or the backoff after a bucket error


class _NotEnoughMemory(Exception):
    pass


class Agent:
    def __init__(self, bucket, ring: str, repository: str | Path, server: str = "localhost:8001", *,
                 device: str | None = None, interval_s: float = 60.0, heartbeat_every: int = 10,
                 report_burst: int = 10, state_dir: str | Path | None = None, gate_requests: int = GATE_REQUESTS,
                 memory_factor: float = 2.0, memory_margin_mb: float = 256.0, load_timeout_s: float = 300.0,
                 max_backoff_s: float = 600.0, meminfo_root: Path = Path("/"),
                 outage_remind_every_s: float = REMIND_EVERY_S, tell_outages: bool = True,
                 progress: Progress = print) -> None:
        self.bucket, self.server, self.progress = bucket, server, progress
        self.ring = checked_name("ring", ring)
        self.device = checked_name("device", device or socket.gethostname())
        self.repository = Path(repository).resolve()
        self.interval_s, self.max_backoff_s = float(interval_s), float(max_backoff_s)
        self.heartbeat_every, self.report_burst = max(1, heartbeat_every), max(0, report_burst)
        self.gate_requests, self.load_timeout_s = gate_requests, load_timeout_s
        self.memory_factor, self.memory_margin_mb, self.meminfo_root = memory_factor, memory_margin_mb, meminfo_root
        self.store = LocalStore(Path(state_dir) if state_dir else default_state_dir(self.repository))
        self.probe = HealthProbe(server, requests=gate_requests, meminfo_root=meminfo_root, timeout_s=10.0)
        self._etag: str | None = None
        self._desired = self._last_known_desired()  # the bucket may be down at start: act on what was read last
        self._outcomes: dict[str, ModelReport] = {}
        self._failed: dict[str, int] = {}  # model → version that failed at this generation: not retried
        self._not_before: dict[str, int] = {}  # model → poll before which a PENDING version is not retried
        self._gate_results: dict[tuple[str, int], GateResult] = {}
        self._ready: dict[str, list[int]] = {}
        self._polls = self._since_report = self._burst = self._bucket_errors = 0
        self._report_due = True
        self._server_ok = False
        self._bucket_cause: str | None = None  # this poll's first bucket failure
        # Outages are counted either way; told in the log unless the caller shows each poll's errors itself (--once).
        told = progress if tell_outages else (lambda line: None)
        self.bucket_outage = Outage(f"the bucket {bucket.url} at {bucket.endpoint}", told,
                                    remind_every_s=outage_remind_every_s,
                                    backoff_to_s=max(self.max_backoff_s, self.interval_s))
        self.server_outage = Outage(f"the server at {server}", told, remind_every_s=outage_remind_every_s)
        # A crash mid-gate leaves a shadow model: gone from disk now, unloaded at the first poll the server answers.
        self._stale_shadows: list[str] | None = clear_leftovers(self.repository)
        if self._stale_shadows:
            self.progress(f"removed shadow models left by an earlier run: {', '.join(self._stale_shadows)}")

    # -- the loop -------------------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set. Nothing ends the loop but ``stop``: the agent is the device's way back."""
        while not stop.is_set():
            try:
                wait = self.poll_once().next_poll_s
            except Exception as exc:  # a bug or an unforeseen error must not leave the device unmanaged for good
                self.progress(f"poll failed unexpectedly: {type(exc).__name__}: {exc}")
                wait = self.interval_s
            stop.wait(wait)

    def poll_once(self) -> PollResult:
        self._polls += 1
        self._bucket_cause = None
        requests_before = self.bucket.requests
        errors: list[str] = []
        changed = self._read_desired(errors)
        acted: dict[str, ModelReport] = {}
        server_error = None
        if self._desired is not None:
            acted, server_error = self._reconcile(errors)
            if server_error is None:
                self.server_outage.answered()
            else:  # told before the report, which says how long it has lasted
                self.server_outage.failed(server_error, self._next_poll_s(),
                                          "the models it serves are neither checked nor changed")
        if self._bucket_cause is None:
            self.bucket_outage.answered()  # before the report, which counts the outage that just ended
        reported = self._maybe_report(changed or bool(acted), errors)
        wait = self._next_poll_s()
        if self._bucket_cause is not None:
            generation = self._desired.generation if self._desired else 0
            self.bucket_outage.failed(self._bucket_cause, wait, "the server keeps serving what is on disk" + (
                f"; acting on ring {self.ring} generation {generation}, the last one read" if generation else ""))
        return PollResult(changed, self._desired.generation if self._desired else 0, self._models(), tuple(acted),
                          reported, tuple(errors), self.bucket.requests - requests_before, wait)

    def _bucket_failed(self, exc: BucketError) -> str:
        """Count a bucket failure of this poll (the backoff grows) and say it in the poll's errors."""
        self._bucket_errors += 1
        if self._bucket_cause is None:
            self._bucket_cause = exc.message
        return f"bucket: {exc.message}"

    def _next_poll_s(self) -> float:
        if not self._bucket_errors:
            return self.interval_s
        # Capped exponential backoff, jittered so that a fleet does not come back to the store all at once.
        backoff = min(self.interval_s * 2 ** self._bucket_errors, max(self.max_backoff_s, self.interval_s))
        return backoff * random.uniform(0.8, 1.0)

    # -- the desired state ----------------------------------------------------------------------------------------

    def _read_desired(self, errors: list[str]) -> bool:
        try:
            data, etag = self.bucket.read_if_changed(ring_key(self.ring), self._etag)
        except BucketError as exc:
            errors.append(self._bucket_failed(exc))
            return False
        self._bucket_errors = 0
        if data is None and etag is not None:
            return False  # unchanged (HTTP 304)
        self._etag = etag
        try:
            desired = DesiredState.from_json(data) if data is not None else DesiredState(self.ring)
        except BucketLayoutError as exc:
            # Keep acting on the last good state. Said once: the same object is not read again (its ETag holds).
            errors.append(exc.message)
            kept = f"generation {self._desired.generation}" if self._desired else "no desired state yet"
            self.progress(f"ring {self.ring}: {exc.message}; keeping {kept} until it is written again")
            return False
        if self._desired is not None and (desired.generation, dict(desired.models)) == (
                self._desired.generation, dict(self._desired.models)):
            return False
        self._desired = desired
        self._failed.clear()  # a new generation may name a failed version again on purpose: try it once more
        self._not_before.clear()
        self._burst = self.report_burst
        atomic_write_bytes(self.store.root / "desired.json", desired.to_json(), mode=0o600)
        wants = ", ".join(f"{m} version {v}" for m, v in sorted(desired.models.items())) or "no model"
        self.progress(f"ring {self.ring} generation {desired.generation} wants {wants}"
                      + (f" ({desired.note})" if desired.note else ""))
        return True

    def _last_known_desired(self) -> DesiredState | None:
        try:
            desired = DesiredState.from_json((self.store.root / "desired.json").read_bytes())
        except (OSError, BucketLayoutError):
            return None
        return desired if desired.ring == self.ring else None

    # -- bringing the server there --------------------------------------------------------------------------------

    def _reconcile(self, errors: list[str]) -> tuple[dict[str, ModelReport], str | None]:
        """What this poll placed or refused, and why the server could not be asked (None: it answered)."""
        from orinkit.repo.errors import RepoError
        from orinkit.repo.server_api import RepositoryAPI

        try:
            with RepositoryAPI(self.server) as api:
                if self._stale_shadows is not None:
                    unload_leftovers(api, self.repository, self._stale_shadows)
                    self._stale_shadows = None
                self._ready = _ready_versions(api)
        except RepoError as exc:
            self._server_ok = False
            cause = one_line(exc.message)
            errors.append(f"server: {cause}")
            return {}, cause
        self._server_ok = True
        acted: dict[str, ModelReport] = {}
        for model, wanted in sorted(self._desired.models.items()):
            serving = max(self._ready.get(model, []), default=None)
            if self._failed.get(model) == wanted:
                if serving is None:  # the server restarted since: serve what is on disk again
                    self._load_quietly(model)
                continue
            if serving == wanted:
                known = self._outcomes.get(model)
                if known is None or (known.version, known.state) != (wanted, READY):
                    acted[model] = self._outcomes[model] = self._serving_wanted(model, wanted)
                continue
            if self._polls < self._not_before.get(model, 0):
                continue
            acted[model] = self._outcomes[model] = self._apply(model, wanted, serving)
            if self._bucket_cause is not None:
                break  # the store went away mid-poll: the other models wait for the backoff
        return acted, None

    def _serving_wanted(self, model: str, version: int) -> ModelReport:
        """The wanted version serves (placed earlier, or by a previous run of the agent): its recorded gate."""
        status = self.store.result(model, version)
        if status is None:  # never gated here (placed by hand, or the state folder was lost): gate it now
            try:
                gate = self._fetch_gate(model, version)
            except (BucketError, BucketLayoutError, IntegrityError) as exc:
                return ModelReport(version, READY, None, f"serving; its gate could not be fetched: {exc.message}")
            result = run_gate(self.server, model, version, gate, requests=self.gate_requests)
            self._gate_results[(model, version)] = result
            status = result.status
            self.store.record_result(model, version, status)
            if status == FAILED:
                self._failed[model] = version
                return ModelReport(version, FAILED_STATE, status, f"version {version} serves but fails its gate: "
                                   f"{result.reason}")
        return ModelReport(version, READY, status)

    def _fetch_gate(self, model: str, version: int) -> Gate | None:
        from orinkit.fleet.fetch import fetch_version as fetch
        from orinkit.fleet.layout import GATE, VersionManifest
        from orinkit.fleet.push import read_manifest

        known, gate = self.store.gate(model, version)
        if known:
            return gate
        manifest = read_manifest(self.bucket, model, version)
        if manifest is None or manifest.gate is None:
            self.store.keep_gate(model, version, None, None)
            return None
        only_gate = VersionManifest(model, version, tuple(f for f in manifest.files if f.path == GATE), manifest.gate)
        staging = self.store.staging(model, version)
        try:
            fetched = fetch(self.bucket, only_gate, staging)
            self.store.keep_gate(model, version, fetched.gate, manifest.gate)
        finally:
            self.store.clear_staging(model, version)
        return self.store.gate(model, version)[1]

    def _apply(self, model: str, wanted: int, serving: int | None) -> ModelReport:
        from orinkit.fleet.push import read_manifest
        from orinkit.repo.deploy import place_version
        from orinkit.repo.errors import DeployBusyError, DeployLoadError, RepoError
        from orinkit.repo.journal import read_journal

        self.progress(f"{model}: version {wanted} wanted, {serving if serving is not None else 'none'} serving")
        folder = self.repository / model
        started = time.monotonic()
        source = None
        try:
            known, gate = self.store.gate(model, wanted)
            if known and (folder / str(wanted)).is_dir() and wanted in read_journal(folder).proven:
                # On disk and loaded before (a rollback target, or the server restarted): no download.
                self._check_memory(wanted, _tree_bytes(folder / str(wanted)))
                source, files = None, None
            else:
                manifest = read_manifest(self.bucket, model, wanted)
                if manifest is None:
                    return self._pending(model, serving, f"version {wanted} is not in the bucket (no manifest: never "
                                                         "pushed, or its push has not finished)")
                self._check_memory(wanted, version_bytes(manifest))
                fetched = fetch_version(self.bucket, manifest, self.store.staging(model, wanted))
                self.store.keep_gate(model, wanted, fetched.gate, manifest.gate)
                gate = self.store.gate(model, wanted)[1]
                source, files = fetched.folder, fetched.model_files
            # Gated before it is live: a version that answers wrongly never gets a client's request.
            result = gate_in_shadow(self.server, self.repository, model, wanted,
                                    source if source is not None else folder / str(wanted), files, gate,
                                    requests=self.gate_requests, timeout_s=self.load_timeout_s,
                                    progress=self.progress)
            self._gate_results[(model, wanted)] = result
            if result.status == FAILED:
                return self._set_aside(model, wanted, source, FAILED,
                                       f"version {wanted} failed its gate: {result.reason}")
            # The READY check stays (place_version waits for it); the gate already ran on exactly these files.
            place_version(self.repository, model, wanted, source, server=self.server, model_files=files,
                          timeout_s=self.load_timeout_s, progress=self.progress)
        except ShadowLoadError as exc:
            return self._set_aside(model, wanted, source, None, f"version {wanted} did not load: {exc.message}")
        except _NotEnoughMemory as exc:
            return self._pending(model, serving, str(exc))
        except IntegrityError as exc:
            return self._refused(model, wanted, None, f"version {wanted} refused: {exc.message}")
        except DeployLoadError as exc:
            return self._refused(model, wanted, None, f"version {wanted} did not load: {one_line(exc.message)}")
        except DeployBusyError as exc:
            return self._pending(model, serving, exc.message, polls=1)
        except BucketError as exc:
            return self._pending(model, serving, f"version {wanted}: {self._bucket_failed(exc)}", polls=0)
        except (RepoError, BucketLayoutError) as exc:
            return self._pending(model, serving, f"version {wanted}: {one_line(exc.message)}")
        finally:
            self.store.clear_staging(model, wanted)
        status = self._gate_results[(model, wanted)].status
        self.store.record_result(model, wanted, status)
        self.store.forget_older(model, keep=set(_version_numbers(folder)))
        self.progress(f"{model}: version {wanted} READY, gate {status} ({time.monotonic() - started:.1f} s)")
        return ModelReport(wanted, READY, status)

    def _set_aside(self, model: str, wanted: int, source: Path | None, gate: str | None, reason: str) -> ModelReport:
        """A version that failed in the shadow model: kept as ``quarantined-N`` (as a failed placement is), so the
        number is never reused with other content; the live model was never touched."""
        from orinkit.repo.deploy import set_aside_version
        from orinkit.repo.errors import RepoError

        try:
            set_aside_version(self.repository, model, wanted, source, reason)
        except (RepoError, OSError) as exc:  # the refusal stands; only its record on disk is missing
            self.progress(f"{model}: version {wanted} could not be set aside: {one_line(getattr(exc, 'message', exc))}")
        return self._refused(model, wanted, gate, reason)

    def _check_memory(self, version: int, size: int) -> None:
        from orinkit.jetson.memory import read_memory

        memory = read_memory(self.meminfo_root)
        if memory is None or memory.available_kb is None:
            return  # no /proc/meminfo (not Linux): nothing to judge by
        need = size * self.memory_factor + self.memory_margin_mb * MIB
        available = memory.available_kb * 1024
        if available < need:
            raise _NotEnoughMemory(
                f"version {version} not loaded: it needs {need / MIB:.0f} MiB available ({self.memory_factor:g} x its "
                f"{size / MIB:.1f} MiB + {self.memory_margin_mb:g} MiB; the serving version stays in memory until it "
                f"is READY) and MemAvailable is {available / MIB:.0f} MiB")

    def _pending(self, model: str, serving: int | None, reason: str, *, polls: int | None = None) -> ModelReport:
        self._not_before[model] = self._polls + (self.heartbeat_every if polls is None else polls)
        self.progress(f"{model}: {reason}")
        return ModelReport(self._serving_now(model, serving), PENDING, None, reason)

    def _refused(self, model: str, wanted: int, gate: str | None, reason: str) -> ModelReport:
        self._failed[model] = wanted
        self.progress(f"{model}: {reason}")
        return ModelReport(self._serving_now(model, None), FAILED_STATE, gate, reason)

    def _serving_now(self, model: str, fallback: int | None) -> int | None:
        from orinkit.repo.errors import RepoError
        from orinkit.repo.server_api import RepositoryAPI

        try:
            with RepositoryAPI(self.server) as api:
                self._ready = _ready_versions(api)
        except RepoError:
            return fallback
        return max(self._ready.get(model, []), default=None)

    def _load_quietly(self, model: str) -> None:
        from orinkit.repo.errors import RepoError
        from orinkit.repo.server_api import RepositoryAPI

        if not (self.repository / model).is_dir():
            return
        try:
            with RepositoryAPI(self.server) as api:
                api.load(model, self.load_timeout_s)
        except RepoError as exc:
            self.progress(f"{model}: loading what is on disk failed: {one_line(exc.message)}")

    # -- reports --------------------------------------------------------------------------------------------------

    def _models(self) -> dict[str, ModelReport]:
        wanted = dict(self._desired.models) if self._desired else {}
        models = {}
        for model, version in wanted.items():
            serving = max(self._ready.get(model, []), default=None)
            models[model] = self._outcomes.get(model) or ModelReport(
                serving, PENDING, None, f"version {version} not acted on yet")
        for model, versions in self._ready.items():
            if model not in wanted and versions:
                models[model] = ModelReport(max(versions), UNMANAGED, None,
                                            f"not in ring {self.ring}'s desired state: kept serving, not managed")
        return models

    def _maybe_report(self, changed: bool, errors: list[str]) -> bool:
        self._since_report += 1
        due = changed or self._report_due or self._burst > 0 or self._since_report >= self.heartbeat_every
        if not due:
            return False
        if self._bucket_cause is not None:
            self._report_due = True  # the store does not answer: report as soon as it does
            return False
        models = self._models()
        # Golden requests only to a server that answered this poll: a down one would make each wait its timeout.
        serving = {m: (r.version, self.store.gate(m, r.version)[1]) for m, r in models.items()
                   if r.version is not None and r.state != UNMANAGED} if self._server_ok else {}
        report = DeviceReport(self.device, self.ring, self._desired.generation if self._desired else 0, models,
                              time.time(), self.probe.measure(serving), "; ".join(errors),
                              {"bucket": self.bucket_outage.as_report(), "server": self.server_outage.as_report()})
        try:
            self.bucket.write(report_key(self.device), report.to_json())
        except BucketError as exc:
            self._report_due = True
            errors.append(self._bucket_failed(exc))
            return False
        self._since_report, self._report_due, self._burst = 0, False, max(0, self._burst - 1)
        return True


def _ready_versions(api) -> dict[str, list[int]]:
    ready: dict[str, list[int]] = {}
    for entry in api.index():
        # A shadow model is the agent's own, for the moment of a gate: not a model the device serves.
        if entry.state == READY and str(entry.version).isdigit() and not is_shadow(entry.name):
            ready.setdefault(entry.name, []).append(int(entry.version))
    return ready


def _version_numbers(folder: Path) -> list[int]:
    return [int(p.name) for p in folder.iterdir() if p.is_dir() and p.name.isdigit()] if folder.is_dir() else []


def _tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def read_report(bucket, device: str) -> DeviceReport | None:
    data = bucket.read(report_key(device))
    return None if data is None else DeviceReport.from_json(data)


def describe(result: PollResult) -> str:
    """One line per model for ``--once``."""
    lines = [f"generation {result.generation}" + (" (changed)" if result.changed else "")
             + (f"; {result.requests} S3 requests" if result.requests else "")]
    for model, report in sorted(result.models.items()):
        serving = "nothing serving" if report.version is None else f"version {report.version}"
        lines.append(f"  {model}: {report.state}, {serving}" + (f", gate {report.gate}" if report.gate else "")
                     + (f" - {report.reason}" if report.reason else ""))
    lines += [f"  ! {error}" for error in result.errors]
    return "\n".join(lines)


__all__ = ["Agent", "PollResult", "describe", "read_report"]
