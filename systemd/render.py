"""A systemd unit file as data: sections of ordered key/value pairs, rendered with systemd's own escaping.

Keys repeat (ExecStartPre=, DeviceAllow=, Environment=), so this is not an INI file for configparser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def exec_line(argv: Sequence[str], *, prefix: str = "") -> str:
    """A command line for Exec*=: each argument quoted when needed, ``$`` and ``%`` escaped so systemd passes
    them through literally. ``prefix`` is systemd's special prefix (``+`` privileged, ``-`` failure ignored)."""
    parts = []
    for arg in argv:
        arg = arg.replace("%", "%%").replace("$", "$$")
        if not _PLAIN.match(arg):
            arg = '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(arg)
    return prefix + " ".join(parts)


def parse_exec_line(line: str) -> list[str]:
    """The argv of an Exec*= value as systemd runs it (the inverse of :func:`exec_line`)."""
    import shlex

    line = line.lstrip("+-@!:")
    return [arg.replace("$$", "$").replace("%%", "%") for arg in shlex.split(line)]


def environment_value(name: str, value: str) -> str:
    return '"' + f"{name}={value}".replace("%", "%%").replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class UnitFile:
    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)

    def add(self, section: str, key: str, value: str | int | bool) -> None:
        if isinstance(value, bool):
            value = "yes" if value else "no"
        self.sections.setdefault(section, []).append((key, str(value)))

    def extend(self, section: str, items: Iterable[tuple[str, str | int | bool]]) -> None:
        for key, value in items:
            self.add(section, key, value)

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def render(self) -> str:
        lines = [f"# {c}" for c in self.comments]
        for name, items in self.sections.items():
            if lines:
                lines.append("")
            lines.append(f"[{name}]")
            lines.extend(f"{key}={value}" for key, value in items)
        return "\n".join(lines) + "\n"
