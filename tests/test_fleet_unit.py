"""The fleet agent's unit: checked by the real systemd-analyze (verify, security), credentials never in argv, the
repository and the agent's folder the only writable paths."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from orinkit.fleet.agent_unit import AgentOptions, agent_service, render_agent_unit
from orinkit.systemd import UnitOptionError
from orinkit.systemd.render import parse_exec_line
from orinkit.systemd.unit import ServiceOptions

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")
BASE = dict(ring="canary", bucket="s3://fleet-bucket/orins", repository=Path("/srv/models"))
WITH_FILE = AgentOptions(**BASE, credentials_file=Path("/etc/orinkit/aws-credentials"),
                         endpoint_url="http://minio.local:9000", device="orin-17")
WITH_ENV = AgentOptions(**BASE, environment_file=Path("/etc/orinkit/fleet.env"))


def _text(agent: AgentOptions, service: ServiceOptions | None = None) -> str:
    return render_agent_unit(agent, agent_service(service or ServiceOptions())).render()


@needs_analyze
@pytest.mark.parametrize("agent", [WITH_FILE, WITH_ENV], ids=["credential", "environment-file"])
def test_the_agent_unit_verifies_and_exposes_at_most_2(tmp_path, agent):
    path = tmp_path / "tritonserver-fleet-agent.service"
    path.write_text(_text(agent))
    verify = subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0 and path.name not in verify.stderr, verify.stderr
    security = subprocess.run([ANALYZE, "security", "--offline=yes", str(path)], capture_output=True, text=True,
                              timeout=60)
    match = re.search(rf"Overall exposure level for {re.escape(path.name)}: ([\d.]+)", security.stdout)
    assert match and float(match[1]) <= 2.0, security.stdout[-800:]
    print(f"\nexposure {match[1]} ({agent.credentials_file and 'LoadCredential' or 'EnvironmentFile'})")


def test_credentials_are_never_arguments_and_only_the_repository_is_written():
    text = _text(WITH_FILE)
    start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = parse_exec_line(start.partition("=")[2])
    assert argv[1:4] == ["-m", "orinkit.cli.fleet", "agent"]
    assert argv[argv.index("--ring") + 1] == "canary" and argv[argv.index("--device") + 1] == "orin-17"
    assert argv[argv.index("--repository") + 1] == "/srv/models"
    assert argv[argv.index("--state-dir") + 1] == "/srv/.models.fleet"
    assert "aws-credentials" not in start and "AWS_" not in start
    assert "LoadCredential=aws-credentials:/etc/orinkit/aws-credentials" in text
    assert "Environment=AWS_SHARED_CREDENTIALS_FILE=%d/aws-credentials" in text
    assert "ReadWritePaths=/srv/models /srv/.models.fleet" in text
    assert "ExecStartPre=+/usr/bin/install -d -m 0700 -o triton -g triton /srv/.models.fleet" in text
    assert "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" in text, "the bucket is on the network"
    assert "PrivateNetwork" not in text and "IPAddressDeny" not in text
    assert "RemoveIPC" not in text, "it would remove the server's shared memory (same user)"
    env_text = _text(WITH_ENV)
    assert "EnvironmentFile=/etc/orinkit/fleet.env" in env_text and "LoadCredential" not in env_text


def test_the_agent_runs_as_the_servers_user():
    text = _text(WITH_ENV, ServiceOptions(user="vision", group="vision"))
    assert "User=vision" in text and "Group=vision" in text and "DynamicUser" not in text
    assert "After=network-online.target tritonserver.service" in text


def test_a_readable_environment_file_is_refused(tmp_path):
    secrets = tmp_path / "fleet.env"
    secrets.write_text("AWS_ACCESS_KEY_ID=x\nAWS_SECRET_ACCESS_KEY=y\n")
    secrets.chmod(0o644)
    with pytest.raises(UnitOptionError, match="mode 0644"):
        AgentOptions(**BASE, environment_file=secrets)
    secrets.chmod(0o600)
    assert AgentOptions(**BASE, environment_file=secrets).environment_file == secrets


@pytest.mark.parametrize("options, text", [
    (dict(bucket="http://x"), "not an s3:// URL"),
    (dict(ring="../etc"), "cannot be a bucket key segment"),
    (dict(repository=Path("models")), "not an absolute path"),
    (dict(interval_s=0.2), "too often"),
    (dict(credentials_file=Path("/a"), environment_file=Path("/b")), "one way"),
])
def test_options_that_cannot_work_are_refused(options, text):
    with pytest.raises(UnitOptionError, match=text):
        AgentOptions(**{**BASE, **options})
