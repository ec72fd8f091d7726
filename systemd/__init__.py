"""tritonserver as a hardened systemd service on the Orin, rendered from the same command line as edge-serve.

>>> from orinkit.server import ServerOptions, build_command, locate_tritonserver
>>> from orinkit.systemd import ServiceOptions, render_unit, install
>>> unit = render_unit(build_command(locate_tritonserver(), ServerOptions(repository="/srv/models")),
...                    ServiceOptions(user="triton"))  # doctest: +SKIP
>>> install(unit.render(), ServiceOptions(user="triton"), dry_run=True)  # doctest: +SKIP
"""

from orinkit.systemd.errors import NoSystemdError, SystemctlError, SystemdError, UnitOptionError
from orinkit.systemd.installer import Change, Plan, control, install, sysusers_text, uninstall
from orinkit.systemd.render import UnitFile
from orinkit.systemd.ui_unit import UiOptions, render_ui_unit, ui_service
from orinkit.systemd.unit import ServiceOptions, render_unit

__all__ = [
    "Change",
    "NoSystemdError",
    "Plan",
    "ServiceOptions",
    "SystemctlError",
    "SystemdError",
    "UnitFile",
    "UiOptions",
    "UnitOptionError",
    "control",
    "install",
    "render_ui_unit",
    "render_unit",
    "sysusers_text",
    "ui_service",
    "uninstall",
]
