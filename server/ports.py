"""Port checks made before starting a server, so a taken port is named instead of lost in the server's log."""

from __future__ import annotations

import contextlib
import errno
import socket


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
