"""Glue between the library's typed errors and click: a command ends with the error's own exit code."""

from __future__ import annotations

from typing import Any

import click

from orinkit.core.errors import OrinkitError


class CommandError(click.ClickException):
    """An :class:`OrinkitError` shown as one ``Error: …`` line, exiting with that error's code."""

    def __init__(self, error: OrinkitError) -> None:
        super().__init__(str(error))
        self.exit_code = error.exit_code
        self.error = error


class OrinkitGroup(click.Group):
    """A click group whose commands turn :class:`OrinkitError` into :class:`CommandError`."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OrinkitError as exc:
            raise CommandError(exc) from exc
