"""A tritonserver on ports nobody uses, for demos, examples, benchmarks and tests on one machine."""

from __future__ import annotations

import os
from pathlib import Path

from orinkit.server.command import ServerOptions, build_command
from orinkit.server.errors import PortInUseError
from orinkit.server.locate import locate_tritonserver
from orinkit.server.ports import free_ports
from orinkit.server.process import TritonProcess


def start_on_free_ports(repository: Path, log_path: Path, *, attempts: int = 3, **options) -> TritonProcess:
    """Start a server for ``repository`` on ports nobody uses, retrying if another process takes one first."""
    install = locate_tritonserver()
    for attempt in range(1, attempts + 1):
        http, grpc, metrics = free_ports(3)
        command = build_command(
            install,
            ServerOptions(repository=repository, http_port=http, grpc_port=grpc, metrics_port=metrics, **options),
        )
        process = TritonProcess(command, log=log_path)
        try:
            return process.start(ready_timeout_s=float(os.environ.get("ORINKIT_TEST_READY_TIMEOUT", "180")))
        except PortInUseError:
            if attempt == attempts:
                raise
