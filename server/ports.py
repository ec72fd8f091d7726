"""Port checks made before starting a server, so a taken port is named instead of lost in the server's log."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def port_is_free(address: str, port: int) -> bool:
    """True when a listening socket could be bound at ``address:port`` right now."""
    with socket.socket(_family(address), socket.SOCK_STREAM) as sock:
        # Servers set SO_REUSEADDR too, so a port held only by TIME_WAIT connections counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_ports(count: int, address: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports the kernel calls free now (another process may still take one before use)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(_family(address), socket.SOCK_STREAM))
            sock.bind((address, 0))
            ports.append(sock.getsockname()[1])
        return ports


@dataclass(frozen=True)
class PortHolder:
    """The process that listens on a port, as /proc shows it."""

    pid: int
    argv: tuple[str, ...]
    ppid: int

    @property
    def is_tritonserver(self) -> bool:
        return bool(self.argv) and Path(self.argv[0]).name == "tritonserver"

    @property
    def orphaned(self) -> bool:
        """Adopted by init: whatever started it is gone (a parent killed without cleaning up)."""
        return self.ppid == 1 and not self.unit

    @property
    def unit(self) -> str | None:
        """The systemd service it runs in (its cgroup's last part), if any."""
        try:
            lines = Path(f"/proc/{self.pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            name = line.rsplit("/", 1)[-1]
            if name.endswith(".service") and not name.startswith("user@"):
                return name
        return None

    def describe(self, width: int = 160) -> str:
        line = " ".join(shlex.join(self.argv).split()) or "?"  # one line, whatever newlines the arguments hold
        return line if len(line) <= width else line[: width - 1] + "…"


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # "sl local_address rem_address st ... uid timeout inode": the port is hex after the colon, 0A is LISTEN.
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_holder(port: int) -> PortHolder | None:
    """The process listening on TCP ``port`` (any address), read from /proc; None where nothing listens there or
    the listener is another user's (its descriptors cannot be read)."""
    sockets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not sockets:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            held = any(os.readlink(fd) in sockets for fd in (entry / "fd").iterdir())
            if not held:
                continue
            argv = tuple(a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a)
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        return PortHolder(pid=int(entry.name), argv=argv, ppid=int(stat[stat.rfind(")") + 2 :].split()[1]))
    return None
