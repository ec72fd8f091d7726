"""Install, stage and remove the unit: files written atomically, systemd told, and nothing done twice.

Live (``root=None``): the unit goes to /etc/systemd/system, its user is created by systemd-sysusers (in the video
group), systemd reloads and enables it. Staged (``root=DIR``, an image tree): the same files under DIR, enabled with
``systemctl --root`` and the user declared in DIR's sysusers.d, for the image's first boot to create.

What an install writes is put back as it was when a later step fails or the command is interrupted. Installing,
removing and controlling the live service need a machine booted with systemd; elsewhere they are refused before
anything is done (:class:`NoSystemdError`, exit 3).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from orinkit.core.files import atomic_write_bytes, atomic_write_text
from orinkit.systemd.errors import NoSystemdError, SystemctlError
from orinkit.systemd.target import Target
from orinkit.systemd.unit import ServiceOptions

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess]
# What sd_booted() looks for: systemd makes it at boot, and only then.
SYSTEMD_RUNTIME = Path("/run/systemd/system")
_NOT_BOOTED = "not been booted with systemd"


def _no_systemd(what: str, *, staging: bool = False) -> NoSystemdError:
    return NoSystemdError(f"{what} needs a machine booted with systemd, and this one was not (no {SYSTEMD_RUNTIME})",
                          hint="run it on the device the service is for; on this machine run the server in the "
                               "foreground with edge-serve run"
                               + (", or stage the unit into an image tree with --root DIR" if staging else ""))


def require_systemd(what: str, *, staging: bool = False) -> None:
    """Refuse ``what`` (one line, exit 3) on a machine not booted with systemd, before anything is done;
    ``staging``: say that staging into an image tree (``root=``) works anywhere."""
    if not SYSTEMD_RUNTIME.is_dir():
        raise _no_systemd(what, staging=staging)


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
    except FileNotFoundError as exc:
        raise SystemctlError(f"{argv[0]} is not installed here", hint="run this on a systemd machine") from exc
    if result.returncode != 0 and _NOT_BOOTED in result.stderr + result.stdout:
        raise _no_systemd(" ".join(argv[:2]))
    if result.returncode != 0:
        said = "; ".join(line.strip() for line in result.stderr.splitlines() if line.strip())  # one line
        raise SystemctlError(f"{' '.join(argv)} failed ({result.returncode}): {said[:400]}",
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


def touched_paths(unit_text: str, options: ServiceOptions, *, root: str | Path | None = None) -> list[Path]:
    """Every file installing ``unit_text`` writes: the unit, its sysusers.d entry, the links enabling makes."""
    base = Target.of(root).base
    wanted_by = [t for line in re.findall(r"^WantedBy=(.*)$", unit_text, re.M) for t in line.split()]
    return [*_paths(options, base),
            *(base / "etc/systemd/system" / f"{target}.wants" / options.unit_name for target in wanted_by)]


def _first_missing(path: Path) -> Path:
    while not path.parent.exists() and path.parent != path:
        path = path.parent
    return path


@contextlib.contextmanager
def undone_on_failure(paths: Iterable[str | os.PathLike[str]]) -> Iterator[None]:
    """On any exception in the block (SIGINT and SIGTERM too), put ``paths`` back as they were: a file or link
    that existed gets its old content back; what did not exist is removed with the folders made for it. A folder
    that existed is left as it is."""
    before: dict[Path, tuple | None] = {}
    for path in map(Path, paths):
        if path.is_symlink():
            before[path] = ("link", os.readlink(path))
        elif path.is_file():
            before[path] = ("file", path.read_bytes(), path.stat().st_mode & 0o7777)
        elif not path.exists():
            before[_first_missing(path)] = None
    try:
        yield
    except BaseException:
        for path, state in before.items():
            _put_back(path, state)
        raise


def _put_back(path: Path, state: tuple | None) -> None:
    if state is None or state[0] == "link":
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink()
        if state is not None:
            os.symlink(state[1], path)
    elif not path.is_file() or path.read_bytes() != state[1]:
        atomic_write_bytes(path, state[1], mode=state[2])


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
    """Write the unit and its sysusers.d entry (only if different), then create the user, reload and enable. If a
    step fails, the files are put back as they were."""
    if root is None and not dry_run:
        require_systemd(f"installing {options.unit_name}", staging=True)
    root = Target.of(root).root  # absolute: systemctl --root and the files agree whatever the working folder
    base = root if root is not None else Path("/")
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
    with undone_on_failure(touched_paths(unit_text, options, root=root)):
        for change, text in zip(changes, (unit_text, sysusers_text(options))):
            if change.action in ("create", "update"):
                atomic_write_text(change.path, text)
        for command in commands:
            run(command)
    return plan


def uninstall(options: ServiceOptions, *, root: str | Path | None = None, dry_run: bool = False,
              run: Runner = run_command) -> Plan:
    """Disable and remove the unit and its sysusers.d entry. Models, and the user, are left alone."""
    if root is None and not dry_run:
        require_systemd(f"removing {options.unit_name}", staging=True)
    root = Target.of(root).root  # absolute: systemctl --root and the files agree whatever the working folder
    base = root if root is not None else Path("/")
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
    if action not in ("start", "stop", "restart", "status", "logs"):
        raise SystemctlError(f"unknown action '{action}'", hint="use start, stop, restart, status or logs")
    # Off systemd, systemctl prints its complaint and journalctl finds no journal; both would look like an answer.
    require_systemd(f"{action} of {options.unit_name}")
    if action == "logs":
        argv = ("journalctl", "--unit", options.unit_name, "--no-pager", "--lines", str(lines))
    elif action == "status":
        # systemctl status exits 3 for a stopped unit: that is an answer, not a failure.
        result = subprocess.run(["systemctl", "status", "--no-pager", options.unit_name], capture_output=True,
                                text=True, timeout=60)
        if _NOT_BOOTED in result.stderr:
            raise _no_systemd(f"status of {options.unit_name}")
        if result.returncode > 4:
            raise SystemctlError(f"systemctl status failed: {result.stderr.strip()[:400]}", hint="is systemd running?")
        return result.stdout or result.stderr
    else:
        argv = ("systemctl", action, options.unit_name)
    return run(argv).stdout
