"""The L4T release of a Jetson and the JetPack it belongs to, read from the device's own files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orinkit.jetson.commands import L4T_CORE_PACKAGE, Runner, runner_for

NV_TEGRA_RELEASE = Path("/etc/nv_tegra_release")
_RELEASE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)")
# The package version is the L4T release plus a build stamp: "36.4.7-20250918154033".
_PACKAGE_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)\.(\d+)(?=-|\s|$)")
# L4T (major, minor) → JetPack, from NVIDIA's release notes as collected by rbonghi/jetson_stats
# (jtop/core/jetson_variables.py) and dusty-nv/jetson-containers (jetson_containers/l4t_version.py). Where one minor
# release spans several JetPacks the row names them all, and _JETPACK_PATCH below tells them apart.
_JETPACK = {
    (35, 1): "5.0.2", (35, 2): "5.1", (35, 3): "5.1.1", (35, 4): "5.1.2", (35, 5): "5.1.3",
    (35, 6): "5.1.4/5.1.5/5.1.6", (36, 2): "6.0 DP", (36, 3): "6.0", (36, 4): "6.1/6.2", (36, 5): "6.2.2",
    (38, 2): "7.0", (38, 4): "7.1", (39, 2): "7.2",
}
# Patch releases that are a JetPack of their own; 35.6.3 appears only in jetson_stats.
_JETPACK_PATCH = {
    (35, 6, 0): "5.1.4", (35, 6, 1): "5.1.5", (35, 6, 2): "5.1.5", (35, 6, 3): "5.1.5", (35, 6, 4): "5.1.6",
    (36, 4, 0): "6.1", (36, 4, 3): "6.2", (36, 4, 4): "6.2.1", (36, 4, 7): "6.2.1",
    # JetPack 7.2 is R39.2.0 (June 2026), 7.2.1 R39.2.1 (August 2026): OE4T/meta-tegra #2224, #2281, #2339.
    (39, 2, 0): "7.2", (39, 2, 1): "7.2.1",
}


@dataclass(frozen=True)
class L4TRelease:
    version: str  # "36.4.3"
    source: str  # which file or package said so

    @property
    def major_minor(self) -> tuple[int, int]:
        major, minor = self.version.split(".")[:2]
        return int(major), int(minor)


def parse_nv_tegra_release(text: str) -> str | None:
    """``# R36 (release), REVISION: 4.3, GCID: …`` → ``"36.4.3"``."""
    match = _RELEASE.search(text)
    return f"{match[1]}.{match[2]}" if match else None


def parse_l4t_core_version(text: str) -> str | None:
    """``36.4.7-20250918154033`` → ``"36.4.7"``; also in the ``PACKAGE<tab>VERSION`` of ``dpkg-query -W``."""
    match = _PACKAGE_VERSION.search(text)
    return f"{match[1]}.{match[2]}.{match[3]}" if match else None


def l4t_release(path: Path = NV_TEGRA_RELEASE) -> str | None:
    """This device's L4T release, or None when this is not a Jetson."""
    try:
        return parse_nv_tegra_release(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def find_l4t(root: Path = Path("/"), run: Runner | None = None) -> L4TRelease | None:
    """The L4T release from ``root/etc/nv_tegra_release``; failing that, from the nvidia-l4t-core package, which
    container images and OTA-updated systems keep when the release file is missing or stale."""
    version = l4t_release(root / "etc" / "nv_tegra_release")
    if version:
        return L4TRelease(version, "/etc/nv_tegra_release")
    output = (run or runner_for(root))(L4T_CORE_PACKAGE)
    version = parse_l4t_core_version(output) if output else None
    return L4TRelease(version, "nvidia-l4t-core package") if version else None


def jetpack_for(l4t: str | None) -> str | None:
    if not l4t:
        return None
    parts = [int(p) for p in l4t.split(".")[:3]]
    major, minor, patch = (parts + [0, 0])[:3]
    return _JETPACK_PATCH.get((major, minor, patch)) or _JETPACK.get((major, minor))
