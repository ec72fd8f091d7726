"""Ring rollouts over a local fleet: six real tritonservers (explicit model control, one repository each), one
agent thread per device, moto's S3 server as the bucket, client load throughout.

    python benchmarks/fleet.py [--clients 3] [--pause 0.01] [--interval 1] [--soak 3] [--idle-polls 50] [--keep]

Rings: canary (1 device), wave1 (2), all (3). Version 1 of a tiny Python-backend model (Y = X * 1, with a gate) is
rolled out first; then, with client threads cycling over the six servers' gRPC URLs (no version in the request):

a. BAD versions rolled out over canary, wave1, all; each must stop at the canary and roll back:
   a1. version 2 loads but answers X * 2 + 1 where its gate expects X * 2;
   a2. version 4's initialize raises (it never loads).
   Counted: failed client requests, requests answered wrongly (goal 0: the agent gates a version in a shadow model
   before the version serves), the ring it stopped at and the servers it touched (each server's
   repository index, sampled during the rollout and read after it, its repository folder and its agent's log);
b. a GOOD version 3 (X * 3) is rolled out to all six: time to full rollout, per ring, failed and wrong requests;
c. idle S3 requests: fresh agents with the default settings (60 s interval, heartbeat every 10 polls) polled N times
   back to back on an unchanged ring: requests per poll, per device per day at 60 s (goal <= 3,000), and on paper
   for 1,000 and 10,000 devices: requests and their price, bandwidth per release, rollout time per ring size.

Goals are printed met or MISSED; nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import logging
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from orinkit.client import Client
from orinkit.fleet import (
    Agent,
    Bucket,
    GateFile,
    RolloutError,
    SoakRule,
    push_repository,
    read_desired_state,
    rollout,
)
from orinkit.fleet.push import read_manifest
from orinkit.fleet.status import read_reports
from orinkit.repo.add import add_model
from orinkit.repo.errors import RepoError
from orinkit.repo.options import ModelOptions
from orinkit.repo.server_api import RepositoryAPI
from orinkit.repo.signature import TensorSpec
from orinkit.server.local import start_on_free_ports

REGION = "us-east-1"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": REGION}
MODEL = "scale"
X = np.arange(4, dtype=np.float32)
RINGS = {"canary": ("orin-1",), "wave1": ("orin-2", "orin-3"), "all": ("orin-4", "orin-5", "orin-6")}
DEVICES = {device: ring for ring, devices in RINGS.items() for device in devices}
# version → (K, OFFSET, BROKEN): it answers X * K + OFFSET (its gate expects X * K); a BROKEN one's initialize raises.
VERSIONS = {1: (1.0, 0.0, False), 2: (2.0, 1.0, False), 3: (3.0, 0.0, False), 4: (4.0, 0.0, True)}
WRONG, GOOD, BROKEN = 2, 3, 4
BAD_KINDS = {WRONG: "loads, answers X*2+1 where its gate expects X*2", BROKEN: "its initialize raises"}
RIGHT_ANSWERS = {v: X * k for v, (k, offset, broken) in VERSIONS.items() if not offset and not broken}
# Published S3 Standard request prices (us-east-1) as of this script's writing: an estimate, check the price list.
GET_PRICE_PER_1000 = 0.0004
PUT_PRICE_PER_1000 = 0.005
# Lenient: six servers, their agents, the clients and the S3 server share two busy cores; gate p99s are noisy.
RULE = SoakRule(p99_ratio=2.0, p99_slack_ms=150.0)

MODEL_PY = '''"""Y = X * K + OFFSET (a fleet benchmark model, version {version})."""
import numpy as np
import triton_python_backend_utils as pb_utils

K, OFFSET, BROKEN = {k}, {offset}, {broken}


class TritonPythonModel:
    def initialize(self, args):
        if BROKEN:
            raise RuntimeError("version {version} cannot start: its weights file is corrupt")

    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
            "Y", (pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * K + OFFSET).astype(np.float32))])
            for r in requests]
'''


def _silent(_line: str) -> None:
    pass


class _Interrupted(KeyboardInterrupt):
    pass


def _on_sigterm(_signum, _frame) -> None:
    raise _Interrupted()  # the same cleanup as Ctrl-C


# -- the bucket --------------------------------------------------------------------------------------------------

class OpCounter:
    """HTTP requests by S3 operation (GetObject, PutObject, ...) sent through one boto3 client."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, event_name: str = "", **_kwargs) -> None:
        self.counts[event_name.rsplit(".", 1)[-1]] += 1  # must return None (a value replaces the response)


def make_bucket(endpoint: str, name: str, *, timeout_s: float = 10.0) -> tuple[Bucket, OpCounter]:
    import boto3
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=endpoint, config=Config(
        connect_timeout=timeout_s, read_timeout=timeout_s, retries={"total_max_attempts": 3, "mode": "standard"},
        s3={"addressing_style": "path"}), **CREDENTIALS)
    ops = OpCounter()
    client.meta.events.register("before-send.s3", ops)
    return Bucket(f"s3://{name}/fleet", client=client), ops


# -- the model ---------------------------------------------------------------------------------------------------

def build_release(root: Path) -> Path:
    repository = root / "release"
    source = root / "scale.py"
    source.write_text(MODEL_PY.format(version=1, k=1.0, offset=0.0, broken=False))
    add_model(repository, source, name=MODEL, inputs=[TensorSpec.parse("X:FP32:4")],
              outputs=[TensorSpec.parse("Y:FP32:4")], options=ModelOptions(max_batch_size=0))
    for version, (k, offset, broken) in VERSIONS.items():
        folder = repository / MODEL / str(version)
        folder.mkdir(exist_ok=True)
        (folder / "model.py").write_text(MODEL_PY.format(version=version, k=k, offset=offset, broken=broken))
    return repository


def push(release: Path, bucket: Bucket, version: int) -> None:
    k = VERSIONS[version][0]
    golden = release.parent / f"gate-{version}.npz"
    np.savez(golden, **{"input:X": X, "output:Y": X * k})
    push_repository(release, bucket, models=[MODEL], versions=[version], gates={MODEL: GateFile(golden)},
                    unproven=True, progress=_silent)


# -- client load -------------------------------------------------------------------------------------------------

class Load:
    """Client threads cycling over the servers, requests without a version; each answer is judged right (X * K of a
    good version), wrong (anything else) or failed (an exception), under the phase current when it was sent."""

    def __init__(self, urls: dict[str, str], threads: int, pause_s: float) -> None:
        self.urls, self.pause_s = urls, pause_s
        self.phase = "setup"
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.wrong_by_device: dict[str, Counter[str]] = defaultdict(Counter)
        self.failures: dict[str, list[str]] = defaultdict(list)
        self.slowest: dict[str, float] = defaultdict(float)
        self.wrong_at: dict[str, list[float]] = defaultdict(list)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._work, args=(i,), name=f"client-{i}", daemon=True)
                        for i in range(threads)]

    def start(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def _work(self, index: int) -> None:
        clients = [(device, Client(url, MODEL)) for device, url in self.urls.items()]
        try:
            turn = index
            while not self.stop.is_set():
                device, client = clients[turn % len(clients)]
                turn += 1
                phase = self.phase
                started = time.monotonic()
                try:
                    answer = client(X=X)
                except Exception as exc:  # noqa: BLE001 - every failure is counted, whatever its kind
                    outcome, detail = "failed", f"{device}: {type(exc).__name__}: {exc}"
                else:
                    right = any(np.allclose(answer, want) for want in RIGHT_ANSWERS.values())
                    outcome, detail = ("right", "") if right else ("wrong", device)
                took = time.monotonic() - started
                with self.lock:
                    self.counts[phase][outcome] += 1
                    self.slowest[phase] = max(self.slowest[phase], took)
                    if outcome == "wrong":
                        self.wrong_by_device[phase][device] += 1
                        self.wrong_at[phase].append(started)
                    elif outcome == "failed" and len(self.failures[phase]) < 5:
                        self.failures[phase].append(detail)
                self.stop.wait(self.pause_s)
        finally:
            for _, client in clients:
                client.close()

    def summary(self, phase: str) -> str:
        counts = self.counts[phase]
        total = sum(counts.values())
        wrong = dict(self.wrong_by_device[phase])
        times = self.wrong_at[phase]
        return (f"{total} requests, {counts['failed']} failed, {counts['wrong']} answered wrongly"
                + (f" (by {', '.join(f'{d}: {n}' for d, n in sorted(wrong.items()))}, the first to the last "
                   f"{max(times) - min(times):.2f} s apart)" if wrong else "")
                + f"; slowest request {self.slowest[phase] * 1000:.0f} ms")


class IndexWatch:
    """Samples every server's repository index for versions of the model, so that a version loaded and unloaded
    between two agent reports is still seen."""

    def __init__(self, urls: dict[str, str], period_s: float = 0.25) -> None:
        self.urls, self.period_s = urls, period_s
        self.seen: dict[str, set[tuple[str, str]]] = defaultdict(set)  # device → {(version, state)}
        self.ready: dict[tuple[str, str], list[float]] = defaultdict(list)  # (device, version) → READY samples
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="index-watch", daemon=True)

    def __enter__(self) -> IndexWatch:
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def ready_window(self, device: str, version: int) -> float | None:
        """Seconds between the first and the last sample that saw ``version`` READY on ``device``."""
        samples = self.ready.get((device, str(version)))
        return samples[-1] - samples[0] if samples else None

    def _watch(self) -> None:
        apis = {device: RepositoryAPI(url, timeout_s=5.0) for device, url in self.urls.items()}
        try:
            while not self.stop.is_set():
                for device, api in apis.items():
                    try:
                        for entry in api.index():
                            if entry.name == MODEL:
                                self.seen[device].add((str(entry.version), entry.state))
                                if entry.state == "READY":
                                    self.ready[(device, str(entry.version))].append(time.monotonic())
                    except RepoError:
                        pass
                self.stop.wait(self.period_s)
        finally:
            for api in apis.values():
                api.__exit__(None, None, None)


# -- the fleet ---------------------------------------------------------------------------------------------------

class Fleet:
    def __init__(self, work: Path, interval_s: float) -> None:
        self.work, self.interval_s = work, interval_s
        self.moto = None
        self.endpoint = self.bucket_name = ""
        self.servers: dict[str, object] = {}
        self.urls: dict[str, str] = {}
        self.repositories: dict[str, Path] = {}
        self.agents: dict[str, Agent] = {}
        self.agent_ops: dict[str, OpCounter] = {}
        self.logs: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start_store(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.moto.start()
        host, port = self.moto.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self.bucket_name = "orin-fleet"
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, **CREDENTIALS).create_bucket(Bucket=self.bucket_name)

    def start_servers(self) -> float:
        started = time.monotonic()

        def one(device: str) -> None:
            repository = self.work / device / "models"
            repository.mkdir(parents=True)
            server = start_on_free_ports(repository, self.work / f"{device}.log", model_control_mode="explicit")
            with self._lock:
                self.servers[device] = server
                self.repositories[device] = repository
                self.urls[device] = server.command.grpc_url

        with ThreadPoolExecutor(max_workers=len(DEVICES)) as pool:
            for future in [pool.submit(one, device) for device in DEVICES]:
                future.result()
        self.urls = {device: self.urls[device] for device in DEVICES}
        return time.monotonic() - started

    def start_agents(self) -> None:
        for device, ring in DEVICES.items():
            bucket, ops = make_bucket(self.endpoint, self.bucket_name)
            agent = Agent(bucket, ring, self.repositories[device], self.urls[device], device=device,
                          interval_s=self.interval_s, gate_requests=5, progress=self._logger(device))
            self.agents[device], self.agent_ops[device] = agent, ops
            thread = threading.Thread(target=agent.run, args=(self.stop,), name=f"agent-{device}", daemon=True)
            self.threads.append(thread)
            thread.start()

    def _logger(self, device: str):
        def log(line: str) -> None:
            self.logs[device].append((time.monotonic(), line))
        return log

    def stop_agents(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)
        self.threads = [t for t in self.threads if t.is_alive()]

    def close(self) -> None:
        self.stop_agents()
        for server in self.servers.values():
            try:
                server.stop()
            except Exception as exc:  # noqa: BLE001 - the others must still be stopped
                print(f"stopping a server: {exc}", file=sys.stderr)
        if self.moto is not None:
            self.moto.stop()


def wait_reported(bucket: Bucket, timeout_s: float = 120.0) -> None:
    """Until every device's report names its ring (a rollout finds a ring's devices in their reports)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reports, _ = read_reports(bucket)
        if all(device in reports and reports[device].ring == ring for device, ring in DEVICES.items()):
            return
        time.sleep(0.3)
    raise RuntimeError("the agents did not report in time")


class RolloutClock:
    """The rollout's progress lines, timed: per ring, when it was written, READY everywhere, through its soak."""

    PATTERN = re.compile(r"^ring (\S+): (generation|every device|held)")

    def __init__(self) -> None:
        self.events: dict[str, dict[str, float]] = defaultdict(dict)
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        match = self.PATTERN.match(line)
        if match:
            kind = {"generation": "written", "every device": "ready", "held": "soaked"}[match.group(2)]
            self.events[match.group(1)].setdefault(kind, time.monotonic())

    def ready_s(self, ring: str) -> float | None:
        times = self.events.get(ring, {})
        return times["ready"] - times["written"] if "ready" in times and "written" in times else None


def run_rollout(bucket: Bucket, version: int, args, name: str) -> tuple[object, RolloutClock, float, str]:
    clock = RolloutClock()
    started = time.monotonic()
    error = ""
    result = None
    try:
        result = rollout(bucket, MODEL, version, list(RINGS), name=name, soak_s=args.soak, timeout_s=120.0,
                         poll_s=0.3, rule=RULE, progress=clock)
    except RolloutError as exc:
        error = exc.message
    return result, clock, time.monotonic() - started, error


# -- what touched the bad version --------------------------------------------------------------------------------

def touched_by(fleet: Fleet, version: int, watch: IndexWatch) -> dict[str, list[str]]:
    evidence: dict[str, list[str]] = {}
    for device, url in fleet.urls.items():
        found = []
        sampled = sorted(state for v, state in watch.seen.get(device, ()) if v == str(version))
        if sampled:
            found.append(f"index sampled during the rollout: {', '.join(sampled)}")
        try:
            with RepositoryAPI(url) as api:
                after = sorted(e.state for e in api.index() if e.name == MODEL and str(e.version) == str(version))
        except RepoError as exc:
            after = [f"unreadable ({exc.message})"]
        if after:
            found.append(f"index after: {', '.join(after)}")
        folder = fleet.repositories[device] / MODEL
        on_disk = sorted(p.name for p in folder.iterdir() if p.name.endswith(str(version)) and p.is_dir()) \
            if folder.is_dir() else []
        if on_disk:
            found.append(f"on disk: {', '.join(on_disk)}")
        mentions = [line for _, line in fleet.logs[device] if f"version {version} " in line + " "]
        if mentions:
            found.append(f"agent log: {mentions[0]!r}" + (f" (+{len(mentions) - 1} lines)" if len(mentions) > 1
                                                          else ""))
        if found:
            evidence[device] = found
    return evidence


def serves(url: str) -> np.ndarray:
    with Client(url, MODEL) as client:
        return client(X=X)


def apply_times(fleet: Fleet, version: int, since: float) -> dict[str, float]:
    """Per device, the agent's own time to place, load and gate ``version`` (from its log)."""
    pattern = re.compile(rf"^{MODEL}: version {version} READY, gate \S+ \(([\d.]+) s\)")
    times = {}
    for device, lines in fleet.logs.items():
        for moment, line in lines:
            match = pattern.match(line)
            if moment >= since and match:
                times[device] = float(match.group(1))
    return times


def ready_at(fleet: Fleet, version: int, since: float) -> dict[str, float]:
    pattern = re.compile(rf"^{MODEL}: version {version} READY")
    return {device: min(m for m, line in lines if m >= since and pattern.match(line))
            for device, lines in fleet.logs.items() if any(m >= since and pattern.match(line) for m, line in lines)}


def bad_rollout(fleet: Fleet, bucket: Bucket, load: Load, args, label: str, version: int) -> None:
    """Roll out a bad version over every ring: it must stop at the canary, which must serve version 1 again."""
    load.phase = label
    generations = {ring: read_desired_state(bucket, ring)[0].generation for ring in RINGS}
    with IndexWatch(fleet.urls) as watch:
        _, _, seconds, error = run_rollout(bucket, version, args, f"bad-{version}")
        time.sleep(1.0)  # requests already sent during the rollback are counted here
    load.phase = "between"
    after = {ring: read_desired_state(bucket, ring)[0] for ring in RINGS}
    stopped_at = [ring for ring in RINGS if after[ring].generation > generations[ring]]
    evidence = touched_by(fleet, version, watch)
    outside = sorted(set(evidence) - set(RINGS["canary"]))
    canary_v1 = np.allclose(serves(fleet.urls[RINGS["canary"][0]]), RIGHT_ANSWERS[1])
    everyone_v1 = all(np.allclose(serves(url), RIGHT_ANSWERS[1]) for url in fleet.urls.values())
    print(f"{label}. bad version {version} ({BAD_KINDS[version]}) over canary, wave1, all:")
    print(f"   rollout {'raised RolloutError' if error else 'SUCCEEDED (wrong!)'} after {seconds:.1f} s"
          + (f": {' '.join(error.split('. Rings put back')[0].split())}" if error else ""))
    print(f"   stopped at ring: {', '.join(stopped_at) or 'none'} (goal: canary) "
          f"{goal(stopped_at == ['canary'] and bool(error))}; ring generations: "
          + ", ".join(f"{r} {generations[r]}->{after[r].generation}" for r in RINGS))
    print(f"   servers touched by version {version}: {', '.join(sorted(evidence)) or 'none'}")
    for device, found in sorted(evidence.items()):
        print(f"     {device} ({DEVICES[device]}): " + "; ".join(found))
    live = watch.ready_window(RINGS["canary"][0], version)
    if live is not None:
        print(f"   version {version} READY in the canary's index for ~{live:.1f} s (sampled every "
              f"{watch.period_s:g} s)")
    print(f"   outside the canary: {', '.join(outside) or 'none'} (goal: none) {goal(not outside)}")
    print(f"   canary serves version 1 again: {canary_v1}; all six serve version 1: {everyone_v1}")
    print(f"   client load: {load.summary(label)}")
    if load.counts[label]["wrong"]:
        print("   (the agent gates a version in a shadow model before it is live: requests without a version "
              "should never reach a bad one; wrong answers here mean it did)")
    for line in load.failures[label]:
        print(f"     failure: {line}")


# -- c: idle requests --------------------------------------------------------------------------------------------

def idle_requests(fleet: Fleet, polls: int) -> dict:
    """Fresh agents with the default settings on each (unchanged) device, polled back to back."""
    per_device, ops_total = {}, Counter()
    for device, ring in DEVICES.items():
        bucket, ops = make_bucket(fleet.endpoint, fleet.bucket_name)
        agent = Agent(bucket, ring, fleet.repositories[device], fleet.urls[device], device=device,
                      progress=_silent)
        warm = [agent.poll_once() for _ in range(2)]  # the first poll reads the ring in full and reports
        if any(r.errors for r in warm):
            raise RuntimeError(f"{device}: the idle agent's first polls failed: {warm}")
        ops.counts.clear()
        before = bucket.requests
        results = [agent.poll_once() for _ in range(polls)]
        per_device[device] = {"requests": bucket.requests - before, "changed": sum(r.changed for r in results),
                              "reports": sum(r.reported for r in results)}
        ops_total += ops.counts
    return {"per_device": per_device, "ops": ops_total, "polls": polls, "interval_s": agent.interval_s,
            "heartbeat_every": agent.heartbeat_every}


def report_read_s(bucket: Bucket, rounds: int = 5) -> float:
    """Seconds the rollout spends reading one device's report (it reads them one after another)."""
    started = time.monotonic()
    for _ in range(rounds):
        read_reports(bucket, list(DEVICES))
    return (time.monotonic() - started) / (rounds * len(DEVICES))


# -- main --------------------------------------------------------------------------------------------------------

def goal(met: bool) -> str:
    return "met" if met else "MISSED"


def main() -> int:  # noqa: C901, PLR0915 - one benchmark, read top to bottom
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=3, help="client threads")
    parser.add_argument("--pause", type=float, default=0.01, help="seconds each client waits between requests")
    parser.add_argument("--interval", type=float, default=1.0, help="the agents' poll interval during a and b")
    parser.add_argument("--soak", type=float, default=3.0, help="the rollout's soak per ring")
    parser.add_argument("--idle-polls", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (server and agent logs)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _on_sigterm)
    work = Path(tempfile.mkdtemp(prefix="orinkit-fleet-"))
    fleet = Fleet(work, args.interval)
    load: Load | None = None
    began = time.monotonic()
    try:
        fleet.start_store()
        bucket, control_ops = make_bucket(fleet.endpoint, fleet.bucket_name)
        release = build_release(work)
        for version in VERSIONS:
            push(release, bucket, version)
        sizes = {v: sum(f.size for f in read_manifest(bucket, MODEL, v).files) for v in VERSIONS}
        seconds = fleet.start_servers()
        print(f"fleet: 6 tritonservers (explicit mode, empty repositories) ready in {seconds:.1f} s; rings "
              + ", ".join(f"{ring} {list(devices)}" for ring, devices in RINGS.items())
              + f"; agents poll every {args.interval:g} s; S3 is moto at {fleet.endpoint}")
        fleet.start_agents()
        wait_reported(bucket)
        result, clock, seconds, error = run_rollout(bucket, 1, args, "setup-1")
        if error:
            print(f"setup: the rollout of version 1 failed: {error}")
            return 1
        print(f"setup: version 1 rolled out to all 6 in {seconds:.1f} s (soak {args.soak:g} s per ring)")

        load = Load(fleet.urls, args.clients, args.pause).start()
        time.sleep(2.0)

        # a. bad versions: one that answers wrongly, one that cannot start
        print()
        for label, version in (("a1", WRONG), ("a2", BROKEN)):
            bad_rollout(fleet, bucket, load, args, label, version)
        failed_a = sum(load.counts[p]["failed"] for p in ("a1", "a2"))
        wrong_a = sum(load.counts[p]["wrong"] for p in ("a1", "a2"))
        print(f"a. failed requests during a: {failed_a} (goal 0) {goal(failed_a == 0)}; wrong answers during a: "
              f"{wrong_a} (goal 0) {goal(wrong_a == 0)}")

        # b. the good version
        time.sleep(1.0)
        load.phase = "b"
        b_started = time.monotonic()
        result, clock, seconds_b, error = run_rollout(bucket, GOOD, args, "good-3")
        time.sleep(1.0)
        load.phase = "after"
        print(f"\nb. good version {GOOD} over canary, wave1, all:")
        if error:
            print(f"   rollout FAILED after {seconds_b:.1f} s: {error}")
        everyone_v3 = all(np.allclose(serves(url), RIGHT_ANSWERS[GOOD]) for url in fleet.urls.values())
        soak_total = args.soak * len(RINGS)
        print(f"   time to full rollout: {seconds_b:.1f} s ({seconds_b - soak_total:.1f} s without the "
              f"{len(RINGS)} x {args.soak:g} s soaks); all six serve version {GOOD}: {everyone_v3}")
        applied = apply_times(fleet, GOOD, b_started)
        moments = ready_at(fleet, GOOD, b_started)
        ring_ready = {}
        for ring, devices in RINGS.items():
            written = clock.events.get(ring, {}).get("written")
            own = [moments[d] - written for d in devices if d in moments and written is not None]
            ring_ready[ring] = max(own) if own and len(own) == len(devices) else None
            seen = clock.ready_s(ring)
            print(f"   ring {ring} ({len(devices)} device{'s' * (len(devices) > 1)}): written -> every device "
                  f"READY {'-' if ring_ready[ring] is None else f'{ring_ready[ring]:.1f}'} s by the agents' "
                  f"clocks, {'-' if seen is None else f'{seen:.1f}'} s as the rollout saw it; agents' place+load+"
                  f"gate " + ", ".join(f"{d} {applied[d]:.1f} s" for d in devices if d in applied))
        print(f"   client load during b: {load.summary('b')}")
        failed_b, wrong_b = load.counts["b"]["failed"], load.counts["b"]["wrong"]
        print(f"   failed requests during b: {failed_b} (goal 0) {goal(failed_b == 0)}; wrong answers: {wrong_b} "
              f"(goal 0) {goal(wrong_b == 0)}")
        for line in load.failures["b"]:
            print(f"     failure: {line}")
        load.close()
        load = None
        fleet.stop_agents()

        # c. idle requests
        idle = idle_requests(fleet, args.idle_polls)
        polls_all = idle["polls"] * len(DEVICES)
        total = sum(d["requests"] for d in idle["per_device"].values())
        per_poll = total / polls_all
        per_day = per_poll * 86400 / 60.0
        ops = idle["ops"]
        gets, puts = ops.get("GetObject", 0) / polls_all, ops.get("PutObject", 0) / polls_all
        print(f"\nc. idle S3 requests, fresh agents with the default settings (interval {idle['interval_s']:g} s, "
              f"heartbeat report every {idle['heartbeat_every']} polls), {idle['polls']} polls back to back on "
              f"each of the 6 devices, ring unchanged:")
        print(f"   {total} requests in {polls_all} polls = {per_poll:.3f} per poll ({dict(sorted(ops.items()))}: "
              f"{gets:.3f} GET (the conditional read of the ring, 304 when unchanged) + {puts:.3f} PUT (the "
              f"heartbeat report) per poll); per device: "
              + ", ".join(f"{d} {v['requests']}" for d, v in idle["per_device"].items()))
        print(f"   per device per day at 60 s: {per_day:.0f} (goal <= 3,000) {goal(per_day <= 3000)}")
        cost_note = (f"priced at the published S3 Standard us-east-1 list prices as known when this was written "
                     f"(GET ${GET_PRICE_PER_1000} per 1,000, PUT ${PUT_PRICE_PER_1000} per 1,000): an estimate")
        print(f"   on paper ({cost_note}):")
        for devices in (1000, 10000):
            day = per_day * devices
            get_cost = day * GET_PRICE_PER_1000 / 1000
            actual = devices * 86400 / 60.0 * (gets * GET_PRICE_PER_1000 + puts * PUT_PRICE_PER_1000) / 1000
            print(f"     {devices:>6,} devices: {day:>12,.0f} requests a day, {day / 86400:7.1f} a second; "
                  f"all at the GET price ${get_cost:,.2f} a day (${get_cost * 30:,.0f} a month); with the "
                  f"heartbeat PUTs at the PUT price ${actual:,.2f} a day (${actual * 30:,.0f} a month)")
        size = sizes[GOOD]
        print(f"   bandwidth per release = version size x devices (every device downloads every file once; a "
              f"rollback to the version on disk downloads nothing): this version {size:,} bytes -> "
              f"{size * 1000 / 1e6:.1f} MB for 1,000, {size * 10000 / 1e6:.1f} MB for 10,000; a 100 MB engine (an "
              f"assumed size) -> 100 GB and 1 TB")
        per_read = report_read_s(bucket)
        slowest = max(applied.values()) if applied else float("nan")
        print("   rollout time per ring, measured here (b): "
              + ", ".join(f"{len(RINGS[r])} device(s) {ring_ready[r]:.1f} s" for r in RINGS
                          if ring_ready[r] is not None)
              + f" at a {args.interval:g} s interval; slowest place+load+gate {slowest:.1f} s")
        print("   model: the devices act in parallel and the rollout waits for every device of the ring, so a "
              "ring's time is its slowest device's (poll wait + download + load + gate + report), plus the "
              "rollout reading every report one after another. Assumed: every device online and as fast as "
              "these, the store not throttling, the poll wait uniform in [0, interval) (expected largest of n: "
              "interval x n/(n+1)); one device offline stalls its ring until timeout_s and then rolls it back.")
        print(f"   the rollout reads one report in {per_read * 1000:.1f} ms here (moto on localhost; real S3 from a "
              f"controller is slower)")
        for devices in (1, 10, 100, 1000, 10000):
            wait = 60.0 * devices / (devices + 1)
            sweep = devices * per_read
            print(f"     ring of {devices:>6,}: ~{wait + slowest + sweep:7.0f} s at a 60 s interval "
                  f"({wait:.0f} s poll wait + {slowest:.1f} s apply + {sweep:.1f} s reading reports per sweep), "
                  f"plus the soak; bytes pulled {size * devices / 1e6:.2f} MB")
        controller = dict(sorted(control_ops.counts.items()))
        agents_b = {d: sum(ops.counts.values()) for d, ops in fleet.agent_ops.items()}
        print(f"   S3 requests made by this script's controller (pushes, rollouts, checks): {controller}; by each "
              f"agent over the whole run at a {args.interval:g} s interval: {agents_b}")
        print(f"\ntotal run time {time.monotonic() - began:.0f} s")
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted: stopping clients, agents, servers and the S3 server", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave servers behind
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if load is not None:
            load.close()
        fleet.close()
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
