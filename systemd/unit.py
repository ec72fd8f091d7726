"""The tritonserver unit for an Orin, rendered from options and from orinkit.server's command line.

ExecStart is exactly :func:`orinkit.server.build_command`'s argv, the same one ``edge-serve run`` starts.
Hardening is on by default, limited to what keeps the GPU (the Jetson's /dev/nvmap, /dev/nvhost-*, /dev/nvgpu/*
nodes, the video group) and the Python backend (JIT code, /dev/shm, the stubs in the unit's cgroup) working.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

from orinkit.server.command import ServerCommand
from orinkit.systemd.errors import UnitOptionError
from orinkit.systemd.render import UnitFile, environment_value, exec_line

MIB = 1 << 20
# Settings that break the GPU or the Python backend on a Jetson; they must never appear.
FORBIDDEN = {
    "PrivateDevices": "hides /dev/nvmap and /dev/nvhost-*: CUDA cannot open the GPU",
    "MemoryDenyWriteExecute": "forbids the JIT code of the Python backend and of CUDA",
    "DynamicUser": "a transient user is not in the video group that owns /dev/nvmap",
    "PrivateUsers": "maps the video group away: the GPU nodes become unreachable",
    "InaccessiblePaths": "hiding /dev/shm stops the Python backend's stubs",
}
# The integrated GPU's device nodes on JetPack 5 (nvhost-*) and 6/7 (nvgpu/igpu0/*), and the DLAs.
JETSON_DEVICES = (
    "/dev/nvmap", "/dev/nvhost-ctrl", "/dev/nvhost-ctrl-gpu", "/dev/nvhost-gpu", "/dev/nvhost-as-gpu",
    "/dev/nvhost-prof-gpu", "/dev/nvhost-dbg-gpu", "/dev/nvhost-tsg-gpu", "/dev/nvhost-sched-gpu",
    "/dev/nvhost-nvsched-gpu", "/dev/nvhost-ctxsw-gpu", "/dev/nvhost-prof-dev-gpu", "/dev/nvhost-prof-ctx-gpu",
    "/dev/nvhost-power-gpu", "/dev/nvhost-ctrl-nvdla0", "/dev/nvhost-ctrl-nvdla1", "/dev/nvhost-nvdla0",
    "/dev/nvhost-nvdla1", "/dev/nvgpu/igpu0/ctrl", "/dev/nvgpu/igpu0/as", "/dev/nvgpu/igpu0/channel",
    "/dev/nvgpu/igpu0/tsg", "/dev/nvgpu/igpu0/dbg", "/dev/nvgpu/igpu0/prof", "/dev/nvgpu/igpu0/prof-ctx",
    "/dev/nvgpu/igpu0/prof-dev", "/dev/nvgpu/igpu0/sched", "/dev/nvgpu/igpu0/nvsched", "/dev/nvgpu/igpu0/power",
    "/dev/nvgpu/igpu0/ctxsw", "/dev/nvgpu/igpu0/nvsched-ctrl-fifo",
)
_NAME = re.compile(r"^[A-Za-z0-9_.@-]+$")
# PrivateTmp=yes gives the service empty folders of its own at these places.
PRIVATE_TMP = ("/tmp", "/var/tmp")


@dataclass(frozen=True, kw_only=True)
class ServiceOptions:
    """How the unit runs tritonserver; every default is what an Orin in the field wants."""

    name: str = "tritonserver"
    description: str = "NVIDIA Triton Inference Server (orinkit)"
    user: str = "triton"
    group: str = "triton"
    supplementary_groups: tuple[str, ...] = ("video",)
    start_timeout_s: int = 600  # deserialising engines and ORT-TRT builds take minutes
    restart_sec: int = 5
    start_limit_burst: int = 5
    start_limit_interval_s: int = 600
    pin_clocks: bool = False  # ExecStartPre=+nvpmodel -m <mode> and +jetson_clocks
    nvpmodel_mode: int = 0
    nvpmodel: str = "/usr/sbin/nvpmodel"
    jetson_clocks: str = "/usr/bin/jetson_clocks"
    check_plans: bool = True  # ExecStartPre that refuses stale TensorRT plans (the edge-convert guard)
    hardening: bool = True
    python: str = field(default_factory=lambda: sys.executable)  # the venv that holds orinkit
    extra_environment: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("user", self.user), ("group", self.group)):
            if not _NAME.match(value):
                raise UnitOptionError(f"{what} '{value}' cannot be used in a unit", hint="use letters, digits, _ . -")
        if self.start_timeout_s < 1 or self.restart_sec < 0 or self.start_limit_burst < 1:
            raise UnitOptionError("timeouts and limits must be positive", hint="check the numbers given")

    @property
    def unit_name(self) -> str:
        return f"{self.name}.service"


# The sandbox of a helper service that needs no GPU (the device page, the fleet agent): no device nodes, no W+X
# memory, nothing privileged. Never RemoveIPC: helpers run as the server's user, and systemd would remove that
# user's IPC objects (the running server's Python-backend shared memory) when a helper stops.
HELPER_SANDBOX = (
    ("NoNewPrivileges", True),
    ("ProtectSystem", "strict"),
    ("PrivateTmp", True),
    ("PrivateDevices", True),
    ("DevicePolicy", "closed"),
    ("ProtectKernelTunables", True),
    ("ProtectKernelModules", True),
    ("ProtectKernelLogs", True),
    ("ProtectControlGroups", True),
    ("ProtectClock", True),
    ("ProtectHostname", True),
    ("ProtectProc", "invisible"),
    ("ProcSubset", "all"),  # /proc/stat and /proc/meminfo: the board monitor, the agent's free-memory check
    ("RestrictSUIDSGID", True),
    ("RestrictRealtime", True),
    ("RestrictNamespaces", True),
    ("LockPersonality", True),
    ("MemoryDenyWriteExecute", True),
    ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
    ("CapabilityBoundingSet", ""),
    ("AmbientCapabilities", ""),
    ("SystemCallArchitectures", "native"),
    ("SystemCallFilter", "@system-service"),
    ("SystemCallFilter", "~@privileged @resources @obsolete"),
    ("UMask", "0077"),
)


def under_home(paths) -> bool:
    return any(str(p).startswith(("/home/", "/root/", "/run/user/")) for p in paths)


def render_unit(command: ServerCommand, options: ServiceOptions) -> UnitFile:
    """The unit for ``command`` (built by orinkit.server.build_command) with ``options``."""
    _check_paths(command, options)
    server = command.options
    unit = UnitFile(comments=[f"Written by orinkit for {server.repository}. Rendered again by: edge-serve install"])
    unit.extend("Unit", [
        ("Description", options.description),
        ("Documentation", "https://github.com/triton-inference-server/server"),
        ("Wants", "network-online.target"),
        ("After", "network-online.target" + (" nvpmodel.service" if options.pin_clocks else "")),
        ("StartLimitIntervalSec", options.start_limit_interval_s),
        ("StartLimitBurst", options.start_limit_burst),
    ])
    service = "Service"
    unit.extend(service, [
        ("Type", "exec"),
        ("User", options.user),
        ("Group", options.group),
        ("SupplementaryGroups", " ".join(options.supplementary_groups)),
        ("StateDirectory", options.name),
        ("CacheDirectory", options.name),
        ("WorkingDirectory", f"/var/lib/{options.name}"),
    ])
    environment = {name: ":".join(folders) for name, folders in command.prepend_env.items()}
    environment["PATH"] = ":".join(filter(None, [environment.get("PATH"), "/usr/local/bin:/usr/bin:/bin"]))
    environment["CUDA_CACHE_PATH"] = f"/var/cache/{options.name}/cuda"
    environment["HOME"] = f"/var/lib/{options.name}"
    environment.update(dict(options.extra_environment))
    for name, value in environment.items():
        unit.add(service, "Environment", environment_value(name, value))
    if options.pin_clocks:
        unit.add(service, "ExecStartPre", exec_line([options.nvpmodel, "-m", str(options.nvpmodel_mode)], prefix="+"))
        unit.add(service, "ExecStartPre", exec_line([options.jetson_clocks], prefix="+"))
    orinkit = [options.python, "-m", "orinkit.cli.serve"]
    # Versions a server never loaded are set aside first, so an interrupted deploy cannot fail the start; "+" runs
    # it with the rights of whoever deploys (the repository is theirs; the sandbox keeps it read-only otherwise).
    unit.add(service, "ExecStartPre", exec_line([*orinkit, "prepare", "--repository", str(server.repository),
                                                 "--owner", options.user], prefix="+"))
    if options.check_plans:
        unit.add(service, "ExecStartPre", exec_line([*orinkit, "check-plans", "--repository", str(server.repository)]))
    unit.add(service, "ExecStart", exec_line(command.argv))
    unit.add(service, "ExecStartPost", exec_line([*orinkit, "wait-ready", "--url", command.http_url, "--timeout",
                                                  str(options.start_timeout_s), "--repository",
                                                  str(server.repository), "--owner", options.user], prefix="+"))
    unit.extend(service, [
        ("TimeoutStartSec", options.start_timeout_s),
        # Triton finishes in-flight requests for --exit-timeout-secs after SIGTERM; systemd must wait longer.
        ("TimeoutStopSec", server.exit_timeout_s + 15),
        ("KillMode", "control-group"),  # KillMode=process would orphan the Python backend's stubs
        ("KillSignal", "SIGTERM"),
        ("Restart", "on-failure"),
        ("RestartSec", options.restart_sec),
        ("LimitMEMLOCK", "infinity"),
        ("LimitSTACK", 67108864),
    ])
    if options.hardening:
        _harden(unit, command, options)
    unit.add("Install", "WantedBy", "multi-user.target")
    for key in FORBIDDEN:
        assert not unit.values(service, key), f"{key} must never be set"
    return unit


def _check_paths(command: ServerCommand, options: ServiceOptions) -> None:
    """Every path the unit names is absolute (it runs in /var/lib/<name>, not where it was rendered), and none is
    where the sandbox's PrivateTmp would hide it."""
    server = command.options
    paths = {"the tritonserver folder": command.install.home, "the backend folder": command.backend_directory,
             "the Python that runs orinkit": options.python}
    if not server.remote:
        paths["the model repository"] = server.repository
    for name in ("grpc_tls_cert", "grpc_tls_key", "grpc_tls_root_cert"):
        if getattr(server, name) is not None:
            paths[f"--{name.replace('_', '-')}"] = getattr(server, name)
    for what, path in paths.items():
        text = str(path)
        if not text.startswith("/"):
            raise UnitOptionError(f"{what} '{text}' is relative; the unit needs absolute paths",
                                  hint="give it as an absolute path (and --root as well)")
        hidden = next((tmp for tmp in PRIVATE_TMP if text == tmp or text.startswith(tmp + "/")), None)
        if hidden is not None and options.hardening:
            # Refused rather than PrivateTmp quietly dropped: /tmp is emptied at boot, so a service kept there
            # would fail after the next reboot anyway.
            emptied = " (and /tmp is emptied at boot)" if hidden == "/tmp" else ""
            raise UnitOptionError(f"{what} {text} is under {hidden}, which the unit's PrivateTmp=yes replaces with "
                                  f"an empty folder of its own{emptied}",
                                  hint=f"move it out of {hidden} (e.g. to /opt), or install with --no-hardening")


def _harden(unit: UnitFile, command: ServerCommand, options: ServiceOptions) -> None:
    tls = [command.options.grpc_tls_cert, command.options.grpc_tls_key, command.options.grpc_tls_root_cert]
    paths = [command.options.repository, command.install.home, options.python, command.backend_directory,
             *filter(None, tls)]
    unit.extend("Service", [
        ("NoNewPrivileges", True),
        ("ProtectSystem", "strict"),
        # The repository, the server and the venv may live in a home folder; read-only keeps them reachable.
        ("ProtectHome", "read-only" if under_home(paths) else True),
        ("PrivateTmp", True),
        ("ProtectKernelTunables", True),
        ("ProtectKernelModules", True),
        ("ProtectKernelLogs", True),
        ("ProtectControlGroups", True),
        ("ProtectClock", True),
        ("ProtectHostname", True),
        ("ProtectProc", "invisible"),
        ("RestrictSUIDSGID", True),
        ("RestrictRealtime", True),
        ("RestrictNamespaces", True),
        ("LockPersonality", True),
        ("RemoveIPC", True),
        ("RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6 AF_NETLINK"),
        ("CapabilityBoundingSet", ""),
        ("AmbientCapabilities", ""),
        ("SystemCallArchitectures", "native"),
        ("SystemCallFilter", "@system-service"),
        ("SystemCallFilter", "~@privileged @obsolete"),
        # What the server writes is no other user's business. (The Python backend's shared-memory regions ignore
        # the umask; ExecStartPost makes them 0600.)
        ("UMask", "0077"),
        ("DevicePolicy", "closed"),
    ])
    for device in JETSON_DEVICES:
        unit.add("Service", "DeviceAllow", f"{device} rw")
