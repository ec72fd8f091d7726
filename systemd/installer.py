"""Install, stage and remove the unit: files written atomically, systemd told, and nothing done twice.

Live (``root=None``): the unit goes to /etc/systemd/system, its user is created by systemd-sysusers (in the video
group), systemd reloads and enables it. Staged (``root=DIR``, an image tree): the same files under DIR, enabled with
``systemctl --root`` and the user declared in DIR's sysusers.d, for the image's first boot to create.
"""

from __future__ import annotations

import difflib
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from orinkit.core.files import atomic_write_text
from orinkit.systemd.errors import SystemctlError
from orinkit.systemd.unit import ServiceOptions

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    except FileNotFoundError as exc:
        raise SystemctlError(f"{argv[0]} is not installed here", hint="run this on a systemd machine") from exc
    if result.returncode != 0:
        raise SystemctlError(f"{' '.join(argv)} failed ({result.returncode}): {result.stderr.strip()[:400]}",
                             hint="run it by hand to see the whole message; installing needs root")
    return result


@dataclass(frozen=True)
class Change:
    path: Path
    action: str  # create | update | unchanged | remove | absent
    diff: str = ""


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...]
    commands: tuple[tuple[str, ...], ...]

    def describe(self) -> str:
        lines = [f"{c.action:9} {c.path}" for c in self.changes]
        lines += [c.diff for c in self.changes if c.diff]
        lines += ["run       " + " ".join(cmd) for cmd in self.commands]
        return "\n".join(lines)

    @property
    def changed(self) -> bool:
        return any(c.action not in ("unchanged", "absent") for c in self.changes)


def sysusers_text(options: ServiceOptions) -> str:
    """systemd-sysusers config: the service's user and group, and its membership of the GPU's groups."""
    lines = ["# Written by orinkit: the user tritonserver runs as.",
             f'u {options.user} - "{options.description}" /var/lib/{options.name} /usr/sbin/nologin']
    if options.group != options.user:
        lines.insert(1, f"g {options.group} -")
        lines.append(f"m {options.user} {options.group}")
    lines += [f"m {options.user} {group}" for group in options.supplementary_groups]
    return "\n".join(lines) + "\n"


def _paths(options: ServiceOptions, root: Path) -> tuple[Path, Path]:
    return (root / "etc/systemd/system" / options.unit_name,
            root / "etc/sysusers.d" / f"orinkit-{options.name}.conf")


def _change(path: Path, text: str | None) -> Change:
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if text is None:
        return Change(path, "remove" if old is not None else "absent")
    if old == text:
        return Change(path, "unchanged")
    diff = "".join(difflib.unified_diff((old or "").splitlines(True), text.splitlines(True),
                                        str(path) if old is not None else "/dev/null", str(path)))
    return Change(path, "update" if old is not None else "create", diff)


def install(unit_text: str, options: ServiceOptions, *, root: str | Path | None = None, dry_run: bool = False,
            run: Runner = run_command) -> Plan:
    """Write the unit and its sysusers.d entry (only if different), then create the user, reload and enable."""
    base = Path(root) if root is not None else Path("/")
    unit_path, users_path = _paths(options, base)
    changes = (_change(unit_path, unit_text), _change(users_path, sysusers_text(options)))
    if root is not None:
        commands = [("systemctl", f"--root={base}", "enable", options.unit_name)]
    else:
        commands = [("systemd-sysusers", str(users_path)), ("systemctl", "daemon-reload"),
                    ("systemctl", "enable", options.unit_name)]
    plan = Plan(changes, tuple(commands))
    if dry_run:
        return plan
    for change, text in zip(changes, (unit_text, sysusers_text(options))):
        if change.action in ("create", "update"):
            atomic_write_text(change.path, text)
    for command in commands:
        run(command)
    return plan


def uninstall(options: ServiceOptions, *, root: str | Path | None = None, dry_run: bool = False,
              run: Runner = run_command) -> Plan:
    """Disable and remove the unit and its sysusers.d entry. Models, and the user, are left alone."""
    base = Path(root) if root is not None else Path("/")
    unit_path, users_path = _paths(options, base)
    changes = (_change(unit_path, None), _change(users_path, None))
    if root is not None:
        commands = [("systemctl", f"--root={base}", "disable", options.unit_name)]
    else:
        commands = [("systemctl", "disable", "--now", options.unit_name), ("systemctl", "daemon-reload")]
    if changes[0].action == "absent":
        commands = []
    plan = Plan(changes, tuple(commands))
    if dry_run:
        return plan
    if commands:
        run(commands[0])
    for change in changes:
        if change.action == "remove":
            change.path.unlink()
    for command in commands[1:]:
        run(command)
    return plan


def control(action: str, options: ServiceOptions, *, run: Runner = run_command, lines: int = 100) -> str:
    """start | stop | restart | status | logs on the live system."""
    if action == "logs":
        argv = ("journalctl", "--unit", options.unit_name, "--no-pager", "--lines", str(lines))
    elif action == "status":
        # systemctl status exits 3 for a stopped unit: that is an answer, not a failure.
        result = subprocess.run(["systemctl", "status", "--no-pager", options.unit_name], capture_output=True,
                                text=True, timeout=60)
        if result.returncode > 4:
            raise SystemctlError(f"systemctl status failed: {result.stderr.strip()[:400]}", hint="is systemd running?")
        return result.stdout or result.stderr
    elif action in ("start", "stop", "restart"):
        argv = ("systemctl", action, options.unit_name)
    else:
        raise SystemctlError(f"unknown action '{action}'", hint="use start, stop, restart, status or logs")
    return run(argv).stdout
