"""``edge-serve``: run tritonserver in the foreground, or print the command line orinkit would run."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import click

from orinkit.core.cli import OrinkitGroup
from orinkit.server.command import CONTROL_MODES, ServerOptions, build_command
from orinkit.server.health import server_metadata
from orinkit.server.locate import HOME_ENV, locate_tritonserver
from orinkit.server.process import TritonProcess


class _Interrupted(Exception):
    """Raised from the SIGINT/SIGTERM handler so that every path out of ``run`` stops the server."""


def _server_options(func):
    decorators = [
        click.option("--repository", "-r", required=True, type=click.Path(path_type=Path),
                     help="Model repository folder (one subfolder per model)."),
        click.option("--triton-home", type=click.Path(path_type=Path), default=None,
                     help=f"Triton release folder (bin/, lib/, backends/); default ${HOME_ENV}, "
                          "/opt/tritonserver, then the server bundled in nvidia-pytriton."),
        click.option("--address", default="127.0.0.1", show_default=True,
                     help="Address the HTTP, gRPC and metrics endpoints bind to (0.0.0.0 for every interface)."),
        click.option("--http-port", type=int, default=8000, show_default=True),
        click.option("--grpc-port", type=int, default=8001, show_default=True),
        click.option("--metrics-port", type=int, default=8002, show_default=True),
        click.option("--model-control-mode", type=click.Choice(CONTROL_MODES), default="none", show_default=True),
        click.option("--load-model", "load_models", multiple=True,
                     help="Model to load at start (repeatable; needs --model-control-mode explicit)."),
        click.option("--exit-timeout", "exit_timeout_s", type=int, default=30, show_default=True,
                     help="Seconds the server may take to finish in-flight requests when stopped."),
        click.option("--log-verbose", type=int, default=0, show_default=True),
    ]
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def _command(triton_home, **options):
    install = locate_tritonserver(triton_home)
    return build_command(install, ServerOptions(**options))


@click.group(cls=OrinkitGroup)
def main() -> None:
    """Run NVIDIA Triton Inference Server for a model repository."""


@main.command()
@_server_options
def command(triton_home, **options) -> None:
    """Print the server found and the exact command line and environment orinkit runs it with."""
    cmd = _command(triton_home, **options)
    click.echo(f"# tritonserver: {cmd.install.describe()}")
    for name, folders in cmd.prepend_env.items():
        click.echo(f"{name}={':'.join(folders)}${{{name}:+:${name}}} \\")
    click.echo(cmd.shell_line())


@main.command()
@_server_options
@click.option("--ready-timeout", type=float, default=300.0, show_default=True,
              help="Seconds to wait for every model to load before giving up.")
@click.option("--log-file", type=click.Path(path_type=Path), default=None,
              help="Write the server's log here instead of to standard error.")
def run(triton_home, ready_timeout, log_file, **options) -> None:
    """Start tritonserver in the foreground; Ctrl-C or SIGTERM stops it and everything it started."""
    cmd = _command(triton_home, **options)
    cmd.options.check_repository()

    def interrupt(signum, frame):
        raise _Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    process = TritonProcess(cmd, log=log_file or sys.stderr)
    try:
        process.start(ready_timeout_s=ready_timeout)
        version = server_metadata(cmd.http_url).get("version", "?")
        click.echo(f"tritonserver {version} ready (pid {process.pid}; {cmd.install.describe()})")
        click.echo(f"  gRPC     {cmd.grpc_url}")
        click.echo(f"  HTTP     {cmd.http_url}")
        click.echo(f"  metrics  {cmd.metrics_url}")
        click.echo(f"  models   {cmd.options.repository}")
        click.echo("Ctrl-C or SIGTERM stops it.")
        while process.wait(timeout_s=0.5) is None:
            pass
        process.raise_if_exited()
    except _Interrupted as exc:
        click.echo(f"{exc}: stopping tritonserver", err=True)
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        process.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("tritonserver stopped", err=True)
