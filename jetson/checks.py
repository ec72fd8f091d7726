"""What on a Jetson is likely to make a benchmark or a deployment go wrong, read from its :class:`DeviceInfo`."""

from __future__ import annotations

from orinkit.jetson.device import DeviceInfo
from orinkit.jetson.triton import triton_mismatch


def warnings_for(info: DeviceInfo, *, triton_version: str | None = None) -> list[str]:
    """One sentence per problem, each saying what to do. Facts that could not be read raise no warning."""
    found = []
    memory = info.memory
    if memory is not None and memory.is_8gb_or_less and memory.swap_total_kb == 0:
        found.append(
            "no swap on an 8 GB board: TensorRT engine builds and model loads can be killed for memory; "
            "enable JetPack's zram (sudo systemctl enable --now nvzramconfig) or add a swap file"
        )
    mode = info.power_mode
    if mode is not None and not mode.is_maxn:
        found.append(
            f"power mode is {mode.name}, not MAXN: clocks are capped below the board's maximum "
            "(sudo nvpmodel -m <MAXN id>; an Orin Nano without the Super update tops out at 15W)"
        )
    if info.clocks_pinned is False:
        found.append(
            "clocks are not pinned: CPU/GPU frequencies scale with load and benchmark numbers drift "
            "(run sudo jetson_clocks after nvpmodel; it does not persist across reboots)"
        )
    if triton_version:
        mismatch = triton_mismatch(info.l4t, triton_version)
        if mismatch:
            found.append(mismatch)
    return found
