"""How much memory an engine build may take for its workspace."""

from __future__ import annotations

from pathlib import Path

from orinkit.jetson.memory import parse_meminfo

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
        memory = parse_meminfo(meminfo.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return None if memory is None or memory.available_kb is None else memory.available_kb * 1024


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
