"""Find, start and stop NVIDIA Triton Inference Server: the bundled local one here, the release tarball on an Orin.

>>> from orinkit.server import ServerOptions, TritonProcess, build_command, locate_tritonserver
>>> command = build_command(locate_tritonserver(), ServerOptions(repository="models"))
>>> with TritonProcess(command) as server:  # doctest: +SKIP
...     ...  # talk to command.grpc_url
"""

from orinkit.core.processes import live_group_members
from orinkit.server.backends import backend_directory
from orinkit.server.command import ServerCommand, ServerOptions, build_command
from orinkit.server.errors import (
    InvalidServerOptionError,
    PortInUseError,
    PythonStubNotFoundError,
    RepositoryNotFoundError,
    ServerError,
    ServerExitedError,
    ServerStartError,
    TritonNotFoundError,
)
from orinkit.server.local import start_on_free_ports
from orinkit.server.locate import Layout, TritonInstall, locate_tritonserver
from orinkit.server.process import TritonProcess

__all__ = [
    "Layout",
    "TritonInstall",
    "locate_tritonserver",
    "backend_directory",
    "ServerOptions",
    "ServerCommand",
    "build_command",
    "TritonProcess",
    "live_group_members",
    "start_on_free_ports",
    "ServerError",
    "TritonNotFoundError",
    "PythonStubNotFoundError",
    "InvalidServerOptionError",
    "RepositoryNotFoundError",
    "PortInUseError",
    "ServerStartError",
    "ServerExitedError",
]
