"""edge-fleet's commands against moto's S3 server without a tritonserver: status from reports, refusals and exit
codes of rollout, and the agent's --once with the bucket unreachable (the end-to-end runs are in
test_fleet_rollout.py)."""

from __future__ import annotations

import json
import re
import time

import pytest
from click.testing import CliRunner

from orinkit.cli.fleet import main as edge_fleet
from orinkit.fleet.layout import DeviceReport, ModelReport, report_key
from orinkit.fleet.push import push_repository
from orinkit.fleet.rings import write_desired_state
from orinkit.repo.add import add_model
from orinkit.repo.signature import TensorSpec

pytest_plugins = ["fleet_fixtures"]


def _report(bucket, device, ring, generation, version, state="READY", gate="passed", age_s=5.0, reason=""):
    report = DeviceReport(device, ring, generation, {"scale": ModelReport(version, state, gate, reason)},
                          time.time() - age_s, {"scale:p99_ms": 2.5, "requests": 40.0, "failures": 0.0})
    bucket.write(report_key(device), report.to_json())


@pytest.fixture
def pushed(bucket, tmp_path):
    from conftest import DATA

    add_model(tmp_path / "models", DATA / "repository" / "add_sub" / "1" / "model.py", name="scale",
              inputs=[TensorSpec.parse("INPUT0:FP32:4"), TensorSpec.parse("INPUT1:FP32:4")],
              outputs=[TensorSpec.parse("OUTPUT0:FP32:4"), TensorSpec.parse("OUTPUT1:FP32:4")])
    push_repository(tmp_path / "models", bucket, unproven=True, progress=lambda line: None)
    write_desired_state(bucket, "canary", {"scale": 1}, note="first")
    write_desired_state(bucket, "canary", {"scale": 1}, note="again")
    return bucket


def test_status_shows_every_device_its_ring_versions_gate_and_age(pushed):
    _report(pushed, "orin-a", "canary", 2, 1)
    _report(pushed, "orin-b", "canary", 1, 1, state="FAILED", gate="failed", age_s=600,
            reason="version 2 failed its gate: output Y differs")
    result = CliRunner().invoke(edge_fleet, ["status", "--bucket", str(pushed.url)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "ring canary: generation 2 wants scale=1 (again)"
    a = next(line for line in lines if line.startswith("orin-a"))
    b = next(line for line in lines if line.startswith("orin-b"))
    assert "canary" in a and "READY" in a and "passed" in a and "2.5" in a and re.search(r"\s\d+s$", a), a
    assert "1<2" in b and "FAILED" in b and "10m" in b and "output Y differs" in b, "behind its ring: marked"
    data = json.loads(CliRunner().invoke(edge_fleet, ["status", "--bucket", str(pushed.url), "--json"]).output)
    assert [d["device"] for d in data["devices"]] == ["orin-a", "orin-b"]
    assert data["devices"][1]["wanted_generation"] == 2 and data["devices"][1]["age_s"] >= 600
    assert data["devices"][0]["models"]["scale"]["gate"] == "passed"


def test_status_of_an_empty_fleet(bucket):
    result = CliRunner().invoke(edge_fleet, ["status", "--bucket", str(bucket.url)])
    assert result.exit_code == 0 and "no device has reported yet" in result.output


def test_rollout_refuses_a_version_that_was_never_pushed(pushed):
    result = CliRunner().invoke(edge_fleet, ["rollout", "r1", "--model", "scale", "--version", "9", "--rings",
                                             "canary", "--bucket", str(pushed.url)])
    assert result.exit_code == 4 and "no scale version 9" in result.output


def test_rollout_refuses_a_ring_without_devices_and_changes_nothing(pushed):
    from orinkit.fleet.rings import read_desired_state

    _report(pushed, "orin-a", "canary", 2, 1)
    before = read_desired_state(pushed, "canary")[0]
    result = CliRunner().invoke(edge_fleet, ["rollout", "r1", "--model", "scale", "--version", "1", "--rings",
                                             "canary,wave1", "--bucket", str(pushed.url)])
    assert result.exit_code == 6 and "ring wave1 has no device" in result.output
    assert read_desired_state(pushed, "canary")[0] == before


def test_the_agent_once_with_the_bucket_unreachable_says_so_and_exits_6(tmp_path, s3_env):
    repository = tmp_path / "models"
    repository.mkdir()
    result = CliRunner().invoke(edge_fleet, ["agent", "--once", "--ring", "canary", "--bucket", "s3://nowhere/x",
                                             "--endpoint-url", "http://127.0.0.1:9", "--repository", str(repository),
                                             "--device", "orin-z"])
    assert result.exit_code == 6, result.output
    assert "no answer from http://127.0.0.1:9" in result.output and "generation 0" in result.output
    assert not any(repository.iterdir())


def test_the_agent_help_names_its_options():
    result = CliRunner().invoke(edge_fleet, ["agent", "--help"])
    for option in ("--ring", "--bucket", "--endpoint-url", "--repository", "--url", "--device", "--interval",
                   "--once", "--state-dir"):
        assert option in result.output


def test_the_agent_once_with_no_server_names_nothing_none(pushed, tmp_path, s3_env):
    """The ring wants a version the device has never had and its server does not answer: words, not None."""
    repository = tmp_path / "device"
    repository.mkdir()
    result = CliRunner().invoke(edge_fleet, ["agent", "--once", "--ring", "canary", "--bucket", str(pushed.url),
                                             "--repository", str(repository), "--server", "127.0.0.1:9",
                                             "--device", "orin-z"])
    assert result.exit_code == 6, result.output
    assert "scale: PENDING, nothing serving - version 1 not acted on yet" in result.output, result.output
    assert "! server: " in result.output and "127.0.0.1:9" in result.output
    assert "None" not in result.output and "does not answer" not in result.output, "--once shows its errors itself"


def test_status_shows_a_device_serving_nothing_and_its_outages(pushed):
    _report(pushed, "orin-a", "canary", 2, None, state="PENDING", gate=None, reason="version 1 not acted on yet")
    report = DeviceReport("orin-b", "canary", 2, {"scale": ModelReport(1, "READY", "passed")}, time.time(), {},
                          outages={"bucket": {"count": 2, "last_s": 200.0, "last_failed_polls": 12, "ongoing_s": None},
                                   "server": {"count": 0, "last_s": None, "last_failed_polls": 0, "ongoing_s": 75.0}})
    pushed.write(report_key("orin-b"), report.to_json())
    result = CliRunner().invoke(edge_fleet, ["status", "--bucket", str(pushed.url)])
    assert result.exit_code == 0, result.output
    a = next(line for line in result.output.splitlines() if line.startswith("orin-a"))
    assert "None" not in result.output and re.search(r"scale\s+-\s+PENDING\s+-", a), a
    lines = result.output.splitlines()
    assert "orin-b: 2 bucket outages since its agent started, the last 3 min 20 s (12 polls failed)" in lines
    assert "orin-b: its server had not answered for 1 min 15 s when it reported" in lines
    data = json.loads(CliRunner().invoke(edge_fleet, ["status", "--bucket", str(pushed.url), "--json"]).output)
    assert data["devices"][1]["outages"]["bucket"] == {"count": 2, "last_s": 200.0, "last_failed_polls": 12,
                                                       "ongoing_s": None}
