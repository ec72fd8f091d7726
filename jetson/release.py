"""The L4T release of a Jetson and the JetPack it belongs to, read from the device's own files."""

from __future__ import annotations

import re
from pathlib import Path

NV_TEGRA_RELEASE = Path("/etc/nv_tegra_release")
_RELEASE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)")
# L4T (major, minor) → JetPack, from NVIDIA's release notes.
_JETPACK = {
    (35, 1): "5.0.2", (35, 2): "5.1", (35, 3): "5.1.1", (35, 4): "5.1.2", (35, 5): "5.1.3", (35, 6): "5.1.4",
    (36, 2): "6.0 DP", (36, 3): "6.0", (36, 4): "6.1/6.2", (38, 2): "7.0", (39, 0): "7.2",
}


def parse_nv_tegra_release(text: str) -> str | None:
    """``# R36 (release), REVISION: 4.3, GCID: …`` → ``"36.4.3"``."""
    match = _RELEASE.search(text)
    return f"{match[1]}.{match[2]}" if match else None


def l4t_release(path: Path = NV_TEGRA_RELEASE) -> str | None:
    """This device's L4T release, or None when this is not a Jetson."""
    try:
        return parse_nv_tegra_release(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def jetpack_for(l4t: str | None) -> str | None:
    if not l4t:
        return None
    major, minor = (int(p) for p in l4t.split(".")[:2])
    return _JETPACK.get((major, minor))
