"""Which Triton Inference Server release runs on which JetPack.

Jetson builds ship as a tarball on each Triton GitHub release; they are tied to the JetPack's CUDA, TensorRT and
glibc. From the Triton Jetson docs, the release notes and the issue tracker:

==================  =========================================================================================
L4T (JetPack)       Triton
==================  =========================================================================================
R35.1 (5.0.2)       2.27.0
R35.2 (5.1)         2.34.0-jetpack5.1 (the build for JetPack 5.1; 2.35 needs 5.1.1+)
R35.3+ (5.1.1+)     2.35.0-jetpack5.1.2, not 2.27 (the JetPack 5.0.2 build)
R36.2/3 (6.0)       2.42.0-igpu
R36.4/5 (6.1-6.2.2) 2.49.0-igpu; 2.52 and later need glibc 2.36 (JetPack 6 has 2.35) and fail (#8367)
R38 (7.0/7.1)       none: these JetPacks do not support Orin
R39+ (7.2+)         the standard aarch64 (SBSA) builds: Orin runs as an SBSA device, not an iGPU one
==================  =========================================================================================

JetPack 7.2 (L4T R39.2) brings CUDA 13.2, cuDNN 9.20 and TensorRT 10.16 to the Orin (OE4T/meta-tegra #2224).
Triton's 26.02 was its last Jetson release on GitHub; from 26.03 the Orin runs the SBSA (arm64) build, published
as the multi-arch container image (Triton v2.67.0 release notes). An ``-igpu`` build made for JetPack 6 does not
load on an R39 host: the host ships no ``libnvdla_compiler.so`` for it (blakeblackshear/frigate #23582).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from orinkit.jetson.errors import TritonMismatchError
from orinkit.jetson.release import jetpack_for, l4t_release

_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)((?:-[A-Za-z0-9.]+)*)")
_FIRST_GLIBC_BREAK = (2, 52)


@dataclass(frozen=True)
class TritonMatch:
    jetpack: str | None
    release: str | None  # the tarball to use; None where there is none
    note: str


def _major_minor(l4t: str) -> tuple[int, int]:
    major, minor = l4t.split(".")[:2]
    return int(major), int(minor)


def triton_release_for(l4t: str | None) -> TritonMatch | None:
    """None when the L4T release is unknown or older than Orin's first (R35.1)."""
    if not l4t:
        return None
    release = _major_minor(l4t)
    jetpack = jetpack_for(l4t)
    if release >= (39, 0):
        return TritonMatch(jetpack, "aarch64 (SBSA) release",
                           "JetPack 7.2+ runs Orin as an SBSA device: use the standard aarch64 build, not -igpu")
    if release >= (38, 0):
        return TritonMatch(jetpack, None, "JetPack 7.0/7.1 do not support Orin; use JetPack 6.2 or 7.2+")
    if release >= (36, 4):
        return TritonMatch(jetpack, "2.49.0-igpu", "2.52 and later need glibc 2.36 and fail on JetPack 6")
    if release >= (36, 2):
        return TritonMatch(jetpack, "2.42.0-igpu", "the last -igpu build for JetPack 6.0")
    if release >= (35, 3):
        return TritonMatch(jetpack, "2.35.0-jetpack5.1.2", "not 2.27, which was built for JetPack 5.0.2")
    if release >= (35, 2):
        return TritonMatch(jetpack, "2.34.0-jetpack5.1", "the Jetson build for JetPack 5.1; 2.35 needs 5.1.1+")
    if release >= (35, 1):
        return TritonMatch(jetpack, "2.27.0", "the Jetson build for JetPack 5.0.2")
    return None


def parse_triton_version(text: str) -> tuple[tuple[int, int, int], str] | None:
    """``"2.49.0-igpu"`` → ``((2, 49, 0), "-igpu")``; also finds it inside a tarball or folder name."""
    match = _VERSION.search(text)
    if not match:
        return None
    return (int(match[1]), int(match[2]), int(match[3])), match[4].lower()


def triton_mismatch(l4t: str | None, triton_version: str) -> str | None:
    """Why ``triton_version`` does not fit this L4T release, or None when it does (or when nothing is known)."""
    match = triton_release_for(l4t)
    parsed = parse_triton_version(triton_version)
    if match is None or parsed is None:
        return None
    number, suffix = parsed
    shown = f"Triton {triton_version} does not match JetPack {match.jetpack or '?'} (L4T {l4t})"
    release = _major_minor(l4t) if l4t else (0, 0)
    if release >= (39, 0):
        if "igpu" in suffix or "jetpack" in suffix:
            return f"{shown}: {match.note}"
        return None
    if match.release is None:
        return f"{shown}: {match.note}"
    expected, _ = parse_triton_version(match.release) or ((0, 0, 0), "")
    if release >= (36, 4) and number[:2] >= _FIRST_GLIBC_BREAK:
        return f"{shown}: it needs glibc 2.36 and JetPack 6 has 2.35; use {match.release} (#8367)"
    if number != expected:
        return f"{shown}: use {match.release} ({match.note})"
    return None


def triton_version_at(home: Path) -> str | None:
    """The version of the tritonserver unpacked at ``home``: its TRITON_VERSION file (NGC images carry one), else
    a version in the folder's name as the tarball names it (``tritonserver2.49.0-igpu``)."""
    try:
        text = (home / "TRITON_VERSION").read_text().strip()
        if parse_triton_version(text):
            return text
    except OSError:
        pass
    for name in (home.name, home.parent.name):
        match = _VERSION.search(name)
        if match:
            return match[0]
    return None


# How a JetPack 7.2 Orin gets its server: the SBSA build lives in the arm64 container image; its /opt/tritonserver
# copied out runs under orinkit's systemd unit as the tarball did on JetPack 6.
SBSA_HINT = ("on JetPack 7.2 use Triton's SBSA (arm64) build: copy /opt/tritonserver out of the arm64 "
             "nvcr.io/nvidia/tritonserver:<YY.MM>-py3 image (docs: On a Jetson Orin), or point --triton-home at it")


def triton_refusal(l4t: str | None, triton_version: str | None) -> tuple[str, str] | None:
    """Why a tritonserver of ``triton_version`` cannot run at all on this L4T release, and the fix; None where it
    can, or where either is unknown. (:func:`triton_mismatch` also names builds that run but are not the best fit.)"""
    parsed = parse_triton_version(triton_version) if triton_version else None
    if not l4t or parsed is None:
        return None
    (number, suffix), release = parsed, _major_minor(l4t)
    shown = f"Triton {triton_version} cannot run on JetPack {jetpack_for(l4t) or '?'} (L4T {l4t})"
    if release >= (39, 0) and ("igpu" in suffix or "jetpack" in suffix):
        return (f"{shown}: it is a Jetson (iGPU) build, and R39 runs the Orin as an SBSA device without the "
                "libraries such builds load (libnvdla_compiler.so)", SBSA_HINT)
    if (38, 0) <= release < (39, 0):
        return f"{shown}: JetPack 7.0 and 7.1 do not support the Orin", "flash JetPack 6.2 or 7.2+"
    if (36, 4) <= release < (38, 0) and number[:2] >= _FIRST_GLIBC_BREAK:
        return (f"{shown}: it needs glibc 2.36 and JetPack 6 has 2.35 (#8367)",
                "use the 2.49.0-igpu release tarball (docs: On a Jetson Orin)")
    return None


def check_server_fits_device(home: Path, root: Path = Path("/")) -> None:
    """Refuse a tritonserver at ``home`` that cannot load on the Jetson at ``root`` (nothing to check elsewhere)."""
    refusal = triton_refusal(l4t_release(root / "etc" / "nv_tegra_release"), triton_version_at(home))
    if refusal is not None:
        raise TritonMismatchError(refusal[0], hint=refusal[1])

