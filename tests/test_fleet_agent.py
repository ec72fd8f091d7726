"""The device agent against moto's S3 server and a real tritonserver in explicit mode: versions placed, gated and
reported; half-pushed, corrupt, unloadable, wrong and too-large versions refused with the old one serving; the bucket
going away and coming back; the idle cost in requests."""

from __future__ import annotations

import re
import socket
import threading
import time

import numpy as np
import pytest

from orinkit.client.server_text import one_line
from orinkit.fleet.agent import Agent, read_report
from orinkit.fleet.errors import UnknownVersionError
from orinkit.fleet.layout import MANIFEST, DesiredState, ring_key
from orinkit.fleet.push import GateFile, push_repository
from orinkit.fleet.rings import write_desired_state
from orinkit.fleet.shadow import build_shadow, shadow_name
from orinkit.repo.add import add_model
from orinkit.repo.check import check_repository
from orinkit.repo.journal import read_journal
from orinkit.repo.options import ModelOptions
from orinkit.repo.server_api import RepositoryAPI
from orinkit.repo.signature import TensorSpec
from orinkit.server.testing import start_on_free_ports

pytest_plugins = ["fleet_fixtures"]

X = np.arange(4, dtype=np.float32)
MODEL = "scale"
# Y = X * K; version 3 cannot load; version 4 answers X * 4 + 1 (its gate expects X * 4); version 5 is slow.
MODEL_PY = '''"""Y = X * K (a fleet test model)."""
import time

import numpy as np
import triton_python_backend_utils as pb_utils

K, OFFSET, SLEEP_S, BROKEN = {k}, {offset}, {sleep}, {broken}


class TritonPythonModel:
    def initialize(self, args):
        if BROKEN:
            raise RuntimeError("version {version} cannot start: its weights file is corrupt")

    def execute(self, requests):
        if SLEEP_S:
            time.sleep(SLEEP_S)
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
            "Y", (pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * K + OFFSET).astype(np.float32))])
            for r in requests]
'''
VERSIONS = {1: {}, 2: {}, 3: {"broken": True}, 4: {"offset": 1.0}, 5: {"sleep": 0.25}, 6: {}}


def model_source(version: int) -> str:
    spec = {"k": float(version), "offset": 0.0, "sleep": 0.0, "broken": False, **VERSIONS[version]}
    return MODEL_PY.format(version=version, **spec)


def build_source(root) -> object:
    """The release repository: scale versions 1-6 (never loaded here: pushed with unproven=True)."""
    repository = root / "release"
    source = root / "scale.py"
    source.write_text(model_source(1))
    add_model(repository, source, name=MODEL, inputs=[TensorSpec.parse("X:FP32:4")],
              outputs=[TensorSpec.parse("Y:FP32:4")], options=ModelOptions(max_batch_size=0))
    for version in VERSIONS:
        (repository / MODEL / str(version)).mkdir(exist_ok=True)
        (repository / MODEL / str(version) / "model.py").write_text(model_source(version))
    return repository


def push(source, bucket, *versions: int) -> None:
    for version in versions:
        golden = source.parent / f"gate-{version}.npz"
        np.savez(golden, **{"input:X": X, "output:Y": X * float(version)})
        push_repository(source, bucket, models=[MODEL], versions=[version], gates={MODEL: GateFile(golden)},
                        unproven=True, progress=lambda line: None)


def infer(url: str, version: str = "") -> np.ndarray:
    from orinkit.client import Client

    with Client(url, MODEL, version or None) as client:
        return client(X=X)


def poll_until(agent: Agent, predicate, *, polls: int = 40):
    for _ in range(polls):
        result = agent.poll_once()
        if predicate(result):
            return result
    raise AssertionError(f"not reached after {polls} polls: {result}")


def ready(version: int):
    return lambda r: MODEL in r.models and (r.models[MODEL].state, r.models[MODEL].version) == ("READY", version)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return build_source(tmp_path_factory.mktemp("source"))


@pytest.fixture
def device(tmp_path):
    """An empty device repository under a real tritonserver in explicit mode."""
    repository = tmp_path / "device" / "models"
    repository.mkdir(parents=True)
    server = start_on_free_ports(repository, tmp_path / "server.log", model_control_mode="explicit")
    yield repository, server.command.grpc_url
    server.stop()


def make_agent(bucket, device, **options) -> Agent:
    repository, url = device
    defaults = dict(device="orin-1", interval_s=0.05, heartbeat_every=5, report_burst=0, gate_requests=5,
                    progress=lambda line: None)
    return Agent(bucket, "canary", repository, url, **{**defaults, **options})


def test_the_agent_brings_a_new_version_to_ready_gated_and_reported(source, bucket, device):
    repository, url = device
    push(source, bucket, 1, 2)
    write_desired_state(bucket, "canary", {MODEL: 1}, note="first")
    agent = make_agent(bucket, device)
    first = agent.poll_once()
    assert first.changed and first.reported and first.models[MODEL].state == "READY"
    np.testing.assert_array_equal(infer(url), X)

    write_desired_state(bucket, "canary", {MODEL: 2})
    started = time.monotonic()
    result = poll_until(agent, ready(2))
    seconds = time.monotonic() - started
    print(f"\nversion 2 READY and gated {seconds:.2f} s after the desired state changed")
    assert result.models[MODEL].gate == "passed"
    np.testing.assert_array_equal(infer(url), X * 2)
    report = read_report(bucket, "orin-1")
    assert (report.ring, report.generation) == ("canary", 2)
    assert report.models[MODEL].version == 2 and report.models[MODEL].gate == "passed"
    assert report.health[f"{MODEL}:p99_ms"] > 0 and report.health[f"{MODEL}:failures"] == 0
    assert sorted(p.name for p in (repository / MODEL).iterdir() if not p.name.startswith(".")) == [
        "1", "2", "config.pbtxt"], "the previous version stays as the rollback target"
    assert read_journal(repository / MODEL).proven >= {2}
    assert [p.name for p in repository.iterdir()] == [MODEL], "nothing staged inside the repository"
    assert not any((repository.parent / ".models.fleet" / "staging").iterdir()), "staging emptied"

    # A restarted agent finds the wanted version serving and its gate recorded: nothing downloaded.
    again = make_agent(bucket, device)
    before = bucket.requests
    result = again.poll_once()
    assert result.models[MODEL] == report.models[MODEL] and bucket.requests - before <= 2


def test_a_rollback_to_a_version_on_disk_needs_no_download(source, bucket, device):
    repository, url = device
    push(source, bucket, 1, 2)
    write_desired_state(bucket, "canary", {MODEL: 1})
    agent = make_agent(bucket, device)
    poll_until(agent, ready(1))
    write_desired_state(bucket, "canary", {MODEL: 2})
    poll_until(agent, ready(2))
    write_desired_state(bucket, "canary", {MODEL: 1}, note="rollback")
    before = bucket.requests
    result = poll_until(agent, ready(1))
    assert result.requests <= 2, "the ring read and the report: version 1 was on disk"
    assert bucket.requests - before <= 2
    np.testing.assert_array_equal(infer(url), X)
    assert (repository / MODEL / "rolled-back-2").is_dir() and not (repository / MODEL / "2").exists()


def test_a_half_pushed_version_is_never_pulled(source, bucket, device):
    repository, url = device
    push(source, bucket, 1, 2)
    bucket.delete(f"models/{MODEL}/2/{MANIFEST}")  # files there, manifest not yet: a push still under way
    write_desired_state(bucket, "canary", {MODEL: 1})
    agent = make_agent(bucket, device)
    poll_until(agent, ready(1))
    with pytest.raises(UnknownVersionError):
        write_desired_state(bucket, "canary", {MODEL: 2})
    # Written by hand (or by an older tool): the agent must still refuse to pull it.
    bucket.write(ring_key("canary"), DesiredState("canary", {MODEL: 2}, 7).to_json())
    result = agent.poll_once()
    state = result.models[MODEL]
    assert (state.state, state.version) == ("PENDING", 1) and "no manifest" in state.reason
    assert not (repository / MODEL / "2").exists()
    np.testing.assert_array_equal(infer(url), X)
    assert "no manifest" in read_report(bucket, "orin-1").models[MODEL].reason

    push(source, bucket, 2)  # the push finishes: the agent picks it up at a later poll
    poll_until(agent, ready(2))
    np.testing.assert_array_equal(infer(url), X * 2)


def test_a_file_changed_after_the_push_is_refused_and_reported(source, bucket, device):
    repository, url = device
    push(source, bucket, 1, 6)
    bucket.write(f"models/{MODEL}/6/version/model.py", model_source(6).encode() + b"\n# tampered\n")
    write_desired_state(bucket, "canary", {MODEL: 1})
    agent = make_agent(bucket, device)
    poll_until(agent, ready(1))
    write_desired_state(bucket, "canary", {MODEL: 6})
    result = agent.poll_once()
    state = result.models[MODEL]
    assert (state.state, state.version) == ("FAILED", 1)
    assert "refused" in state.reason and "sha256" in state.reason and "version/model.py" in state.reason
    assert not (repository / MODEL / "6").exists() and not any(p.name.endswith("6")
                                                              for p in (repository / MODEL).iterdir())
    np.testing.assert_array_equal(infer(url), X)
    requests = [agent.poll_once().requests for _ in range(3)]
    assert max(requests) <= 2, "a refused version is not downloaded again at every poll"


@pytest.mark.parametrize("version, gate, reason", [
    (3, None, "did not load"),
    (4, "failed", "failed its gate: output Y differs"),
])
def test_a_version_that_cannot_load_or_fails_its_gate_leaves_the_old_one_serving(source, bucket, device, version,
                                                                                  gate, reason):
    repository, url = device
    push(source, bucket, 1, version)
    write_desired_state(bucket, "canary", {MODEL: 1})
    agent = make_agent(bucket, device)
    poll_until(agent, ready(1))
    write_desired_state(bucket, "canary", {MODEL: version})
    state = agent.poll_once().models[MODEL]
    assert (state.state, state.version, state.gate) == ("FAILED", 1, gate)
    assert reason in state.reason
    if version == 3:
        assert "weights file is corrupt" in state.reason
    np.testing.assert_array_equal(infer(url), X)
    journal = read_journal(repository / MODEL)
    assert version in journal.quarantined and version not in journal.proven
    assert (repository / MODEL / f"quarantined-{version}").is_dir(), "set aside: the next start does not load it"
    assert read_report(bucket, "orin-1").models[MODEL].state == "FAILED"
    # Gated in a shadow model before it was placed: the live model never loaded it, the shadow is gone.
    with RepositoryAPI(url) as api:
        assert not [e for e in api.index() if e.name == MODEL and e.version == str(version)]
        assert not [e for e in api.index() if e.name == shadow_name(MODEL) and e.state == "READY"]
    assert [p.name for p in repository.iterdir()] == [MODEL]


def test_a_version_that_fails_its_gate_never_answers_a_client(source, bucket, device):
    """Requests without a version go to the newest READY version: version 4 (loads, answers X * 4 + 1) must
    never be one while a client calls the whole time the agent brings it."""
    from orinkit.client import Client

    repository, url = device
    push(source, bucket, 1, 4)
    write_desired_state(bucket, "canary", {MODEL: 1})
    lines, findings = [], []

    def progress(line: str) -> None:
        lines.append(line)
        if "gating version" in line:  # the shadow folder is in the repository now: edge-repo check must be content
            assert (repository / shadow_name(MODEL)).is_dir()
            findings.extend(f for f in check_repository(repository) if f.severity == "error")

    agent = make_agent(bucket, device, progress=progress)
    poll_until(agent, ready(1))
    write_desired_state(bucket, "canary", {MODEL: 4})
    answers, failures, stop, started = [], [], threading.Event(), threading.Event()

    def client() -> None:
        with Client(url, MODEL, None) as calls:
            while not stop.is_set():
                try:
                    answers.append(calls(X=X))
                except Exception as exc:  # counted: a failed request is a failure too
                    failures.append(exc)
                started.set()

    thread = threading.Thread(target=client, daemon=True)
    thread.start()
    assert started.wait(30)
    try:
        state = agent.poll_once().models[MODEL]
        time.sleep(0.2)
    finally:
        stop.set()
        thread.join(30)
    wrong = [a for a in answers if not np.array_equal(a, X)]
    print(f"\n{len(answers)} client requests while version 4 was gated: {len(wrong)} wrong, {len(failures)} failed")
    assert len(answers) > 20 and not wrong and not failures
    assert any("gating version 4" in line for line in lines), "gated in the shadow model"
    assert not findings, findings
    assert (state.state, state.version, state.gate) == ("FAILED", 1, "failed")
    assert "failed its gate: output Y differs" in state.reason
    assert [p.name for p in repository.iterdir()] == [MODEL], "the shadow folder is gone"
    assert (repository / MODEL / "quarantined-4").is_dir() and 4 in read_journal(repository / MODEL).quarantined
    report = read_report(bucket, "orin-1").models[MODEL]
    assert report.state == "FAILED" and "failed its gate" in report.reason


def test_a_shadow_model_left_by_a_killed_agent_is_removed_at_start(source, bucket, device):
    repository, url = device
    push(source, bucket, 1, 2)
    write_desired_state(bucket, "canary", {MODEL: 1})
    poll_until(make_agent(bucket, device), ready(1))
    # As a kill mid-gate leaves it: the folder in the repository, the model loaded.
    build_shadow(repository, MODEL, 1, repository / MODEL / "1", None)
    with RepositoryAPI(url) as api:
        api.load(shadow_name(MODEL))
        assert api.versions(shadow_name(MODEL)) == [1]
    agent = make_agent(bucket, device)
    assert not (repository / shadow_name(MODEL)).exists(), "removed at start"
    agent.poll_once()
    with RepositoryAPI(url) as api:
        api.wait_unloaded(shadow_name(MODEL), 30)
    write_desired_state(bucket, "canary", {MODEL: 2})
    poll_until(agent, ready(2))
    assert [p.name for p in repository.iterdir()] == [MODEL]


def test_not_enough_memory_keeps_the_old_version_until_there_is(source, bucket, device, tmp_path):
    _, url = device
    push(source, bucket, 1, 2)
    meminfo = tmp_path / "root" / "proc" / "meminfo"
    meminfo.parent.mkdir(parents=True)
    meminfo.write_text("MemTotal: 7800000 kB\nMemAvailable: 300000 kB\n")
    write_desired_state(bucket, "canary", {MODEL: 1})
    agent = make_agent(bucket, device, meminfo_root=tmp_path / "root", memory_margin_mb=0)
    poll_until(agent, ready(1))
    agent.memory_margin_mb = 512  # the next version needs more than the 293 MiB available
    write_desired_state(bucket, "canary", {MODEL: 2})
    state = agent.poll_once().models[MODEL]
    assert (state.state, state.version) == ("PENDING", 1) and "MemAvailable is 293 MiB" in state.reason
    meminfo.write_text("MemTotal: 7800000 kB\nMemAvailable: 3000000 kB\n")
    poll_until(agent, ready(2), polls=12)  # retried at the heartbeat
    np.testing.assert_array_equal(infer(url), X * 2)


def test_models_left_out_of_the_desired_state_keep_serving_as_unmanaged(source, bucket, device):
    _, url = device
    push(source, bucket, 1)
    write_desired_state(bucket, "canary", {MODEL: 1})
    agent = make_agent(bucket, device)
    poll_until(agent, ready(1))
    write_desired_state(bucket, "canary", {})
    state = agent.poll_once().models[MODEL]
    assert (state.state, state.version) == ("UNMANAGED", 1) and "kept serving" in state.reason
    np.testing.assert_array_equal(infer(url), X)


def test_with_the_bucket_down_the_server_serves_and_the_agent_recovers(source, bucket, device):
    from moto.server import ThreadedMotoServer

    from orinkit.fleet.bucket import Bucket

    _, url = device
    push(source, bucket, 1, 2)
    write_desired_state(bucket, "canary", {MODEL: 1})
    port = free_port()
    store = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    store.start()  # a second endpoint onto the same in-process data: stopping it takes the bucket away
    try:
        flaky = Bucket(str(bucket.url), endpoint_url=f"http://127.0.0.1:{port}", timeout_s=1.0, retries=0)
        agent = make_agent(flaky, device, interval_s=0.1, max_backoff_s=0.8)
        poll_until(agent, ready(1))
    finally:
        store.stop()
    write_desired_state(bucket, "canary", {MODEL: 2})  # while this device cannot see the bucket
    waits = []
    for _ in range(5):
        result = agent.poll_once()
        assert result.errors and "no answer" in result.errors[0] and not result.reported
        waits.append(result.next_poll_s)
        np.testing.assert_array_equal(infer(url), X)  # serving from disk all along
    assert waits[0] >= 0.1 and waits[-1] <= 0.8 and max(waits) > 2 * waits[0], waits
    # An agent started while the bucket is down acts on the desired state it read last.
    restarted = make_agent(flaky, device, interval_s=0.1)
    assert restarted.poll_once().models[MODEL].version == 1

    store = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    store.start()
    try:
        poll_until(agent, ready(2))
        np.testing.assert_array_equal(infer(url), X * 2)
        assert read_report(bucket, "orin-1").generation == 2
    finally:
        store.stop()


def test_the_idle_agent_makes_one_request_per_poll(source, bucket, device):
    push(source, bucket, 1)
    write_desired_state(bucket, "canary", {MODEL: 1})
    agent = make_agent(bucket, device, heartbeat_every=10)
    poll_until(agent, ready(1))
    agent.poll_once()
    polls, before = 50, bucket.requests
    results = [agent.poll_once() for _ in range(polls)]
    requests = bucket.requests - before
    assert not any(r.changed for r in results)
    assert requests == polls + polls // 10, "one conditional read per poll, one heartbeat report every 10"
    per_day = requests / polls * 86400 / 60
    print(f"\nidle agent: {requests} S3 requests in {polls} polls = {per_day:.0f} a day at a 60 s interval")
    assert per_day <= 3000


def test_the_staging_folder_is_beside_the_repository_and_private(bucket, device):
    repository, _ = device
    agent = make_agent(bucket, device)
    assert agent.store.root.parent == repository.parent and agent.store.root.name == ".models.fleet"
    assert (agent.store.root.stat().st_mode & 0o777) == 0o700


# -- what the agent says: outages in its log and report, server messages in one line -----------------------------

def wait_for(predicate, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in {timeout_s:g} s: {what}")
        time.sleep(0.05)


def outages_counted(bucket, device: str, what: str = "bucket") -> int:
    report = read_report(bucket, device)
    return 0 if report is None else int((report.outages.get(what) or {}).get("count") or 0)


def polls_failed(line: str) -> int:
    return int(re.search(r"\((\d+) polls? failed\)", line)[1])


def test_a_bucket_outage_is_told_when_it_starts_while_it_lasts_and_when_it_ends(source, bucket, device):
    from moto.server import ThreadedMotoServer

    from orinkit.fleet.bucket import Bucket

    _, url = device
    push(source, bucket, 1)
    write_desired_state(bucket, "canary", {MODEL: 1})
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    store = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    store.start()  # a second endpoint onto the same in-process data: stopping it takes the bucket away
    lines: list[str] = []
    flaky = Bucket(str(bucket.url), endpoint_url=endpoint, timeout_s=1.0, retries=0)
    agent = make_agent(flaky, device, interval_s=0.05, max_backoff_s=0.2, outage_remind_every_s=0.5,
                       progress=lines.append)
    try:
        poll_until(agent, ready(1))
    finally:
        store.stop()
    stop = threading.Event()
    thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_for(lambda: sum("still does not answer" in line for line in lines) >= 2, "two reminders")
        np.testing.assert_array_equal(infer(url), X)  # serving from disk all along
        store = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        store.start()
        wait_for(lambda: any("answers again" in line for line in lines), "the recovery")
        wait_for(lambda: outages_counted(bucket, "orin-1") == 1, "a report counting the outage")
    finally:
        stop.set()
        thread.join(30)
        store.stop()
    told = [line for line in lines if f"the bucket {bucket.url} at {endpoint}" in line]
    first, reminders, back = told[0], told[1:-1], told[-1]
    print("\n" + "\n".join(told[:3] + ["..."] + told[-1:]))
    assert "does not answer: no answer from" in first and "still" not in first
    assert "keeps serving what is on disk; acting on ring canary generation 1" in first
    assert "retrying in" in first and "backing off to at most 0.2 s" in first
    assert reminders and all("still does not answer after" in line and "next try in" in line for line in reminders)
    counts = [polls_failed(line) for line in reminders]
    assert counts == sorted(set(counts)) and counts[0] > 1, "each reminder counts the polls failed so far"
    assert "answers again after" in back and polls_failed(back) >= counts[-1]
    assert all("\n" not in line for line in lines)
    outage = read_report(bucket, "orin-1").outages
    assert outage["bucket"]["count"] == 1 and outage["bucket"]["last_failed_polls"] == polls_failed(back)
    assert outage["bucket"]["last_s"] > 0 and outage["bucket"]["ongoing_s"] is None
    assert outage["server"]["count"] == 0


def test_the_agent_service_logs_a_bucket_outage_and_its_end_on_stderr(source, bucket, device, s3_env):
    """`edge-fleet agent` as systemd runs it: what it writes to stderr is the journal."""
    import subprocess
    import sys

    from moto.server import ThreadedMotoServer

    repository, url = device
    push(source, bucket, 1)
    write_desired_state(bucket, "canary", {MODEL: 1})
    port = free_port()
    store = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    store.start()
    command = [sys.executable, "-m", "orinkit.cli.fleet", "agent", "--ring", "canary", "--bucket", str(bucket.url),
               "--endpoint-url", f"http://127.0.0.1:{port}", "--repository", str(repository), "--server", url,
               "--device", "orin-cli", "--interval", "0.2", "--max-backoff", "1", "--gate-requests", "2"]
    agent = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(agent.stderr), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("READY" in line for line in lines), "version 1 READY")
        store.stop()
        wait_for(lambda: any("does not answer" in line for line in lines), "the outage's first line")
        store = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        store.start()
        wait_for(lambda: any("answers again" in line for line in lines), "the recovery")
        wait_for(lambda: outages_counted(bucket, "orin-cli") == 1, "a report counting the outage")
    finally:
        agent.terminate()
        agent.wait(30)
        reader.join(10)
        store.stop()
    told = [line.rstrip("\n") for line in lines if "the bucket" in line]
    print("\n" + "\n".join(told))
    assert len(told) == 2, "one line when it starts, one when it ends (reminders: once a minute by default)"
    assert f"no answer from http://127.0.0.1:{port}" in told[0] and "retrying in" in told[0]
    assert "answers again after" in told[1] and polls_failed(told[1]) >= 1


def test_outages_are_reminded_at_most_once_a_minute_by_default():
    from orinkit.fleet.outage import Outage

    now, lines = [0.0], []
    outage = Outage("the bucket s3://b/p at http://store:9000", lines.append, backoff_to_s=600.0,
                    clock=lambda: now[0])
    for second in range(0, 300, 5):  # a failed poll every 5 s for five minutes
        now[0] = float(second)
        outage.failed("no answer from http://store:9000 for s3://b", 5.0, "serving what is on disk")
    assert len(lines) == 5, "the first line, then one a minute (at 1, 2, 3 and 4 minutes)"
    assert lines[0] == ("the bucket s3://b/p at http://store:9000 does not answer: no answer from http://store:9000 "
                        "for s3://b; serving what is on disk; retrying in 5.0 s, backing off to at most 10 min "
                        "between tries")
    assert lines[1].startswith("the bucket s3://b/p at http://store:9000 still does not answer after 1 min (13 polls "
                               "failed)")
    assert outage.as_report()["ongoing_s"] == 295.0 and outage.count == 0
    now[0] = 301.0
    outage.answered()
    assert lines[-1] == "the bucket s3://b/p at http://store:9000 answers again after 5 min 1 s (60 polls failed)"
    assert outage.as_report() == {"count": 1, "last_s": 301.0, "last_failed_polls": 60, "ongoing_s": None}
    outage.answered()
    assert len(lines) == 6, "nothing more while it answers"


def test_a_server_outage_is_told_counted_and_the_model_loaded_again_after_it(source, bucket, tmp_path):
    from orinkit.server.process import TritonProcess

    repository = tmp_path / "device" / "models"
    repository.mkdir(parents=True)
    server = start_on_free_ports(repository, tmp_path / "server.log", model_control_mode="explicit")
    url = server.command.grpc_url
    lines: list[str] = []
    try:
        push(source, bucket, 1)
        write_desired_state(bucket, "canary", {MODEL: 1})
        agent = make_agent(bucket, (repository, url), progress=lines.append)
        poll_until(agent, ready(1))
        server.stop()
        results = [agent.poll_once() for _ in range(agent.heartbeat_every)]  # a heartbeat report among them
        assert all(r.errors and r.errors[0].startswith("server: ") for r in results)
        during = read_report(bucket, "orin-1")
        assert during.outages["server"]["ongoing_s"] is not None and during.outages["server"]["count"] == 0
        server = TritonProcess(server.command, log=tmp_path / "server.log").start()  # same ports, nothing loaded
        poll_until(agent, ready(1))
        np.testing.assert_array_equal(infer(url), X)
    finally:
        server.stop()
    told = [line for line in lines if f"the server at {url}" in line]
    print("\n" + "\n".join(told))
    assert len(told) == 2 and "does not answer" in told[0] and "neither checked nor changed" in told[0]
    assert "answers again after" in told[1] and polls_failed(told[1]) == agent.heartbeat_every
    after = read_report(bucket, "orin-1").outages["server"]
    assert after["count"] == 1 and after["last_failed_polls"] == agent.heartbeat_every and after["ongoing_s"] is None


# A model.py as Triton's own examples write theirs; version 7's initialize raises from a helper (the config lacks
# the parameter it reads), version 8 loads and its execute raises.
THIRD_PARTY_PY = '''import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.factor = {factor}

    def read_factor(self):
        parameters = self.model_config.get("parameters", {{}})
        if "factor" not in parameters:
            raise ValueError("the config has no parameter 'factor'")
        return float(parameters["factor"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if {fail_execute}:
                raise ValueError("X must be positive")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", (x * self.factor).astype(np.float32))]))
        return responses
'''


def test_a_version_whose_initialize_raises_is_reported_in_one_line_cause_first(source, bucket, device, tmp_path):
    import shutil

    repository, url = device
    release = tmp_path / "release"
    shutil.copytree(source, release)
    for version, spec in {7: dict(factor="self.read_factor()", fail_execute=False),
                          8: dict(factor="8.0", fail_execute=True)}.items():
        (release / MODEL / str(version)).mkdir()
        (release / MODEL / str(version) / "model.py").write_text(THIRD_PARTY_PY.format(**spec))
    push(release, bucket, 1)
    golden = tmp_path / "golden.npz"
    np.savez(golden, **{"input:X": X, "output:Y": X * 8.0})
    push_repository(release, bucket, models=[MODEL], versions=[7, 8], gates={MODEL: GateFile(golden)},
                    unproven=True, progress=lambda line: None)
    write_desired_state(bucket, "canary", {MODEL: 1})
    lines: list[str] = []
    agent = make_agent(bucket, device, progress=lines.append)
    poll_until(agent, ready(1))

    write_desired_state(bucket, "canary", {MODEL: 7})
    loaded = agent.poll_once().models[MODEL]
    print(f"\n{loaded.reason}")
    assert (loaded.state, loaded.version) == ("FAILED", 1)
    assert loaded.reason.startswith("version 7 did not load: ValueError: the config has no parameter 'factor' "
                                    "(raised in read_factor at model.py:"), loaded.reason
    assert "\n" not in loaded.reason and "At:" not in loaded.reason and "fleet-gate" not in loaded.reason
    assert one_line(loaded.reason) == loaded.reason, "a line made once is not made again"
    assert read_report(bucket, "orin-1").models[MODEL].reason == loaded.reason
    assert f"{MODEL}: {loaded.reason}" in lines

    write_desired_state(bucket, "canary", {MODEL: 8})
    answered = agent.poll_once().models[MODEL]
    print(answered.reason)
    assert (answered.state, answered.gate) == ("FAILED", "failed")
    assert answered.reason.startswith("version 8 failed its gate: the golden request failed: ValueError: X must be "
                                      "positive (raised in execute at model.py:"), answered.reason
    assert "\n" not in answered.reason and "At:" not in answered.reason and "fleet-gate" not in answered.reason
    assert all("\n" not in line and "At:" not in line for line in lines)
    np.testing.assert_array_equal(infer(url), X)
