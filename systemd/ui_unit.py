"""The device page's unit (``edge-serve ui``), installed beside tritonserver's with ``edge-serve install --ui``.

The page server needs far less than tritonserver: no GPU, no JIT, no device nodes. So its sandbox is the strict
one (PrivateDevices, MemoryDenyWriteExecute, a read-only system); only with ``allow_control`` may it write the
model repository, for the load/unload/rollback rules of ``edge-repo``. A token for a non-loopback address is
handed over as a systemd credential, never on the command line, where every local user could read it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from orinkit.systemd.errors import UnitOptionError
from orinkit.systemd.render import UnitFile, exec_line
from orinkit.systemd.unit import HELPER_SANDBOX, ServiceOptions, under_home

TOKEN_CREDENTIAL = "token"


@dataclass(frozen=True, kw_only=True)
class UiOptions:
    """What ``edge-serve ui`` is started with under systemd."""

    grpc_url: str = "localhost:8001"
    http_url: str = "http://localhost:8000"  # the models panel reads Triton's HTTP API (no gRPC client, no numpy)
    host: str = "127.0.0.1"
    port: int = 8080
    repository: Path | None = None  # labels files, and the folder control acts on
    allow_control: bool = False
    token_file: Path | None = None  # read by systemd (LoadCredential); required off loopback

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise UnitOptionError(f"port {self.port} is not a TCP port", hint="use 1 to 65535, e.g. 8080")
        if not _loopback(self.host) and self.token_file is None:
            raise UnitOptionError(f"the page on {self.host} would be open to the network without a token",
                                  hint="give --ui-token-file, or keep --ui-host 127.0.0.1 and use an SSH tunnel")
        if self.allow_control and self.repository is None:
            raise UnitOptionError("control needs the model repository", hint="give the repository to install")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ui_service(service: ServiceOptions) -> ServiceOptions:
    """The page's service: named after tritonserver's, run by the same user (it reads the same repository)."""
    return ServiceOptions(name=f"{service.name}-ui", description="orinkit device page (edge-serve ui)",
                          user=service.user, group=service.group, supplementary_groups=(), python=service.python,
                          hardening=service.hardening, check_plans=False)


def render_ui_unit(ui: UiOptions, service: ServiceOptions, *, server_unit: str = "tritonserver.service") -> UnitFile:
    """The unit for the page, after ``server_unit`` (it shows that server; it starts without it and says so)."""
    unit = UnitFile(comments=["Written by orinkit. Rendered again by: edge-serve install --ui"])
    unit.extend("Unit", [
        ("Description", service.description),
        ("Wants", server_unit),
        ("After", f"network-online.target {server_unit}"),
    ])
    argv = [service.python, "-m", "orinkit.cli.serve", "ui", "--url", ui.grpc_url, "--http-url", ui.http_url,
            "--host", ui.host, "--port", str(ui.port)]
    if ui.repository is not None:
        argv += ["--repository", str(ui.repository)]
    if ui.allow_control:
        argv.append("--allow-control")
    start = exec_line(argv)
    if ui.token_file is not None:
        # %d is systemd's credentials folder: the token is readable by this service alone, and never in argv.
        start += f" --token-file %d/{TOKEN_CREDENTIAL}"
        unit.add("Service", "LoadCredential", f"{TOKEN_CREDENTIAL}:{ui.token_file}")
    unit.extend("Service", [
        ("Type", "exec"),
        ("User", service.user),
        ("Group", service.group),
        ("ExecStart", start),
        ("Restart", "on-failure"),
        ("RestartSec", service.restart_sec),
        ("TimeoutStopSec", 10),
    ])
    if service.hardening:
        _harden(unit, ui, service)
    unit.add("Install", "WantedBy", "multi-user.target")
    return unit


def _harden(unit: UnitFile, ui: UiOptions, service: ServiceOptions) -> None:
    paths = [service.python, *([ui.repository] if ui.repository else [])]
    unit.extend("Service", [*HELPER_SANDBOX, ("ProtectHome", "read-only" if under_home(paths) else True)])
    if ui.allow_control and ui.repository is not None:
        unit.add("Service", "ReadWritePaths", str(ui.repository))
