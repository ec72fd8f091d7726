"""Ring rollouts over three local tritonservers, each with its own agent (threads, short intervals): ring by ring
to READY and through a soak; a version that fails its gate stopped at the canary, a slow one stopped by comparison
with the devices still on the old version, the rings put back each time; the CLI's exit codes and status."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from click.testing import CliRunner
from test_fleet_agent import MODEL, X, build_source, infer, push

from orinkit.cli.fleet import main as edge_fleet
from orinkit.fleet.agent import Agent
from orinkit.fleet.errors import RolloutError
from orinkit.fleet.rings import read_desired_state, write_desired_state
from orinkit.fleet.rolling import SoakRule, rollout
from orinkit.fleet.status import read_reports
from orinkit.server.testing import start_on_free_ports

pytest_plugins = ["fleet_fixtures"]
REGION = "us-east-1"  # fleet_fixtures' (imported by pytest as a plugin, not here: its asserts stay rewritten)

RINGS = {"canary": "orin-a", "wave1": "orin-b", "all": "orin-c"}
# Generous against a busy 2-core test machine; the slow version (250 ms a request) is far outside either way.
RULE = SoakRule(p99_ratio=1.5, p99_slack_ms=60.0)
FAST = dict(soak_s=2.0, timeout_s=90.0, poll_s=0.3, rule=RULE, progress=lambda line: None)


def _bucket(endpoint: str, name: str):
    import boto3

    from orinkit.fleet.bucket import Bucket

    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    return Bucket(f"s3://{name}/fleet", client=client)


@pytest.fixture(scope="module")
def fleet(moto_server, tmp_path_factory):
    """Three devices (server + agent thread each), one per ring, all serving version 1."""
    from fleet_fixtures import create_bucket

    root = tmp_path_factory.mktemp("fleet")
    name = create_bucket(moto_server)
    bucket = _bucket(moto_server, name)
    push(build_source(root), bucket, 1, 2, 3, 4, 5)
    for ring in RINGS:
        write_desired_state(bucket, ring, {MODEL: 1}, note="setup")
    stop, servers, threads, urls = threading.Event(), [], [], {}
    try:
        for ring, device in RINGS.items():
            repository = root / device / "models"
            repository.mkdir(parents=True)
            server = start_on_free_ports(repository, root / f"{device}.log", model_control_mode="explicit")
            servers.append(server)
            urls[device] = server.command.grpc_url
            agent = Agent(_bucket(moto_server, name), ring, repository, server.command.grpc_url, device=device,
                          interval_s=0.2, heartbeat_every=5, report_burst=10, gate_requests=5,
                          progress=lambda line: None)
            threads.append(threading.Thread(target=agent.run, args=(stop,), daemon=True))
            threads[-1].start()
        yield bucket, urls, moto_server, name
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        for server in servers:
            server.stop()


def _serving(bucket, version: int, timeout_s: float = 90.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reports, _ = read_reports(bucket)
        states = {d: (r.models[MODEL].state, r.models[MODEL].version) if MODEL in r.models else None
                  for d, r in reports.items()}
        if len(states) == len(RINGS) and all(s == ("READY", version) for s in states.values()):
            return reports
        time.sleep(0.2)
    raise AssertionError(f"the fleet does not serve version {version}: {states}")


@pytest.fixture
def at_version_1(fleet):
    bucket, urls, endpoint, name = fleet
    for ring in RINGS:
        state, _ = read_desired_state(bucket, ring)
        if dict(state.models) != {MODEL: 1}:
            write_desired_state(bucket, ring, {MODEL: 1}, note="test reset")
    _serving(bucket, 1)
    return fleet


def test_a_rollout_moves_one_ring_at_a_time_and_soaks_each(at_version_1):
    bucket, urls, _, _ = at_version_1
    generations = {ring: read_desired_state(bucket, ring)[0].generation for ring in RINGS}
    result = rollout(bucket, MODEL, 2, list(RINGS), name="scale-2", **FAST)
    print(f"\nrollout over 3 rings of one device each: {result.seconds:.1f} s with a 2 s soak per ring")
    assert result.rings == tuple(RINGS) and result.devices == {r: (d,) for r, d in RINGS.items()}
    for ring in RINGS:
        state, _ = read_desired_state(bucket, ring)
        assert (dict(state.models), state.generation) == ({MODEL: 2}, generations[ring] + 1)
        assert state.note == "rollout scale-2: scale version 2"
    assert result.soak["canary"]["reference"] == "compared with 2 device(s) on the old version"
    assert result.soak["all"]["reference"] == "compared with the ring's reports before its move"
    for url in urls.values():
        np.testing.assert_array_equal(infer(url), X * 2)
    reports = _serving(bucket, 2)
    assert all(r.models[MODEL].gate == "passed" for r in reports.values())


def test_a_version_failing_its_gate_stops_at_the_canary_and_the_ring_is_put_back(at_version_1):
    bucket, urls, _, _ = at_version_1
    wave1_before = read_desired_state(bucket, "wave1")[0]
    canary_before = read_desired_state(bucket, "canary")[0]
    with pytest.raises(RolloutError) as info:
        rollout(bucket, MODEL, 4, list(RINGS), name="bad-gate", **FAST)
    message = str(info.value)
    assert "orin-a" in message and "failed its gate" in message and "stopped at ring canary" in message
    canary = read_desired_state(bucket, "canary")[0]
    assert dict(canary.models) == {MODEL: 1} and canary.generation == canary_before.generation + 2
    assert canary.note.startswith("rollback of bad-gate: orin-a")
    assert read_desired_state(bucket, "wave1")[0] == wave1_before, "rings after the failure are never touched"
    assert set(info.value.report) == {"orin-a"}
    np.testing.assert_array_equal(infer(urls["orin-a"]), X)


def test_a_slow_version_fails_its_soak_against_the_devices_on_the_old_version(at_version_1):
    bucket, urls, _, _ = at_version_1
    with pytest.raises(RolloutError) as info:
        rollout(bucket, MODEL, 5, list(RINGS), name="slow", **FAST)
    message = str(info.value)
    assert "orin-a p99 latency" in message and "on the old version" in message, message
    assert dict(read_desired_state(bucket, "canary")[0].models) == {MODEL: 1}
    _serving(bucket, 1)
    np.testing.assert_array_equal(infer(urls["orin-a"]), X)


def test_a_ring_without_devices_is_refused_before_anything_moves(at_version_1):
    bucket, _, _, _ = at_version_1
    before = read_desired_state(bucket, "canary")[0]
    with pytest.raises(RolloutError, match="ring nowhere has no device"):
        rollout(bucket, MODEL, 2, ["canary", "nowhere"], **FAST)
    assert read_desired_state(bucket, "canary")[0] == before


def test_the_cli_rolls_back_with_exit_6_and_shows_the_fleet(at_version_1):
    bucket, _, endpoint, name = at_version_1
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    common = ["--bucket", f"s3://{name}/fleet", "--endpoint-url", endpoint]
    result = CliRunner().invoke(edge_fleet, ["rollout", "bad", "--model", MODEL, "--version", "4", "--rings",
                                             "canary,wave1", "--soak", "1", "--timeout", "90", "--poll", "0.3",
                                             *common], env=env)
    assert result.exit_code == 6, result.output
    assert "orin-a" in result.output and "failed its gate" in result.output
    shown = CliRunner().invoke(edge_fleet, ["status", *common], env=env)
    assert shown.exit_code == 0, shown.output
    for ring, device in RINGS.items():
        assert any(line.startswith(device) and ring in line for line in shown.output.splitlines()), shown.output
    as_json = json.loads(CliRunner().invoke(edge_fleet, ["status", "--json", *common], env=env).output)
    assert {d["device"] for d in as_json["devices"]} == set(RINGS.values())
    assert as_json["rings"]["canary"]["note"].startswith("rollback of bad")


def test_a_version_whose_initialize_raises_is_rolled_back_with_a_one_line_note(at_version_1):
    """The canary's ring named no version of the model before: the put-back says so in words, and the note and
    the log carry the model's exception on one line, not its stack."""
    bucket, urls, _, _ = at_version_1
    write_desired_state(bucket, "canary", {}, note="the canary serves what it has")
    lines = []
    with pytest.raises(RolloutError) as info:
        rollout(bucket, MODEL, 3, ["canary", "wave1"], name="init-raises", **{**FAST, "progress": lines.append})
    canary = read_desired_state(bucket, "canary")[0]
    print("\n" + "\n".join(lines) + f"\nnote: {canary.note}")
    assert dict(canary.models) == {}
    expected = ("rollback of init-raises: orin-a version 3 did not load: RuntimeError: version 3 cannot start: its "
                "weights file is corrupt (raised in initialize at model.py:")
    assert canary.note.startswith(expected), canary.note
    assert "\n" not in canary.note and "At:" not in canary.note
    assert "\n" not in str(info.value) and "RuntimeError: version 3 cannot start" in str(info.value)
    assert any("goes back to no managed version of scale" in line for line in lines), lines
    assert all("None" not in line and "\n" not in line for line in lines), lines
    np.testing.assert_array_equal(infer(urls["orin-a"]), X)
