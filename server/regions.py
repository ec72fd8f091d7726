"""The Python backend's shared-memory regions (``/dev/shm/triton_python_backend_shm_region_*``) that killed
servers leave behind: several MB each, for good, until something removes them.

A region is stale when no running process maps it. Only this user's regions are touched (another user's cannot be
removed, and belong to a server that user runs), and only regions older than a few seconds, so that a server
starting at this moment never loses the one it just made.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "triton_python_backend_shm_region_"
SHM = Path("/dev/shm")
MIN_AGE_S = 10.0


def _mapped(shm: Path) -> set[str]:
    """Names of the regions under ``shm`` that some process maps (from every readable /proc/PID/maps)."""
    names: set[str] = set()
    marker = f"{shm}/{PREFIX}"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            with open(entry / "maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    at = line.find(marker)
                    if at >= 0:
                        names.add(line[at + len(str(shm)) + 1:].split()[0])
        except OSError:
            continue  # a process that ended, or another user's: not ours to judge
    return names


@dataclass(frozen=True)
class Removed:
    paths: tuple[Path, ...]
    bytes: int

    def describe(self) -> str:
        return (f"removed {len(self.paths)} shared-memory region(s) of Python-backend stubs that no running process "
                f"uses ({self.bytes / 2**20:.1f} MiB), left by servers that were killed")


def stale_regions(shm: Path = SHM, *, min_age_s: float = MIN_AGE_S, owner: int | None = None) -> list[Path]:
    """Regions of user ``owner`` (default: this process's) that no process maps."""
    owner = os.getuid() if owner is None else owner
    if not shm.is_dir():
        return []
    mapped = _mapped(shm)
    now = time.time()
    stale = []
    for path in shm.glob(f"{PREFIX}*"):
        try:
            info = path.stat()
        except FileNotFoundError:
            continue
        if info.st_uid == owner and path.name not in mapped and now - info.st_mtime >= min_age_s:
            stale.append(path)
    return sorted(stale)


def remove_stale_regions(shm: Path = SHM, *, min_age_s: float = MIN_AGE_S, owner: int | None = None) -> Removed:
    removed, size = [], 0
    for path in stale_regions(shm, min_age_s=min_age_s, owner=owner):
        try:
            size += path.stat().st_size
            path.unlink()
            removed.append(path)
        except FileNotFoundError:
            continue
    return Removed(tuple(removed), size)


def make_private(pids=None, *, shm: Path = SHM, owner: int | None = None, any_owner: bool = False) -> int:
    """chmod 0600 the regions mapped by ``pids`` (or, without pids, every region of user ``owner``, or with
    ``any_owner`` every region this process may change); returns how many changed. The Python backend creates its
    regions 0644 whatever the umask (Boost.Interprocess sets the mode explicitly), so a request's data would be
    readable by every local user; only the server's own processes, which run as the region's owner, ever open
    them."""
    if pids is not None:
        names = set()
        for pid in pids:
            try:
                with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
                    names |= {line[line.find(f"{shm}/") + len(str(shm)) + 1:].split()[0]
                              for line in maps if f"{shm}/{PREFIX}" in line}
            except OSError:
                continue
        paths = [shm / name for name in names]
    else:
        uid = os.getuid() if owner is None else owner
        paths = [p for p in shm.glob(f"{PREFIX}*") if any_owner or _owner(p) == uid]
    changed = 0
    for path in paths:
        try:
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
                changed += 1
        except OSError:
            continue  # gone, or not ours to change
    return changed


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None
