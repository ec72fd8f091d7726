"""Glue between the library's typed errors and click: a command ends with the error's own exit code, and a
SIGINT or SIGTERM unwinds it (temporary folders, child processes, servers) before it exits 130."""

from __future__ import annotations

import sys
from typing import Any

import click

from orinkit.core.errors import EXIT_INTERRUPTED, OrinkitError
from orinkit.core.signals import sigterm_as_interrupt


class CommandError(click.ClickException):
    """An :class:`OrinkitError` shown as one ``Error: …`` line, exiting with that error's code."""

    def __init__(self, error: OrinkitError) -> None:
        super().__init__(str(error))
        self.exit_code = error.exit_code
        self.error = error


class Interrupted(click.ClickException):
    exit_code = EXIT_INTERRUPTED

    def __init__(self) -> None:
        super().__init__("interrupted: stopped, and removed what was half-made")


def _quiet_half_made(unraisable) -> None:
    """After a stop signal only: a tritonclient client whose constructor the signal cut short fails in its
    ``__del__`` at exit (no ``_stream`` yet); that traceback would follow the clean one-line stop as noise."""
    if getattr(unraisable.object, "__module__", "").startswith("tritonclient") and isinstance(
            unraisable.exc_value, AttributeError):
        return
    sys.__unraisablehook__(unraisable)


def _invoke(invoke, ctx: click.Context) -> Any:
    with sigterm_as_interrupt():
        try:
            return invoke(ctx)
        except OrinkitError as exc:
            raise CommandError(exc) from exc
        except KeyboardInterrupt:
            sys.unraisablehook = _quiet_half_made
            raise Interrupted() from None


class OrinkitGroup(click.Group):
    """A click group whose commands turn :class:`OrinkitError` into :class:`CommandError`, and SIGINT/SIGTERM
    into a clean stop with exit code 130."""

    def invoke(self, ctx: click.Context) -> Any:
        return _invoke(super().invoke, ctx)


class OrinkitCommand(click.Command):
    """The same for a single command."""

    def invoke(self, ctx: click.Context) -> Any:
        return _invoke(super().invoke, ctx)


# Triton's gRPC port on this machine: where commands that talk to a running server look unless told otherwise.
LOCAL_SERVER = "localhost:8001"


def url_option(dest: str = "url", *, default: str | None = LOCAL_SERVER,
               help: str = "gRPC address of the server."):
    """The server's address, one name on every command: ``--url``, with ``--server`` as an alias for older lines."""
    return click.option("--url", "--server", dest, default=default, show_default=default is not None, help=help)

