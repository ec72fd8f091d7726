"""Errors of ``orinkit.systemd``.

::

    SystemdError
    ├── UnitOptionError     an option the unit cannot be rendered with (exit 4)
    ├── SystemctlError      systemctl, journalctl or systemd-sysusers failed (exit 6)
    └── NoSystemdError      this machine was not booted with systemd: nothing to install into or control (exit 3)
"""

from __future__ import annotations

from orinkit.core.errors import EXIT_BAD_INPUT, EXIT_MISSING, EXIT_SERVER, OrinkitError


class SystemdError(OrinkitError):
    exit_code = EXIT_SERVER


class UnitOptionError(SystemdError):
    exit_code = EXIT_BAD_INPUT


class SystemctlError(SystemdError):
    pass


class NoSystemdError(SystemdError):
    exit_code = EXIT_MISSING
