"""The fleet agent's unit (``edge-fleet agent``), installed beside tritonserver's on each device of a fleet.

The agent needs the network (the bucket) and must write the model repository and its own folder beside it; it
needs no GPU, no device node and no JIT, so everything else is the strict sandbox of the device page's unit. It runs
as the server's user: the versions it places are the server's to read. AWS credentials reach it as a systemd
credential (a shared-credentials file, ``LoadCredential``: readable by this service alone) or an ``EnvironmentFile``
that only root may read (systemd reads it before dropping privileges) — never on the command line, where every
local user could read them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from orinkit.fleet.errors import BucketLayoutError
from orinkit.fleet.layout import BucketURL, checked_name
from orinkit.fleet.store import default_state_dir
from orinkit.systemd.errors import UnitOptionError
from orinkit.systemd.render import UnitFile, exec_line
from orinkit.systemd.unit import HELPER_SANDBOX, ServiceOptions, under_home

CREDENTIAL = "aws-credentials"
INSTALL = "/usr/bin/install"


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    """What ``edge-fleet agent`` is started with under systemd."""

    ring: str
    bucket: str  # s3://BUCKET/PREFIX
    repository: Path
    server: str = "localhost:8001"
    endpoint_url: str | None = None
    device: str | None = None  # default: the hostname
    interval_s: float = 60.0
    state_dir: Path | None = None  # default: .<repository>.fleet beside the repository
    credentials_file: Path | None = None  # an AWS shared-credentials file, handed over with LoadCredential
    environment_file: Path | None = None  # AWS_ACCESS_KEY_ID=... lines; must be private (0600)

    def __post_init__(self) -> None:
        try:
            BucketURL.parse(self.bucket)
            checked_name("ring", self.ring)
            if self.device is not None:
                checked_name("device", self.device)
        except BucketLayoutError as exc:
            raise UnitOptionError(exc.message, hint=exc.hint) from None
        if not Path(self.repository).is_absolute():
            raise UnitOptionError(f"the repository {self.repository} is not an absolute path",
                                  hint="a unit has no working folder to resolve it against")
        if self.interval_s < 1:
            raise UnitOptionError(f"a {self.interval_s:g} s interval polls the bucket too often",
                                  hint="use 60 (1,584 requests a day per device)")
        if self.credentials_file and self.environment_file:
            raise UnitOptionError("give the credentials one way", hint="a credentials file or an environment file")
        if self.environment_file is not None and Path(self.environment_file).exists():
            mode = os.stat(self.environment_file).st_mode & 0o777
            if mode & 0o077:
                raise UnitOptionError(f"{self.environment_file} holds secrets and is mode {mode:04o}",
                                      hint=f"chmod 600 {self.environment_file} (owned by root)")

    @property
    def state_folder(self) -> Path:
        return Path(self.state_dir) if self.state_dir else default_state_dir(Path(self.repository))


def agent_service(service: ServiceOptions) -> ServiceOptions:
    """The agent's service: named after tritonserver's, run by the same user (it writes what the server reads)."""
    return ServiceOptions(name=f"{service.name}-fleet-agent", description="orinkit fleet agent (edge-fleet agent)",
                          user=service.user, group=service.group, supplementary_groups=(), python=service.python,
                          hardening=service.hardening, check_plans=False)


def render_agent_unit(agent: AgentOptions, service: ServiceOptions, *,
                      server_unit: str = "tritonserver.service") -> UnitFile:
    """The unit for the agent, after ``server_unit`` and the network (it starts without either and retries)."""
    unit = UnitFile(comments=["Written by orinkit. Rendered again by: orinkit.fleet.agent_unit"])
    unit.extend("Unit", [
        ("Description", service.description),
        ("Wants", f"network-online.target {server_unit}"),
        ("After", f"network-online.target {server_unit}"),
    ])
    state = agent.state_folder
    argv = [service.python, "-m", "orinkit.cli.fleet", "agent", "--ring", agent.ring, "--bucket", agent.bucket,
            "--repository", str(agent.repository), "--url", agent.server, "--interval", f"{agent.interval_s:g}",
            "--state-dir", str(state)]
    if agent.endpoint_url:
        argv += ["--endpoint-url", agent.endpoint_url]
    if agent.device:
        argv += ["--device", agent.device]
    if agent.credentials_file is not None:
        unit.add("Service", "LoadCredential", f"{CREDENTIAL}:{agent.credentials_file}")
        # %d is systemd's credentials folder for this service; boto3 reads the file from there.
        unit.add("Service", "Environment", f"AWS_SHARED_CREDENTIALS_FILE=%d/{CREDENTIAL}")
    if agent.environment_file is not None:
        unit.add("Service", "EnvironmentFile", str(agent.environment_file))
    unit.extend("Service", [
        ("Type", "exec"),
        ("User", service.user),
        ("Group", service.group),
        # The sandbox makes the system read-only: the agent's folder must exist before it starts ("+": as root).
        ("ExecStartPre", exec_line([INSTALL, "-d", "-m", "0700", "-o", service.user, "-g", service.group,
                                    str(state)], prefix="+")),
        ("ExecStart", exec_line(argv)),
        ("Restart", "always"),  # the agent is the device's way back to the fleet
        ("RestartSec", max(service.restart_sec, 10)),
        ("TimeoutStopSec", 30),
    ])
    if service.hardening:
        _harden(unit, agent, state, service)
    unit.add("Install", "WantedBy", "multi-user.target")
    return unit


def _harden(unit: UnitFile, agent: AgentOptions, state: Path, service: ServiceOptions) -> None:
    unit.extend("Service", [
        *HELPER_SANDBOX,
        ("ProtectHome", "read-only" if under_home([service.python, agent.repository, state]) else True),
        # Two bind mounts: staging → repository is a copy then (one filesystem, two mounts), the final step into
        # the model folder stays an atomic rename (orinkit.repo.deploy.place_version).
        ("ReadWritePaths", f"{agent.repository} {state}"),
    ])
