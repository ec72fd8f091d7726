"""How much memory an engine build may take for its workspace."""

from __future__ import annotations

from pathlib import Path

GIB = 1 << 30
TEGRA_RELEASE = Path("/etc/nv_tegra_release")
MEMINFO = Path("/proc/meminfo")


def available_memory(*, tegra_release: Path = TEGRA_RELEASE, meminfo: Path = MEMINFO) -> int:
    """Free bytes the GPU can use now.

    On a Jetson the GPU shares the DRAM with the CPU and cudaMemGetInfo under-reports what the kernel can
    reclaim, so MemAvailable is the better figure; elsewhere ask CUDA; without pycuda assume 1 GiB.
    """
    if tegra_release.exists():
        available = _mem_available(meminfo)
        if available is not None:
            return available
    try:
        return _cuda_free()
    except Exception:  # no pycuda, no driver, no GPU: any of them leaves the guess
        return GIB


def _mem_available(meminfo: Path) -> int | None:
    try:
        lines = meminfo.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition(":")
        if key == "MemAvailable":
            return int(value.split()[0]) * 1024  # the kernel reports kB
    return None


def _cuda_free() -> int:
    from orinkit.core.optional import require

    cuda = require("pycuda.driver")
    cuda.init()
    context = cuda.Device(0).make_context()
    try:
        return int(cuda.mem_get_info()[0])
    finally:
        context.pop()
        context.detach()
