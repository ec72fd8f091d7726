"""Processes read from /proc: what a process group still runs (tritonserver's stubs, tegrastats' children)."""

from __future__ import annotations

from pathlib import Path


def live_group_members(pgid: int) -> list[int]:
    """PIDs of processes in group ``pgid`` that are still running (zombies excluded), read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members
